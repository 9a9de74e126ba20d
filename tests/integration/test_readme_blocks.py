"""Every shell block of the README and of the docs site, pasted in order into one fresh shell (issues 14, 25).

The blocks are read in the order a reader meets them: README.md, then the pages of mkdocs.yml's ``nav`` in its
order, each with the files it includes whole (``--8<-- "deploy/README.md"``: that file's blocks, where the include
stands); a page's include of a README section (``--8<-- "README.md:dry-run"``) shows blocks already read from the
README, so it adds none. Each ```sh block says, on the line right before its fence, whether this test runs it:
``<!-- readme-test: run -->``, or ``<!-- readme-test: skip — why; the test that covers it instead -->`` where running
it here is impossible (a real bot token, packages installed with sudo, a Docker daemon, a cluster) or far too long (a
1,000-run campaign). A block that needs what this flow cannot assume (a ``redis-server``) says
``<!-- readme-test: run alone — why -->``: it is pasted into a shell of its own, on free ports instead of its own,
and must leave nothing running (the last test here).

The blocks marked ``run`` are pasted, in that order, into ONE bash session: cwd the repository's root, an
environment without any ``STREAMRELAY_*`` / ``TELEGRAM_*`` variable (so no token is set), and an ``echo '== block N'``
separator before each block (``== end N rc=$?`` after it). The curl example is pasted twice (a second later), as a
reader who tries it again would: each paste is a new run, delivered. After the last block the shell stops the dry-run
block's background jobs as that block says (``kill %1 %2``). What the test changes, and why:

- ports 8081 (the mock) and 8787 (the sidecar) become free ones, so the test never meets another process, and the
  values no block can be told by text come from the environment: ``STREAMRELAY_SERVICE__PORT`` (``serve`` with no
  ``--port``) and ``STREAMRELAY_URL`` (where ``replay``, ``runs`` and examples/parent_loop.py look by default);
- the sidecar's ledger is the test's own (``STREAMRELAY_SERVICE__LEDGER``), and the case runner writes its
  transcripts into the test's folder instead of ``out/cases``: nothing is written into the working tree;
- the single line not run: ``uv run pytest`` in the Quick start block, which is this suite itself.

Then every block's observable result is checked: the demo exits 0 and its checks say yes, the replay's report is
delivered, the mock control API answers, the curl example is delivered twice with two run ids, the pipeline stream
prints the run's units ending with ``run.end``, the parent loop prints what the README shows, ``/watch`` answers an
absolute URL, the case runner passes every case (but those tests/scenarios/test_cases.py lists as not built yet, which
must fail), ``streamrelay runs`` lists the runs and explains that SQLite keeps no dead letters, and ``streamrelay
deliveries`` lists a refused answer, resends it once and refuses to resend it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.contention import wait_scale
from tests.deploy.support import redis_server
from tests.ports import free_port
from tests.scenarios.test_cases import NOT_YET

pytestmark = pytest.mark.timeout(270)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SITE = ROOT / "mkdocs.yml"

INCLUDE = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"[ \t]*$', re.M)

SH_BLOCK = re.compile(r"^```sh\n(?P<body>.*?)^```[ \t]*\n", re.S | re.M)
MARKER = re.compile(r"<!-- readme-test: (?:(?P<run>run)|run alone — (?P<alone>.+)|skip — (?P<why>.+)) -->")
TEXT_AFTER = re.compile(r"\s*```text\n(?P<body>.*?)^```", re.S | re.M)
TEST_FILE = re.compile(r"\btests/[\w/]+\.py\b")
PYTEST_LINE = re.compile(r"^uv run pytest\b.*\n", re.M)


@dataclass
class Block:
    number: int  # 1, 2, … in reading order (README, then the pages), counting every sh block
    where: str  # the fence's file and line: "docs/ingest.md:40"
    body: str
    marker: str | None  # the whole comment on the line right before the fence, if it is one
    run: bool
    why: str | None  # a skip's reason
    alone: str | None  # why it runs alone, in a shell of its own
    output: str | None  # the ```text block right after it (its sample output), if any


def _nav_pages(nav: list[Any]) -> list[str]:
    """The Markdown files of mkdocs.yml's ``nav``, in its order (sections flattened)."""
    pages: list[str] = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _documents() -> list[tuple[Path, str, int]]:
    """What a reader reads, in order: (file, text, the text's first line in that file).

    README.md, then every nav page, split where it includes a whole file: that file comes in between. A README
    section's include is left out: its blocks were read from the README."""
    docs_dir = ROOT / str(yaml.safe_load(SITE.read_text(encoding="utf-8")).get("docs_dir", "docs"))
    nav = yaml.safe_load(SITE.read_text(encoding="utf-8"))["nav"]
    documents = [(README, README.read_text(encoding="utf-8"), 1)]
    for page in _nav_pages(nav):
        path = docs_dir / page
        text, at, line = path.read_text(encoding="utf-8"), 0, 1
        for found in INCLUDE.finditer(text):
            documents.append((path, text[at : found.start()], line))
            line += text.count("\n", at, found.end())
            at = found.end()
            included = ROOT / found.group("path")
            if found.group("section") is None:
                documents.append((included, included.read_text(encoding="utf-8"), 1))
            else:
                assert included == README, f"{path}: includes a part of {included}, which no test reads blocks from"
        documents.append((path, text[at:], line))
    return documents


