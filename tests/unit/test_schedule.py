"""tests/schedule.py: under ``-n`` the workers get the longest work units first (issue 25, item 7)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.schedule import KNOWN_SECONDS, LongestFirst, expected_seconds, unit_seconds

README_TEST = (
    "tests/integration/test_readme_blocks.py::test_the_readme_blocks_work_pasted_in_order_into_one_fresh_shell"
)


class _Config:
    """What xdist's scheduler reads of a config: two workers, the default ``--loadscope-reorder``."""

    option = SimpleNamespace(loadscopereorder=True, dist="loadgroup")

    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return ["2*popen"]


class _Node:
    """A worker as the scheduler sees it: the indexes of the tests it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.name, self.shutting_down = name, False
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


def test_a_test_is_expected_to_take_its_measured_seconds_else_its_folders() -> None:
    assert expected_seconds(README_TEST) == KNOWN_SECONDS[README_TEST]
    assert expected_seconds("tests/deploy/test_k8s_redis.py::test_x") == KNOWN_SECONDS["tests/deploy/test_k8s"]
    assert expected_seconds("tests/integration/test_durability_hostile.py::t@g") == 35.0  # the group suffix ignored
    assert expected_seconds("tests/unit/test_chunker.py::test_x") < expected_seconds("tests/integration/test_x.py::t")
    assert unit_seconds("chaos-exclusive", ["a@chaos-exclusive"]) == KNOWN_SECONDS["chaos-exclusive"]
    three = [f"tests/unit/test_a.py::t{n}@tests/unit/test_a.py" for n in range(3)]
    assert unit_seconds("tests/unit/test_a.py", three) == 3 * expected_seconds(three[0])


def test_the_longest_units_go_out_first_whatever_their_test_counts_and_places() -> None:
    collection = [
        *(f"tests/unit/test_many.py::t{n}@tests/unit/test_many.py" for n in range(40)),  # 40 quick tests: 2 s
        "tests/unit/test_one.py::t",
        README_TEST,  # one test, 136 s
        *(f"tests/integration/test_chaos.py::s{n}@chaos-exclusive" for n in range(4)),  # 4 tests, 165 s
        "tests/deploy/test_other.py::t",  # one test, 10 s
    ]
    scheduler = LongestFirst(_Config())
    nodes = [_Node("gw0"), _Node("gw1")]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    sent = {node.name: [collection[i] for i in node.sent] for node in nodes}
    assert sent["gw0"] == [f"tests/integration/test_chaos.py::s{n}@chaos-exclusive" for n in range(4)]
    # gw1 had one test left, so it got its second unit at once (xdist keeps a worker at 2+ pending tests)
    assert sent["gw1"] == [README_TEST, "tests/deploy/test_other.py::t"]
    assert list(scheduler.workqueue) == ["tests/unit/test_many.py", "tests/unit/test_one.py::t"]  # the rest, in order
