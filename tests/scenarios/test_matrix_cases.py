"""The project's own Matrix cases (tests/scenarios/matrix/, same format as tests/cases/) through the case runner:
an uncertain send made exactly once by its transaction id, M_LIMIT_EXCEEDED's retry_after_ms honoured, the real
8.5k-character Markdown answer under Synapse's default rc_message."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamrelay.app.cases import run_case_file

CASES = sorted((Path(__file__).resolve().parent / "matrix").glob("*.json"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_matrix_case(path: Path) -> None:
    result = await run_case_file(path)
    assert result.passed, "\n".join(result.failures)
