"""Every case of tests/cases/ (copied unmodified from shared/cases/) through the project's case runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamrelay.app.cases import run_case_file

CASES = Path(__file__).resolve().parent.parent / "cases"

NOT_YET: dict[str, str] = {}
"""Cases of capabilities that do not exist yet, with the issue that brings them (strict: they must fail)."""


def _params() -> list[object]:
    out: list[object] = []
    for path in sorted(CASES.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        marks = [pytest.mark.xfail(reason=NOT_YET[case["id"]], strict=True)] if case["id"] in NOT_YET else []
        out.append(pytest.param(path, id=case["id"], marks=marks))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", _params())
async def test_case(path: Path) -> None:
    result = await run_case_file(path)
    assert result.passed, "\n".join(result.failures)
