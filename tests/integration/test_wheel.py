"""The installable package as a user gets it (issue 25, item 3): a wheel whose only import name is ``streamrelay``,
installed into a fresh virtual environment with the runtime dependencies alone, runs its demo from any folder (the
recording ships inside the package) and gives a bot ``from streamrelay import RelayClient``.

uv builds the wheel and installs it with the versions of uv.lock (exported as constraints): from uv's cache where the
project's own ``uv sync`` left a wheel uv can reuse, else from the package registry. (It installed ``--offline``
before; on a fresh machine, where ``.ci/run``'s ``uv sync --frozen`` had only filled the cache by the lock's URLs,
that resolver found no aiohttp it could use without the registry and the test failed.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.contention import wait_scale

ROOT = Path(__file__).resolve().parents[2]
DEV_TOOLS = ("pytest", "mypy", "ruff", "hypothesis", "playwright", "mkdocs")


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (the README's commands need it)")
    return uv


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    env.update({"COLUMNS": "100", "NO_COLOR": "1"})
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout * wait_scale())
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_installs_one_package_whose_demo_runs_without_the_checkout(tmp_path: Path) -> None:
    uv = _uv()
    _run([uv, "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(ROOT)], cwd=ROOT)
    (wheel,) = (tmp_path / "dist").glob("streamrelay-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"streamrelay", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "streamrelay/recordings/anthropic/markdown-long-fences.jsonl" in names
    assert "streamrelay/config/channels.toml" in names

    venv = tmp_path / "venv"
    _run([uv, "venv", "--quiet", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    constraints = tmp_path / "constraints.txt"
    _run(
        [uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--quiet", "-o", str(constraints)],
        cwd=ROOT,
    )
    _run([uv, "pip", "install", "--quiet", "--python", str(python), "-c", str(constraints), str(wheel)], cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"  # no checkout here: the demo finds its recording in the package
    elsewhere.mkdir()
    demo = _run([str(venv / "bin" / "streamrelay"), "demo", "--pace-ms", "1"], cwd=elsewhere)
    assert "delivered" in demo.stdout
    row = next(line for line in demo.stdout.splitlines() if "answer shown once, whole" in line)
    assert row.replace("│", " ").split("answer shown once, whole")[1].split()[0] == "yes", row

    probe = (
        "import importlib.util, streamrelay\n"
        "from streamrelay import RelayClient\n"
        f"print(RelayClient.__module__, [m for m in {DEV_TOOLS!r} if importlib.util.find_spec(m)])\n"
    )
    out = _run([str(python), "-c", probe], cwd=elsewhere).stdout.split()
    assert out == ["streamrelay.app.client", "[]"], out
