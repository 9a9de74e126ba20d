"""The project's own WhatsApp cases (tests/scenarios/whatsapp/, same format as tests/cases/) through the case runner:
an uncertain send reported uncertain and shown once (no idempotency key: never resent), 131047 a clear failure,
131056 waited out, the real 8.5k-character Markdown answer as block replies under the documented limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamrelay.app.cases import run_case_file

CASES = sorted((Path(__file__).resolve().parent / "whatsapp").glob("*.json"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_whatsapp_case(path: Path) -> None:
    result = await run_case_file(path)
    assert result.passed, "\n".join(result.failures)