def _blocks(documents: list[tuple[Path, str, int]]) -> list[Block]:
    blocks: list[Block] = []
    for path, text, first_line in documents:
        blocks += _blocks_of(path, text, first_line, len(blocks) + 1)
    return blocks


def _blocks_of(path: Path, text: str, first_line: int, first_number: int) -> list[Block]:
    blocks = []
    for number, found in enumerate(SH_BLOCK.finditer(text), first_number):
        before = text[: found.start()].split("\n")[-2:][0].strip()  # the line right before the fence, blank or not
        marker = MARKER.fullmatch(before)
        found_at = first_line + text.count("\n", 0, found.start())
        text_after = TEXT_AFTER.match(text, found.end())
        blocks.append(
            Block(
                number=number,
                where=f"{path.relative_to(ROOT)}:{found_at}",
                body=found.group("body"),
                marker=before or None,
                run=bool(marker and marker.group("run")),
                why=marker.group("why") if marker else None,
                alone=marker.group("alone") if marker else None,
                output=text_after.group("body") if text_after else None,
            )
        )
    return blocks


def _free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]  # never the same one twice (tests/ports.py)


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one after the other in ``text`` (curl prints no newline after them)."""
    decoder, found, at = json.JSONDecoder(), [], text.find("{")
    while at != -1:
        value, end = decoder.raw_decode(text, at)
        found.append(value)
        at = text.find("{", end)
    return found


def _words(text: str) -> str:
    """``text`` with its whitespace runs as one space (rich wraps its lines at 80 columns off a terminal)."""
    return " ".join(text.split())


def test_every_sh_block_says_whether_this_test_runs_it() -> None:
    blocks = _blocks(_documents())
    assert len(blocks) >= 17  # 13 in the README before it became the docs site, 4 in deploy/README.md
    for block in blocks:
        where = f"{block.where} (sh block {block.number})"
        assert block.marker is not None, f"{where}: no <!-- readme-test: run|skip — why --> on the line before it"
        assert MARKER.fullmatch(block.marker), f"{where}: not a readme-test marker: {block.marker}"
        if not block.run and block.alone is None:
            assert block.why is not None
            covered = TEST_FILE.findall(block.why)
            assert covered, f"{where}: a skip names the test that covers the block instead: {block.why}"
            for path in covered:
                assert (ROOT / path).is_file(), f"{where}: {path} does not exist"


@dataclass
class Pasted:
    """One paste's output, between its separators, and the exit code of its last command."""

    stdout: str
    stderr: str
    rc: int


@dataclass
class Flow:
    blocks: list[Block]
    pasted: dict[str, Pasted]  # by label: "3", and "5 again" for the second paste of the curl example
    sidecar: str  # http://127.0.0.1:<port>
    out: Path  # the case runner's transcripts


