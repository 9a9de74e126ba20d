"""Every test process checks the typed contracts where they are produced: each live event the monitor publishes is
validated against core/contracts/live.py (:data:`core.run.monitor.CHECK_CONTRACT`; pipeline units are checked always).
Set here, before any test module imports the core, and inherited by the sidecars tests start as processes.

Under pytest-xdist (``-n``; ``--dist loadgroup``: :func:`pytest_cmdline_main`) each worker draws the ports of the
servers its tests start from its own slice (tests/ports.py), and the tests sharing a fixture wider than one test (a
module's sidecar, a chaos campaign) run on one worker, in their file's order: :func:`pytest_collection_modifyitems`."""

import os
from collections.abc import Generator
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId
from xdist.remote import Producer

os.environ.setdefault("STREAMRELAY_CHECK_CONTRACTS", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # An xdist worker starts with COLUMNS=80 and LINES=24 in its environment (a serial run has neither), and rich
    # fixes a Console's width when it is made from COLUMNS: the CLI's module-level consoles would print 80 columns
    # whatever width a test's CliRunner asks for (tests/redis/test_ops_runs.py's dead-letter table lost its ids).
    for variable in ("COLUMNS", "LINES"):
        os.environ.pop(variable, None)

from hypothesis import settings as hypothesis_settings

from tests.contention import timeout_scale, wait_scale
from tests.ports import configure  # after the variable above: it imports the core
from tests.schedule import LongestFirst, make_scheduler

configure()

# No test asserts a timing: hypothesis's per-example deadline (200 ms by default) is one, and it failed a property
# test of the assembler on a loaded machine (tests/unit/test_assembler.py, CI-like run at load 5-14). Examples keep
# their counts; only the deadline goes.
hypothesis_settings.register_profile("streamrelay", deadline=None)
hypothesis_settings.load_profile("streamrelay")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which makes it "load"
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n N`` (or ``-n auto``) without ``--dist`` distributes with ``loadgroup``: the groups below hold whatever the
    command line. Set here rather than in ``addopts``, so ``-p no:xdist`` still runs the suite serially."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"


EXTRA_WORKERS = 1
"""``-n auto`` runs this many workers more than the cores: most tests wait on the servers they start (mock platforms,
sidecars, redis-server, Chromium, chaos campaigns), so a core is often idle with one worker per core."""


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown with -p no:xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """The worker count for ``-n auto``: the cores this process may run on, plus :data:`EXTRA_WORKERS`; None (xdist
    decides) when ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + EXTRA_WORKERS


REDIS_TESTS = Path(__file__).parent / "redis"
"""Each file here is a group of its own (as ``--dist loadfile`` would make it), except :data:`REDIS_CLUSTER_FILES`:
the files spread over the workers, each worker that runs one starts its own redis-server (the session fixture
``redis_url``, on a port of the worker's slice, in the worker's own temporary folder), and a file's tests run in their
order on one worker. All of tests/redis was one group, one worker: the run's critical path (681 s of a 17.5-minute
``-n 4`` run on a loaded machine)."""

REDIS_CLUSTER_FILES = {
    **dict.fromkeys(("test_failover.py", "test_stale_primary.py"), "tests/redis:clusters-1"),
    **dict.fromkeys(("test_sentinel.py", "test_ops_replicas.py"), "tests/redis:clusters-2"),
    **dict.fromkeys(
        ("test_redis_data_lost.py", "test_replica_listens_first.py", "test_ops_runs.py"), "tests/redis:clusters-3"
    ),
}
"""The files under tests/redis whose tests start processes of their own (three ``streamrelay serve`` replicas, a primary
with a replica and three sentinels), by group: three groups, so at most three such clusters run at once, each group's
files one at a time on one worker, the groups balanced by their files' durations in one ``-n 4`` run (at load 12-17
on 2 cores, the files summed: 534 s, 485 s and 405 s). test_replicas_any.py, test_client_limits.py and
test_replicas_stop.py run their three replicas in the test's own process (they kill and pause none): groups of their
own file, as the rest of tests/redis. Each replica process takes about 8 CPU-seconds to listen (5 of them importing
aiogram), and their leases (2 s) and overload answers (503 past ``overload_lag_ms``) follow the CPU they get: at load
5-12 on 2 cores 10 of 76 failed spread over 3 workers, and at load 25-35, with every tests/redis file a group of its
own under ``-n 4``, 7 of 98 failed, every one in these files (three clusters of three replicas at once; four of the
seven a hang guard not scaled by the load, since scaled)."""

SHARED_SCOPES = frozenset({"class", "module", "package"})
"""Fixture scopes whose value several tests share; a session fixture (redis-server) is made once per worker."""


WRITTEN_TIMEOUT = pytest.StashKey[float]()
"""A test's timeout as written (its own, its module's or the ini's), before any scaling."""


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper, which reads the marker
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Scale the test's timeout again by :func:`wait_scale` when the machine is busier as the test starts than when
    its process started (a suite started at load 0.4 ran its later tests at load 20 on 2 cores: 15 sidecar
    processes failed to listen within their 60 s)."""
    written = item.stash.get(WRITTEN_TIMEOUT, None)
    if written is not None and (scale := wait_scale()) > timeout_scale():
        item.add_marker(pytest.mark.timeout(written * scale), append=False)
    return (yield)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, in each worker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale each test's timeout by :func:`timeout_scale`. Mark each test under tests/redis (:data:`REDIS_TESTS`)
    and each that uses a class-, module- or package-scoped fixture ``xdist_group(<its file>)`` (the files of
    :data:`REDIS_CLUSTER_FILES` their cluster group's) unless it names a group itself: spread over
    workers, each worker would make the fixture again (a chaos campaign, a sidecar), and a module whose last test
    checks what the earlier ones did (tests/fuzz) would lose that.

    In an xdist worker each grouped test's id also gets its ``@group`` suffix, which is what the controller's
    LoadGroupScheduling groups by (the other schedulers ignore it): xdist 3.8 writes it to ``item._nodeid``, which
    pytest 9.2 no longer reads (``Node.nodeid`` is ``str(item._id)``), so without this every group is spread over the
    workers."""
    scale = timeout_scale()
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        # the closest timeout (the test's, its module's, else the ini's), scaled: the test's own now
        written = item.get_closest_marker("timeout")
        given = written.kwargs.get("timeout", written.args[0] if written.args else None) if written else None
        seconds = float(given if given is not None else config.getini("timeout") or 0)
        if seconds > 0:
            item.stash[WRITTEN_TIMEOUT] = seconds
            if scale > 1:
                item.add_marker(pytest.mark.timeout(seconds * scale), append=False)
        if item.get_closest_marker("xdist_group") is None:
            defs = item._fixtureinfo.name2fixturedefs.values()
            if item.path.is_relative_to(REDIS_TESTS) and item.path.name in REDIS_CLUSTER_FILES:
                item.add_marker(pytest.mark.xdist_group(REDIS_CLUSTER_FILES[item.path.name]))
            elif item.path.is_relative_to(REDIS_TESTS) or any(
                chain[-1].scope in SHARED_SCOPES for chain in defs if chain
            ):
                item.add_marker(pytest.mark.xdist_group(item.path.relative_to(config.rootpath).as_posix()))
        if hasattr(config, "workerinput") and "@" not in item.nodeid:  # an xdist worker
            names = {
                str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")
            }
            if names:  # as xdist names a test's groups: sorted, joined with "_"
                item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(sorted(names))}")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown with -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LongestFirst | None:
    """``--dist loadgroup`` hands out the longest work units first (tests/schedule.py), so that no long group starts
    last and runs alone: the run's tail."""
    return make_scheduler(config, log)
