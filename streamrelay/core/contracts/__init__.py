"""The public contracts, typed: what the sidecar sends its callers, as frozen pydantic models.

- :mod:`core.contracts.units`: the pipeline lane's units (``GET /v1/runs/{run}/pipeline``, its stream), a union
  discriminated on ``kind``: :data:`PipelineUnit`.
- :mod:`core.contracts.live`: the live monitor's events (``GET /v1/runs/{run}/live``, SSE), a union discriminated
  on ``type``: :data:`LiveEvent`.
- :mod:`core.contracts.report`: the run report (``GET /v1/runs/{run}``: :class:`core.records.report.DeliveryReport`'s
  fields, frozen), with the gate's and the watch link's answers in :mod:`core.contracts.answers`.

The sidecar's wire JSON is the models' ``model_dump(mode="json")``, key for key and in the same order (tests hold
them together); ``uv run streamrelay schema --out docs/schema`` writes their JSON Schemas (:mod:`app.schema`).
"""

from streamrelay.core.contracts.answers import GateAnswer, RunListing, RunRow, StopAnswer, WatchLink
from streamrelay.core.contracts.live import LIVE_EVENT, LiveEvent, LiveState, parse_live_event
from streamrelay.core.contracts.report import PartFact, RunReport
from streamrelay.core.contracts.units import PIPELINE_UNIT, PipelineUnit, parse_unit

__all__ = [
    "LIVE_EVENT",
    "PIPELINE_UNIT",
    "GateAnswer",
    "LiveEvent",
    "LiveState",
    "PartFact",
    "PipelineUnit",
    "RunListing",
    "RunReport",
    "RunRow",
    "StopAnswer",
    "WatchLink",
    "parse_live_event",
    "parse_unit",
]
