"""A well-behaved run streaming through the fuzzed sidecar at the same time: its own client on its own thread, one
delta per request at a steady pace, so the fuzzing lands between its lines. What a person sees of it at the end
tells whether the hostile input next to it did any harm.

Each fuzz module has its own sidecar and its own victim (:func:`streaming_beside`, its module's fixture), checked by
the module's last test (:func:`check_unharmed`): the modules are groups of their own under xdist, spread over the
workers (as one module, ~1,000 examples held one worker ~20 minutes on a loaded machine)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.contention import wait_scale
from tests.fuzz.checks import run_path
from tests.fuzz.conftest import FuzzStack, client
from tests.fuzz.strategies import VICTIM_CHAT

PACE_S = 0.1
MIN_PIECES = 20
"""More than this many pieces streamed, else the victim did not really stream (its requests failing or held up)."""
MAX_PIECES = 1200
"""About 7,200 characters at most: two Telegram messages; at PACE_S, two minutes of streaming."""


@dataclass
class VictimLog:
    """What the victim saw of its own requests."""

    pieces: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    slowest_s: float = 0.0


class Victim:
    """Streams run ``run`` to the mock chat :data:`VICTIM_CHAT` until :meth:`finish`.

    Args:
        url: the sidecar's base URL.
        run: the run id.
    """

    def __init__(self, url: str, run: str = "victim-run") -> None:
        self.url = url
        self.run = run
        self.log = VictimLog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._stream, name="fuzz-victim", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _post(self, line: str) -> None:
        with client(self.url) as http:
            began = time.monotonic()
            try:
                answer = http.post(run_path(self.run, "/events"), content=line.encode() + b"\n")
            except Exception as exc:  # recorded, not raised: the test reports it
                self.log.failures.append(f"{line[:60]}: {type(exc).__name__}: {exc}")
                return
            self.log.slowest_s = max(self.log.slowest_s, time.monotonic() - began)
            if answer.status_code != 200 or answer.json().get("accepted") != 1:
                self.log.failures.append(f"{line[:60]}: {answer.status_code} {answer.text[:300]}")

    def _stream(self) -> None:
        target = {"chat_id": VICTIM_CHAT}
        self._post(json.dumps({"kind": "run.start", "channel": "telegram", "target": target, "seq": 0}))
        seq = 0
        while not self._stop.is_set() and seq < MAX_PIECES:
            seq += 1
            piece = f"p{seq:04d} " + ("\n\n" if seq % 50 == 0 else "")
            self._post(json.dumps({"kind": "text", "mode": "delta", "seq": seq, "text": piece}))
            self.log.pieces.append(piece)
            self._stop.wait(PACE_S)

    def streamed_at_least(self, pieces: int, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the victim streamed ``pieces`` pieces or stopped: a module whose fuzzing
        is over in a second or two (the run ids module, serially on an idle machine: 13 pieces) still checks a
        victim that streamed, rather than failing "hardly streamed" on how fast its tests were."""
        deadline = time.monotonic() + timeout_s
        while len(self.log.pieces) < pieces and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(PACE_S)

    def finish(self) -> str:
        """Stop streaming and send the run's ``end`` (the first time only); return the text it streamed."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            self._post(json.dumps({"kind": "end", "status": "ok", "seq": len(self.log.pieces) + 1}))
        return "".join(self.log.pieces)

    def report(self) -> dict[str, object]:
        """The run's delivery report once it is done (waits up to 30 s)."""
        with client(self.url) as http:
            answer = http.get(run_path(self.run), params={"wait_s": 30}, timeout=40)
        assert answer.status_code == 200, answer.text
        report: dict[str, object] = answer.json()
        return report


def streaming_beside(stack: FuzzStack) -> Iterator[Victim]:
    """A module fixture's body: a victim streaming through ``stack`` while the module's tests run; stopped at the
    module's end (idempotent when its last test, :func:`check_unharmed`, did not run: ``-k``)."""
    streaming = Victim(stack.url)
    streaming.start()
    yield streaming
    streaming.finish()


def check_unharmed(stack: FuzzStack, victim: Victim) -> None:
    """Last in a fuzz module: the run that streamed beside the fuzzing shows its whole text, once.

    Raises:
        AssertionError: a request of the victim failed, it hardly streamed, or its text is not shown whole, once.
    """
    victim.streamed_at_least(MIN_PIECES + 1, timeout_s=60 * wait_scale())
    text = victim.finish()
    # served, never starved: each of its requests answered 200 and accepted (a request the fuzzing held up past the
    # client's hang guard, HANG_GUARD_S, is a failure here); how long the slowest took is printed, not bounded (no
    # timing asserts: on a loaded machine any request may take seconds)
    print(
        f"\nthe victim streamed {len(victim.log.pieces)} pieces; its slowest request took {victim.log.slowest_s:.2f} s"
    )
    assert victim.log.failures == []
    assert len(victim.log.pieces) > MIN_PIECES, "the victim hardly streamed: was the fuzzing running beside it?"
    report = victim.report()
    assert report["status"] == "delivered", report
    shown = stack.visible(VICTIM_CHAT)
    assert " ".join(shown).split() == text.split()