def _sections(stream: str) -> dict[str, str]:
    parts = re.split(r"== block (.+)\n", stream)  # curl's answers end without a newline: not at a line's start
    return {label: text for label, text in zip(parts[1::2], parts[2::2], strict=True)}


def _check_demo(flow: Flow, run: Pasted) -> None:
    """The default demo (the long Markdown recording on the mock Telegram): delivered in 3-4 fitting messages, no
    429, its checks all yes. The only run of the default demo in the suite (test_cli.py's own run of it, with
    ``--pace-ms 1``, checked the same and was merged here: the same command, one interpreter and demo less)."""
    assert run.rc == 0, run.stdout[-3000:]
    rows = dict(re.findall(r"^│ ([a-z0-9][\w ,]*?)\s+│ (\S+)", run.stdout, re.M))
    assert rows["status"] == "delivered"
    for check in ("every message fits", "fences balanced", "answer shown once, whole"):
        assert rows[check] == "yes", (check, run.stdout[-3000:])
    assert rows["429 answers"] == "0", run.stdout[-3000:]
    shown = re.search(r"shows: (\d+) message", run.stdout)
    assert shown is not None and 3 <= int(shown.group(1)) <= 4, run.stdout[-3000:]
    assert "Algorithms & Data Structures Summary" in run.stdout


def _check_dry_run(flow: Flow, run: Pasted) -> None:
    assert run.rc == 0, run.stderr[-3000:]
    reports = [o for o in _objects(run.stdout) if "status" in o]
    assert len(reports) == 1, run.stdout[-3000:]
    assert reports[0]["status"] == "delivered" and reports[0]["channel"] == "telegram", reports[0]


def _check_mock_control(flow: Flow, run: Pasted) -> None:
    state, faults, outage, message, reset = _objects(run.stdout)
    assert state["platform"] == "telegram" and state["chats"]["42"], state  # the replay's messages
    assert faults["applied"]["faults"][0]["method"] == "sendMessage", faults
    assert outage["applied"]["outage"]["seconds"] == 8, outage
    assert message["chat_id"] == 42 and isinstance(message["message_id"], int), message
    assert reset == {"reset": True}


def _curl_run(run: Pasted) -> str:
    accepted, answer = _objects(run.stdout)
    assert accepted == {"accepted": 4}
    assert answer["status"] == "delivered" and answer["channel"] == "telegram", answer
    return str(answer["run"])


def _check_curl(flow: Flow, run: Pasted) -> None:
    first = _curl_run(run)
    again = next(p for label, p in flow.pasted.items() if label.endswith(" again"))
    assert _curl_run(again) != first  # a new run each time it is pasted


def _last_run(flow: Flow) -> str:
    """The ``$RUN`` the later blocks use: the curl example's second paste's."""
    return _curl_run(next(p for label, p in flow.pasted.items() if label.endswith(" again")))


def _check_pipeline(flow: Flow, run: Pasted) -> None:
    assert run.rc == 0, run.stderr[-2000:]
    units = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert units and units[-1]["kind"] == "run.end" and units[-1]["status"] == "ok", units
    assert [u["index"] for u in units] == list(range(1, len(units) + 1))
    assert {u["run"] for u in units} == {_last_run(flow)}


def _check_parent_loop(flow: Flow, run: Pasted, block: Block) -> None:
    assert run.rc == 0, run.stderr[-3000:]
    assert block.output is not None, f"{block.where}: the parent loop's output is shown in a text block right after it"
    assert run.stdout.splitlines() == block.output.splitlines()


def _check_watch(flow: Flow, run: Pasted) -> None:
    (answer,) = _objects(run.stdout)
    assert answer["started"] is True, answer
    assert answer["url"].startswith(f"{flow.sidecar}/runs/{_last_run(flow)}?token="), answer  # absolute


