"""The README's dry-run block and its curl example, pasted in order into a fresh shell (no STREAMRELAY_TOKEN set):
the replay waits for the sidecar it started in the background and is delivered, and the curl example delivers a new
run each time it is pasted (issue 14). Only the ports are changed (free ones, so that the test never meets another
process), and the ledger is the test's own."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _block_after(readme: str, heading: str) -> str:
    start = readme.index(heading)
    found = re.search(r"```sh\n(.*?)```", readme[start:], re.S)
    assert found is not None, heading
    return found.group(1)


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one after the other in ``text``."""
    decoder, found, at = json.JSONDecoder(), [], text.find("{")
    while at != -1:
        value, end = decoder.raw_decode(text, at)
        found.append(value)
        at = text.find("{", end)
    return found


def test_the_dry_run_block_and_the_curl_example_work_as_pasted(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    dry_run = _block_after(readme, "To dry-run without a platform")
    curl = _block_after(readme, "### Streaming into the sidecar")
    mock_port, sidecar_port = _free_port(), _free_port()
    script = "\n".join([dry_run, "echo '== curl 1'", curl, "sleep 1", "echo '== curl 2'", curl, "kill %1 %2", "wait"])
    script = script.replace("8081", str(mock_port)).replace("8787", str(sidecar_port))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRELAY_", "TELEGRAM_"))}
    env["STREAMRELAY_SERVICE__PORT"] = str(sidecar_port)  # the only value the block cannot be told by text
    env["STREAMRELAY_URL"] = f"http://127.0.0.1:{sidecar_port}"
    env["STREAMRELAY_SERVICE__LEDGER"] = str(tmp_path / "ledger.sqlite3")
    shell = subprocess.Popen(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its background jobs in its own process group, killed whatever happens
    )
    try:
        stdout, stderr = shell.communicate(timeout=200)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    result = subprocess.CompletedProcess(shell.args, shell.returncode, stdout, stderr)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Traceback" not in output and "error:" not in output, output[-4000:]
    assert f"waiting for the sidecar at http://127.0.0.1:{sidecar_port}…" in result.stderr
    replayed, first, second = (
        result.stdout.split("== curl 1")[0],
        *result.stdout.split("== curl 1")[1].split("== curl 2"),
    )
    report = json.loads(replayed[replayed.index("{\n") :])
    assert report["status"] == "delivered" and report["channel"] == "telegram"
    runs = []
    for pasted in (first, second):
        accepted, answer = _objects(pasted)  # curl prints no newline after the first
        assert accepted == {"accepted": 4}
        assert answer["status"] == "delivered", answer
        runs.append(answer["run"])
    assert runs[0] != runs[1]
