"""What every answer of the sidecar must be, whatever it was sent: a 2xx, or a 4xx whose JSON body names the problem;
never a 5xx, never a hang (the client's timeouts), never a traceback."""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import quote

import httpx

MAX_REJECTED_SHOWN = 20
"""The most rejected lines one answer lists (adapters/ingest_http/app.py)."""

CLOSE_WAIT_S = 2.0
"""How long a read waits for a closed run to finish (a run past it reads as pending: still a 200)."""

_runs = itertools.count(1)


def fresh_run(prefix: str) -> str:
    """A run id no example used before (plain ASCII: safe in a URL and in JSON without escaping)."""
    return f"fz-{prefix}-{next(_runs)}"


def run_path(run: str, suffix: str = "") -> str:
    """The path of ``run``'s routes, its id's UTF-8 percent-encoded (a '/' and a '.' too; a lone surrogate as the
    bytes it would make)."""
    quoted = quote(run.encode("utf-8", "surrogatepass"), safe="").replace(".", "%2E")  # httpx would resolve '..'
    return f"/v1/runs/{quoted}{suffix}"


def _json(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        raise AssertionError(f"{answer.status_code} answer is not JSON: {answer.text[:500]!r}") from None


def check_error(answer: httpx.Response) -> dict[str, Any]:
    """A 4xx answer: a JSON object whose ``error`` says what was wrong (not empty, not a traceback)."""
    data = _json(answer)
    assert isinstance(data, dict), f"{answer.status_code} answer is not a JSON object: {data!r}"
    error = data.get("error")
    assert isinstance(error, str), f"{answer.status_code} answer has no 'error' string: {data!r}"
    assert len(error.strip()) >= 10, f"{answer.status_code} error does not name the problem: {error!r}"
    assert "Traceback" not in error and "Internal Server Error" not in error, error
    return data


def check_answer(answer: httpx.Response, data: bytes) -> dict[str, Any]:
    """An ingest answer (module docstring of adapters/ingest_http/app.py) for the body ``data``: never a 5xx; a 2xx
    counts what was taken; a 4xx names the problem and lists at most the first rejected lines, each named.

    Returns:
        The answer's JSON object.
    """
    status = answer.status_code
    assert status < 500, f"{status} for a client's input: {answer.text[:2000]}"
    assert 200 <= status < 300 or 400 <= status < 500, f"unexpected status {status}: {answer.text[:500]}"
    lines = data.split(b"\n")
    if 200 <= status < 300:
        body = _json(answer)
        assert isinstance(body, dict) and set(body) <= {"accepted", "dropped", "dropped_reason"}, body
        counts = [body.get("accepted"), *([body["dropped"]] if "dropped" in body else [])]
        assert all(isinstance(n, int) and n >= 0 for n in counts), body
        assert ("dropped" in body) == ("dropped_reason" in body), body  # a dropped line says why
        assert "dropped_reason" not in body or str(body["dropped_reason"]).startswith("line "), body
        return body
    body = check_error(answer)
    rejected = body.get("rejected", [])
    assert isinstance(rejected, list) and len(rejected) <= MAX_REJECTED_SHOWN, f"{len(rejected)} rejected listed"
    for entry in rejected:
        assert isinstance(entry, dict) and set(entry) == {"line", "error"}, entry
        assert isinstance(entry["line"], int) and 1 <= entry["line"] <= len(lines), entry
        assert isinstance(entry["error"], str) and len(entry["error"].strip()) >= 10, entry
        assert lines[entry["line"] - 1].strip(), f"a blank line was rejected: {entry}"
    if rejected and status != 413 and "stopped reading" not in body["error"]:  # else the body's own error
        assert body["error"].startswith(f"line {rejected[0]['line']}: "), body["error"]
    return body


def check_counted(answer: dict[str, Any], data: bytes) -> None:
    """Every line of a body the sidecar read to its end is accounted for: taken (one event per normalized line),
    dropped as a repeat, or rejected. Not checked when the request failed as a whole (a bad run id in the path, a
    body too large, a body no longer read after too many bad lines)."""
    per_line = answer["status"] < 300 or str(answer.get("error", "")).startswith("line ")
    if per_line and "stopped reading" not in str(answer.get("error")):
        assert taken_lines(answer) == nonblank_lines(data), answer


def taken_lines(body: dict[str, Any]) -> int:
    """Lines the answer says were taken or dropped plus those it rejected (all of them, not only those listed)."""
    rejected = body.get("rejected_total", len(body.get("rejected", [])))
    return int(body.get("accepted", 0)) + int(body.get("dropped", 0)) + int(rejected)


def nonblank_lines(data: bytes) -> int:
    """How many lines of ``data`` the sidecar reads as events (it skips blank ones: bytes.strip())."""
    return sum(1 for line in data.split(b"\n") if line.strip())


def post(http: httpx.Client, path: str, data: bytes) -> dict[str, Any]:
    """POST ``data`` to ``path`` and check the answer (:func:`check_answer`); its JSON and status in ``status``."""
    answer = http.post(path, content=data, headers={"Content-Type": "application/x-ndjson"})
    return {**check_answer(answer, data), "status": answer.status_code}


def check_reads(http: httpx.Client, run: str, wait_s: float = 0.0) -> None:
    """The run's report (after up to ``wait_s`` for its end) and its pipeline lane read without a 5xx: 200, or a
    JSON 404 for a run that never started."""
    for suffix, params in (("", {"wait_s": wait_s} if wait_s else {}), ("/pipeline", {})):
        answer = http.get(run_path(run, suffix), params=params)
        assert answer.status_code in (200, 404), f"GET {suffix or 'report'}: {answer.status_code} {answer.text[:2000]}"
        if answer.status_code == 404:
            check_error(answer)
        else:
            assert isinstance(_json(answer), dict)


def close_and_read(http: httpx.Client, *runs: str) -> None:
    """End each run (a 2xx, or a 4xx naming the problem: a run that never started), wait for it to finish, and read
    its report and lane: the reads then see everything the run made of its lines, so they do not race its worker,
    and no fuzzed run stays active to hold the client's active-run limit. Then the list of active runs reads too."""
    for run in runs:
        post(http, run_path(run, "/events"), b'{"kind":"end","status":"ok"}\n')
        check_reads(http, run, wait_s=CLOSE_WAIT_S)
    listing = http.get("/v1/runs")  # the operators' list of active runs
    assert listing.status_code == 200, f"GET /v1/runs: {listing.status_code} {listing.text[:2000]}"
    assert isinstance(_json(listing).get("runs"), list)