def _check_cases(flow: Flow, run: Pasted) -> None:
    cases = sorted((ROOT / "tests" / "cases").glob("*.json"))
    results = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in flow.out.glob("cases/*.json")}
    assert len(results) == len(cases), (sorted(results), run.stdout[-3000:])
    failed = {cid for cid, result in results.items() if not result["passed"]}
    assert failed == set(NOT_YET), {cid: results[cid]["failures"] for cid in failed ^ set(NOT_YET) if cid in results}
    assert run.rc == (1 if NOT_YET else 0)
    assert f"{len(cases) - len(failed)} passed" in run.stdout


def _check_runs(flow: Flow, run: Pasted) -> None:
    none_kept = "the SQLite backend (one process) keeps no dead letters"
    assert re.search(r"^\d+ active runs?\b", run.stdout, re.M), run.stdout  # runs: the table, of this sidecar
    assert none_kept in _words(run.stdout), run.stdout  # runs --dead
    assert f"error: {none_kept}" in _words(run.stderr), run.stderr  # runs retry: one line, exit 2 (fix the call)
    assert run.rc == 2


def _check_deliveries(flow: Flow, run: Pasted) -> None:
    words = _words(run.stdout)
    report = next(o for o in _objects(run.stdout) if "status" in o)
    assert (report["status"], report["failed"]) == ("failed", 1), report  # the mock refused the answer once
    assert re.search(r"\d+ deliver(y|ies) listed", words) and "failed" in words, run.stdout  # listed
    assert re.search(r"dlv-[0-9a-f]{12}: delivered: sent as message \d+", words), run.stdout  # resent once
    assert "never resent" in _words(run.stderr), run.stderr  # and never again: one line, exit 1
    assert run.rc == 1


CheckOne = Callable[[Flow, Pasted], None]
CHECKS: dict[str, CheckOne] = {  # a run block is known by what it holds
    "streamrelay demo": _check_demo,
    "uv run streamrelay replay": _check_dry_run,
    "/_mock/state": _check_mock_control,
    "/events <<": _check_curl,
    "/pipeline/stream": _check_pipeline,
    "/watch": _check_watch,
    "uv run streamrelay case ": _check_cases,
    "uv run streamrelay runs": _check_runs,
    "uv run streamrelay deliveries": _check_deliveries,
}


def _script(blocks: list[Block], mock_port: int, sidecar_port: int, out: Path) -> str:
    lines = []
    for block in blocks:
        body = block.body
        if "streamrelay demo" in body:
            assert len(PYTEST_LINE.findall(body)) == 1
            body = PYTEST_LINE.sub("", body)  # the suite itself (module docstring)
        pastes = [str(block.number)]
        if "/events <<" in body:
            pastes.append(f"{block.number} again")  # a second later: `date +%s` names the new run
        for label in pastes:
            if label.endswith(" again"):
                lines.append("sleep 1")
            lines += [
                f"echo '== block {label}'; echo '== block {label}' >&2",
                body.rstrip("\n"),
                f'echo "== end {label} rc=$?"',
            ]
    lines += ["kill %1 %2", "wait"]  # the dry-run block: "`kill %1 %2` stops them"
    script = "\n".join(lines) + "\n"
    script = script.replace("8081", str(mock_port)).replace("8787", str(sidecar_port))
    return script.replace(" out/cases", f" {out}/cases")


