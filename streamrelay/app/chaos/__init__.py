"""``streamrelay chaos``: a randomized, seeded campaign against the real sidecar and mock platforms, each its own
process, that kills the sidecar (kill -9; with ``--backend redis``, one of its replicas) and scripts platform
faults, then judges every run by what its chat shows and what its report says.

Modules: :mod:`~app.chaos.answers` (the known answers: slices of recorded streams), :mod:`~app.chaos.plan` (the
seeded plan), :mod:`~app.chaos.procs` (the processes), :mod:`~app.chaos.agent` (an agent streaming its run through
kills), :mod:`~app.chaos.triggers` (kills and faults), :mod:`~app.chaos.driver` (every run's agent),
:mod:`~app.chaos.services` (the sidecar or its replicas, the mocks, the Redis), :mod:`~app.chaos.campaign` (the
campaign), :mod:`~app.chaos.judge` (lost, doubled, uncertain, lying) and :mod:`~app.chaos.output` (the table, JSON
and transcripts).
"""

from streamrelay.app.chaos.campaign import Outcome, run_campaign
from streamrelay.app.chaos.output import failed, rows, summary, table, write_transcripts
from streamrelay.app.chaos.plan import BACKENDS, MODES, PLATFORMS, Options

__all__ = [
    "BACKENDS",
    "MODES",
    "PLATFORMS",
    "Options",
    "Outcome",
    "failed",
    "rows",
    "run_campaign",
    "summary",
    "table",
    "write_transcripts",
]
