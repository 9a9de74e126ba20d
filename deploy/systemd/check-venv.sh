#!/bin/sh
# Usage: check-venv.sh VENV
# Exit 1, with one line saying what to do, when VENV's Python cannot start under the unit's ProtectHome=yes: its
# interpreter (followed through the venv's symlinks) lives under /home, /root or /run/user (uv's default
# ~/.local/share/uv/python, pyenv's ~/.pyenv), which the sandbox hides: the service would die with exit 127.
# The unit runs it as ExecStartPre=+ (outside the sandbox, so it can see where the link leads).
venv=${1:?usage: check-venv.sh VENV}
python=$(readlink -f "$venv/bin/python" 2>/dev/null)
if [ -z "$python" ] || [ ! -x "$python" ]; then
    echo "streamrelay: no Python in $venv: create it (deploy/README.md, systemd)" >&2
    exit 1
fi
case "$python" in
    /home/* | /root/* | /run/user/*)
        echo "streamrelay: $venv's Python is $python, hidden by ProtectHome=yes: recreate the venv with" \
            "UV_PYTHON_INSTALL_DIR=/opt/streamrelay/python uv sync --frozen --no-dev --managed-python" \
            "(deploy/README.md, systemd)" >&2
        exit 1
        ;;
esac
exit 0
