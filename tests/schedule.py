"""The order pytest-xdist hands the suite's work units to its workers: longest first (issue 25, item 7).

Under ``--dist loadgroup`` a work unit is an ``xdist_group`` (every test of it runs on one worker, in order) or a
single ungrouped test; xdist hands them out one at a time as workers run low, in its queue's order: by default the
units with the most tests first, then the single tests in collection order (tests/browser, contract, deploy, fuzz,
integration, …, unit). A unit of few but long tests (a chaos campaign: 4 tests, 100-160 s; the README blocks: one test,
136 s) could so start late and run alone while the other workers had finished: the run's tail. :class:`LongestFirst`
orders the queue by each unit's expected seconds instead (longest-processing-time-first, which keeps a tail shorter
than the longest unit): :data:`KNOWN_SECONDS` for the slow tests and groups measured in CI's ``--durations`` output,
else :data:`FOLDER_SECONDS` per test by its folder. The figures only order the queue: a wrong one makes a run
longer, never a test fail.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

KNOWN_SECONDS: Mapping[str, float] = {
    # xdist groups (tests/conftest.py names them: a fixture's file, a cluster group, or the test's own mark)
    "chaos-exclusive": 160.0,
    "chaos-idle-closed": 105.0,
    "chaos-replicated": 97.0,
    "chaos-shared": 61.0,
    "tests/redis:clusters-1": 210.0,
    "tests/redis:clusters-2": 190.0,
    "tests/redis:clusters-3": 160.0,
    "tests/redis/test_replicas_any.py": 25.0,
    "tests/fuzz/test_ingest_fuzz.py": 80.0,
    "tests/fuzz/test_ingest_fuzz_run_ids.py": 60.0,
    "tests/fuzz/test_ingest_fuzz_runs.py": 60.0,
    "tests/fuzz/test_ingest_fuzz_providers.py": 60.0,
    # single tests (a node id, or the start of one: every test it names)
    "tests/integration/test_readme_blocks.py::test_the_readme_blocks_work_pasted_in_order_into_one_fresh_shell": 136.0,
    "tests/integration/test_readme_blocks.py::test_the_blocks_that_run_alone_work": 61.0,
    "tests/deploy/test_compose.py": 52.0,
    "tests/deploy/test_k8s": 35.0,
    "tests/deploy/test_dockerfile.py": 35.0,
    "tests/integration/test_fairness": 49.0,
    "tests/integration/test_cli.py": 40.0,
    "tests/integration/test_durability": 35.0,
    "tests/integration/test_examples": 35.0,
    "tests/integration/test_first_hour_cli.py": 20.0,
    # unit tests of hypothesis or a chaos plan, 40-47 s each at load 5-14: handed out last by their folder's figure
    "tests/unit/test_breaker5_sendpath.py::test_no_character_outside_the_class_is_removed_in_any_neighbourhood": 47.0,
    "tests/unit/test_chaos_approvals.py::test_approvals_leave_the_rest_of_a_seed_as_it_was": 44.0,
    "tests/unit/test_breaker5_plain_delta.py::test_the_fast_path_takes_a_line_as_the_validator_does": 42.0,
}
"""Expected seconds of a unit (a group's name) or of each test whose node id starts with the key (the longest key
that matches), as a clean clone's ``uv run pytest -n 4`` showed them (its 30 slowest, load 2-4); the three cluster
groups and the other fuzz modules are estimates (their files' tests summed, not in that list as one; the cluster groups
as regrouped on ci-cost: their files' seconds in a run at load 12-17, times 0.4, the ratio of the old groups' 300 s to
their seconds at that load), test_replicas_any.py its three tests' seconds with the replicas in the test's process."""

FOLDER_SECONDS: Mapping[str, float] = {
    "tests/deploy": 10.0,
    "tests/redis": 4.0,
    "tests/browser": 4.0,
    "tests/fuzz": 2.0,
    "tests/bench": 2.0,
    "tests/integration": 2.0,
    "tests/scenarios": 1.0,
    "tests/contract": 0.2,
    "tests/unit": 0.05,
}
"""Expected seconds of any other test, by its folder."""

DEFAULT_SECONDS = 0.5
"""Expected seconds of a test in no folder above."""


def expected_seconds(nodeid: str) -> float:
    """The expected seconds of the test ``nodeid`` (its group suffix ``@group`` ignored): the longest key of
    :data:`KNOWN_SECONDS` it starts with, else its folder's :data:`FOLDER_SECONDS`, else :data:`DEFAULT_SECONDS`."""
    test = nodeid.split("@")[0]
    known = [key for key in KNOWN_SECONDS if test.startswith(key)]
    if known:
        return KNOWN_SECONDS[max(known, key=len)]
    folder = next((f for f in FOLDER_SECONDS if test.startswith(f + "/")), None)
    return FOLDER_SECONDS[folder] if folder is not None else DEFAULT_SECONDS


def unit_seconds(scope: str, nodeids: list[str]) -> float:
    """The expected seconds of a work unit: its group's :data:`KNOWN_SECONDS` when listed, else the sum of its
    tests' :func:`expected_seconds`."""
    if scope in KNOWN_SECONDS:
        return KNOWN_SECONDS[scope]
    return sum(expected_seconds(nodeid) for nodeid in nodeids)


class LongestFirst(LoadGroupScheduling):  # type: ignore[misc]  # xdist is untyped (pyproject's mypy overrides)
    """``--dist loadgroup`` with its queue ordered by :func:`unit_seconds`, longest first (ties: xdist's order)."""

    _ordered = False

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._ordered:  # schedule() has filled the queue and assigns the first units: order it once, now
            self._ordered = True
            units = sorted(self.workqueue.items(), key=lambda unit: -unit_seconds(unit[0], list(unit[1])))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)


def make_scheduler(config: pytest.Config, log: Producer) -> LongestFirst | None:
    """:class:`LongestFirst` for ``--dist loadgroup`` (the suite's default under ``-n``), else None (xdist's own)."""
    if config.option.dist != "loadgroup":
        return None
    return LongestFirst(config, log)
