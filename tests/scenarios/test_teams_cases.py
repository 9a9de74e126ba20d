"""The project's own Teams cases (tests/scenarios/teams/, same format as tests/cases/) through the case runner: an
uncertain send reported uncertain and shown once (no idempotency key, no history a bot can read: never resent), a 429
with Retry-After waited out, an update stored then answered 502 repeated safely, a sub-agent in a channel's reply
chain, the real 8.5k-character Markdown answer under the documented limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamrelay.app.cases import run_case_file

CASES = sorted((Path(__file__).resolve().parent / "teams").glob("*.json"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_teams_case(path: Path) -> None:
    result = await run_case_file(path)
    assert result.passed, "\n".join(result.failures)
