"""``python -m streamrelay`` runs the ``streamrelay`` command."""

from streamrelay.app.cli import main

main()
