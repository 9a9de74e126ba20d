"""``streamrelay case`` runs several case files at once (:func:`app.cases.runner.start_case_files`), each scenario
with its own mock and sidecar on free ports in one event loop, and reports them in the files' order; the scenarios of
a platform whose SDK keeps process-wide state (discord.py's ``Route.BASE``) run one at a time."""

from __future__ import annotations

from pathlib import Path

from streamrelay.app.cases import start_case_files
from streamrelay.app.cases.runner import ONE_AT_A_TIME, case_platform

CASES = Path(__file__).resolve().parents[1] / "cases"


async def test_cases_run_at_once_come_back_in_the_files_order_and_two_discord_scenarios_both_pass() -> None:
    files = [
        CASES / "send-5xx-before-commit-discord.json",  # a scenario, ~2.6 s
        CASES / "text-replace.json",  # a unit case: reported second, whenever it ends
        CASES / "send-5xx-after-commit-discord.json",  # beside the first it would meet its Route.BASE: run after it
        CASES / "sep-between-messages.json",  # a Telegram scenario, beside the Discord ones
    ]
    assert "discord" in ONE_AT_A_TIME
    runs = await start_case_files(files, concurrency=4)
    results = [await run for run in runs]
    assert [r.id for r in results] == [p.stem for p in files]
    assert all(r.passed for r in results), {r.id: r.failures for r in results if not r.passed}


def test_case_platform_names_a_scenarios_platform_and_nothing_else(tmp_path: Path) -> None:
    assert case_platform(CASES / "fence-split-discord.json") == "discord"
    assert case_platform(CASES / "text-replace.json") is None  # a unit case
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    assert case_platform(tmp_path / "broken.json") is None  # run_case_file reports it
    assert case_platform(tmp_path / "missing.json") is None
