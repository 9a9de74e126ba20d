"""Memory stays bounded whatever a body carries (issue 12, item 7): 200,000 bad lines within the body limit cost the
sidecar a few megabytes at most, and the answer lists the first rejected lines with a count, not every one.

Measured with tracemalloc in this process (the sidecar runs on a thread of it): the peak of traced memory while the
request is served, over what was traced before it. The body is built before tracing starts.
"""

from __future__ import annotations

import itertools
import time
import tracemalloc

import httpx
import pytest

from tests.fuzz.checks import MAX_REJECTED_SHOWN, check_answer, fresh_run, run_path
from tests.fuzz.conftest import MAX_BODY_BYTES, FuzzStack

pytestmark = pytest.mark.timeout(120)

BAD_LINES = 200_000
MAX_GROWTH_BYTES = 50 * 1024 * 1024
GARBAGE = (b"{not json", b"[]", b"\xff\xfe\xfd", b'{"kind":"nope"}', b'{"kind":"text","seq":"7"}', b"NaN", b'"x"')


def garbage_body(lines: int) -> bytes:
    """``lines`` bad lines (not JSON, not UTF-8, not an object, an unknown kind, a bad field), cycled."""
    return b"\n".join(itertools.islice(itertools.cycle(GARBAGE), lines)) + b"\n"


def test_a_body_of_bad_lines_costs_bounded_memory_and_lists_the_first_few(
    fuzz_stack: FuzzStack, http: httpx.Client
) -> None:
    run = fresh_run("mem")
    data = garbage_body(BAD_LINES)
    assert len(data) < MAX_BODY_BYTES
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        began = time.monotonic()
        answer = http.post(run_path(run, "/events"), content=data)
        took_s = time.monotonic() - began
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    body = check_answer(answer, data)
    assert 400 <= answer.status_code < 500, body
    assert len(body["rejected"]) <= MAX_REJECTED_SHOWN
    assert isinstance(body.get("rejected_total"), int) and body["rejected_total"] > len(body["rejected"]), body
    growth = peak - before
    assert growth < MAX_GROWTH_BYTES, f"the sidecar grew by {growth / 2**20:.1f} MiB for {BAD_LINES} bad lines"
    print(f"{BAD_LINES} bad lines: {answer.status_code} in {took_s:.2f} s, peak growth {growth / 2**20:.1f} MiB")


def test_after_the_bad_body_the_sidecar_still_takes_a_run(fuzz_stack: FuzzStack, http: httpx.Client) -> None:
    run = fresh_run("after")
    lines = [
        b'{"kind":"run.start","channel":"web","target":{"chat_id":"after"}}',
        b'{"kind":"text","text":"still here"}',
        b'{"kind":"end","status":"ok"}',
    ]
    answer = http.post(run_path(run, "/events"), content=b"\n".join(lines) + b"\n")
    assert answer.status_code == 200 and answer.json() == {"accepted": 3}, answer.text
    report = http.get(run_path(run), params={"wait_s": 10}).json()
    assert report["status"] == "delivered", report
