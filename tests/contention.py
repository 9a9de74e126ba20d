"""How much slower than on an idle machine this test process may run: the factor its hang guards are scaled by."""

from __future__ import annotations

import functools
import os

TIMEOUT_SCALE_ENV = "STREAMRELAY_TIMEOUT_SCALE"


@functools.cache  # fixed for the process: the factor its first caller (its conftest) saw
def timeout_scale() -> float:
    """How much longer than written each hang guard (a test's pytest-timeout, a browser wait) is in this process:
    ``$STREAMRELAY_TIMEOUT_SCALE`` when set, else the machine's contention when the process started,
    ``max(1, load average / cores)``.

    The timeouts are hang guards written for an otherwise idle machine (5 s for a contract test that takes 0.3 s);
    on one running N times more work than it has cores, every test takes up to N times longer, and a guard firing
    there fails a test that did not hang (or, firing inside a hook after the test, crashes its xdist worker and the
    run: "Timeout (>5.0s)" in hypothesis' makereport, an INTERNALERROR at load 17 on 2 cores). A real hang is still
    stopped, N times later."""
    if value := os.environ.get(TIMEOUT_SCALE_ENV):
        return float(value)
    return contention_now()


def contention_now() -> float:
    """How many times more work than it has cores the machine runs now: ``max(1, load average / cores)`` (the
    one-minute load average; read anew at each call, where :func:`timeout_scale` keeps its process's first value)."""
    return max(1.0, os.getloadavg()[0] / len(os.sched_getaffinity(0)))


def wait_scale() -> float:
    """The factor for a hang guard that starts now: ``$STREAMRELAY_TIMEOUT_SCALE`` when set, else the larger of
    :func:`timeout_scale` (the process's start) and :func:`contention_now` (a suite started on an idle machine may
    run its later tests at load 20 on 2 cores, where a sidecar process takes over a minute to listen)."""
    if os.environ.get(TIMEOUT_SCALE_ENV):
        return timeout_scale()
    return max(timeout_scale(), contention_now())
