"""Every case of tests/cases/ (copied unmodified from shared/cases/) through the project's case runner.

Cases the project cannot pass yet are expected failures naming the issue that brings them; they run
anyway (strict xfail), so one that starts passing is noticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cases import run_case_file

CASES = Path(__file__).resolve().parent.parent / "cases"

NOT_YET: dict[str, str] = {
    "web": "issue 5: the web channel",
}


def _params() -> list[object]:
    out: list[object] = []
    for path in sorted(CASES.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        marks = []
        platform = case.get("channel", {}).get("platform")
        if case["type"] == "scenario" and platform in NOT_YET:
            marks.append(pytest.mark.xfail(reason=NOT_YET[platform], strict=True))
        out.append(pytest.param(path, id=case["id"], marks=marks))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", _params())
async def test_case(path: Path) -> None:
    result = await run_case_file(path)
    assert result.passed, "\n".join(result.failures)
