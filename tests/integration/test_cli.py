"""The README's commands as a user runs them: `streamrelay demo`, `streamrelay case`. The default demo (the README's
first command) is run and checked once, by tests/integration/test_readme_blocks.py (its ``_check_demo``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.contention import wait_scale

ROOT = Path(__file__).resolve().parents[2]


def _streamrelay(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the CLI; ``timeout`` is a hang guard for an idle machine, stretched by the load as it starts (a case run of
    two files, the Telegram SDK's import in it, passed 120 s at load ~17 on 2 cores)."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "streamrelay", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout * wait_scale(),
    )


def test_case_command_writes_transcripts_and_exits_nonzero_on_failure(tmp_path: Path) -> None:
    cases = ROOT / "tests" / "cases"
    done = _streamrelay(
        "case", str(cases / "text-replace.json"), str(cases / "sep-between-messages.json"), "--out", str(tmp_path)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # progress on stderr (not a terminal here, as in a CI log): a line per case as it ends, in the given order
    ended = [line.split()[:3] for line in done.stderr.splitlines() if line.strip() and not line.startswith("  ")]
    assert ended == [["1/2", "pass", "text-replace"], ["2/2", "pass", "sep-between-messages"]], done.stderr
    transcript = json.loads((tmp_path / "sep-between-messages.json").read_text())
    assert transcript["chat"][0]["text"] == "Saved with durable\n\nNext step done."
    assert transcript["report"]["status"] == "delivered"
    assert json.loads((tmp_path / "text-replace.json").read_text())["visible"] == "Hello, world"

    wrong = json.loads((cases / "sse-resume-no-duplicates.json").read_text())
    wrong["id"], wrong["expect"] = "wrong-expectation", {"chat": ["Hello world"]}
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    failed = _streamrelay("case", str(tmp_path / "wrong.json"), "--out", str(tmp_path / "out"))
    assert failed.returncode == 1
    failures = json.loads((tmp_path / "out" / "wrong-expectation.json").read_text())["failures"]
    assert failures and "Hello world, again" in failures[0]


def test_demo_on_discord_shows_the_answer_and_refuses_native_delivery_clearly() -> None:
    done = _streamrelay("demo", "--platform", "discord", "--pace-ms", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "answer shown once, whole │ yes" in done.stdout and "429 answers              │ 0" in done.stdout

    refused = _streamrelay("demo", "--platform", "discord", "--delivery", "native")
    assert refused.returncode == 2
    assert "discord has no native streaming" in " ".join((refused.stdout + refused.stderr).split())