def test_the_readme_blocks_work_pasted_in_order_into_one_fresh_shell(tmp_path: Path) -> None:
    blocks = [b for b in _blocks(_documents()) if b.run]
    assert len(blocks) >= 10  # the ten the README ran before it became the docs site
    mock_port, sidecar_port = _free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRELAY_", "TELEGRAM_"))}
    env["STREAMRELAY_SERVICE__PORT"] = str(sidecar_port)  # the values no block can be told by text
    env["STREAMRELAY_URL"] = f"http://127.0.0.1:{sidecar_port}"
    env["STREAMRELAY_SERVICE__LEDGER"] = str(tmp_path / "ledger.sqlite3")
    shell = subprocess.Popen(
        ["bash", "-c", _script(blocks, mock_port, sidecar_port, tmp_path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its background jobs in its own process group, killed whatever happens
    )
    try:
        # 225 s before the desk's block (3 CLI starts)
        stdout, stderr = shell.communicate(timeout=255 * wait_scale())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    assert shell.returncode == 0, (stdout + stderr)[-4000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-4000:]
    outs, errs = _sections(stdout), _sections(stderr)
    flow = Flow(blocks, {}, f"http://127.0.0.1:{sidecar_port}", tmp_path)
    for label, text in outs.items():
        ended = re.search(rf"== end {re.escape(label)} rc=(\d+)\n", text)
        assert ended is not None, f"block {label} did not end: {text[-2000:]}"
        flow.pasted[label] = Pasted(text[: ended.start()], errs.get(label, ""), int(ended.group(1)))
    assert set(flow.pasted) == {str(b.number) for b in blocks} | {
        f"{b.number} again" for b in blocks if "/events <<" in b.body
    }
    for block in blocks:
        run = flow.pasted[str(block.number)]
        if "examples/parent_loop.py" in block.body:
            _check_parent_loop(flow, run, block)
            continue
        checks = [check for needle, check in CHECKS.items() if needle in block.body]
        assert len(checks) == 1, f"{block.where}: a block marked run needs exactly one check here"
        checks[0](flow, run)
        if checks[0] not in (_check_runs, _check_deliveries):  # their last lines fail in one line, as the docs say
            assert "error:" not in run.stderr, run.stderr[-3000:]


ALONE_PORT = re.compile(r"(?<![\w.~])[68]\d{3}(?![\w.])")  # 6390 (Redis), 8082, 8790… in a block that runs alone
REDIS_PORT = re.compile(r"redis-server [^\n]*--port (\d+)")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _on_ports(body: str, ports: dict[str, str]) -> str:
    """``body`` with each of its ports replaced as ``ports`` says."""
    return ALONE_PORT.sub(lambda found: ports[found.group()], body)


@pytest.mark.timeout(420)
def test_the_blocks_that_run_alone_work_pasted_each_into_a_fresh_shell(tmp_path: Path) -> None:
    """The replicas block (docs/replicas.md): Redis on loopback, a mock, three replicas; a run streamed into one is
    listed by another while it streams and delivered; the block's last line leaves nothing running."""
    blocks = [b for b in _blocks(_documents()) if b.alone is not None]
    assert [b.where.split(":")[0] for b in blocks] == ["docs/replicas.md"]
    for block in blocks:
        if "redis-server" in block.body:
            redis_server()  # skips without one (fails with STREAMRELAY_REQUIRE_REDIS=1, as in CI)
        ports = sorted(set(ALONE_PORT.findall(block.body)))
        free = dict(zip(ports, map(str, _free_ports(len(ports))), strict=True))
        script = _on_ports(block.body, free)
        redis_port = REDIS_PORT.search(script)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRELAY_", "TELEGRAM_"))}
        env["STREAMRELAY_SERVICE__LEDGER"] = str(tmp_path / "ledger.sqlite3")  # never config/var
        shell = subprocess.Popen(
            ["bash", "-c", script],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = shell.communicate(timeout=400 * wait_scale())
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
            if redis_port and _listening(int(redis_port.group(1))):  # daemonized: its own session
                subprocess.run(["redis-cli", "-p", redis_port.group(1), "shutdown", "nosave"], check=False)
        where = f"{block.where} (run alone)"
        assert shell.returncode == 0, f"{where}: {(stdout + stderr)[-4000:]}"
        assert "Traceback" not in stdout + stderr, f"{where}: {(stdout + stderr)[-4000:]}"
        (report,) = [o for o in _objects(stdout) if "status" in o]
        assert report["status"] == "delivered" and report["channel"] == "telegram", report
        listed = re.search(r"^(\d+) active runs?\b", stdout, re.M)
        listing = f"{where}: runs should list the run while it streams: {stdout[-3000:]}"
        assert listed is not None and int(listed.group(1)) >= 1, listing
        assert report["run"] in _words(stdout.split("live pages:")[-1]), listing  # by another replica
        left = [int(port) for port in free.values() if _listening(int(port))]
        assert left == [], f"{where}: still listening on {left}"
