"""A well-behaved run streaming through the fuzzed sidecar at the same time: its own client on its own thread, one
delta per request at a steady pace, so the fuzzing lands between its lines. What a person sees of it at the end
tells whether the hostile input next to it did any harm."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from tests.fuzz.checks import run_path
from tests.fuzz.conftest import client
from tests.fuzz.strategies import VICTIM_CHAT

PACE_S = 0.1
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
