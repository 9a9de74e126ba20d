"""``python -m app`` runs the ``streamrelay`` command."""

from app.cli import main

main()
