"""The public contracts' JSON Schemas, written from their models: ``streamrelay schema --out docs/schema``.

One file per contract (JSON Schema 2020-12, as pydantic writes it), named ``<name>.schema.json``:

- ``ingest-event``: a line agents send (``POST /v1/runs/{run}/events``; :data:`core.events.Event`);
- ``correction``: a correction or retraction of an ended run (``POST /v1/runs/{run}/corrections``;
  :data:`core.events.Correction`);
- ``pipeline-unit``: a unit of a run's pipeline lane (:data:`core.contracts.units.PipelineUnit`);
- ``monitor-event``: a live event of a run (:data:`core.contracts.live.LiveEvent`);
- ``run-report``: a run's delivery report (:class:`core.contracts.report.RunReport`);
- ``gate-answer``, ``watch-link``, ``stop-answer``: the action gate's, the watch link's and a stop's answers;
- ``run-listing``: the active runs, as the ops page shows them (``GET /v1/runs``).

tests/unit/test_contracts.py fails when the committed files differ from what this writes (run the command again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from streamrelay.config.paths import CHECKOUT
from streamrelay.core.contracts.answers import GateAnswer, RunListing, StopAnswer, WatchLink
from streamrelay.core.contracts.live import LIVE_EVENT
from streamrelay.core.contracts.report import RunReport
from streamrelay.core.contracts.units import PIPELINE_UNIT
from streamrelay.core.events import Correction, Event

SCHEMA_DIR = CHECKOUT / "docs" / "schema"
"""Where the schemas are committed."""
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schemas() -> dict[str, dict[str, Any]]:
    """Every contract's JSON Schema by file name (``pipeline-unit.schema.json``, …)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {
        "ingest-event": ("A line of a run's NDJSON ingest.", TypeAdapter(Event).json_schema()),
        "correction": (
            "A correction or retraction of an ended run (POST /v1/runs/{run}/corrections).",
            TypeAdapter(Correction).json_schema(),
        ),
        "pipeline-unit": ("A unit of a run's pipeline lane.", PIPELINE_UNIT.json_schema()),
        "monitor-event": ("A live event of a run (SSE data).", LIVE_EVENT.json_schema()),
        "run-report": ("A run's delivery report (GET /v1/runs/{run}).", RunReport.model_json_schema()),
        "gate-answer": ("The action gate's answer.", GateAnswer.model_json_schema(by_alias=True)),
        "watch-link": ("A run's live page link.", WatchLink.model_json_schema()),
        "stop-answer": ("The answer to a run's stop.", StopAnswer.model_json_schema()),
        "run-listing": ("The active runs (GET /v1/runs).", RunListing.model_json_schema()),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (title, schema) in found.items():
        head = {"$schema": DIALECT, "$id": f"https://streamrelay.local/schema/{name}.schema.json", "title": title}
        out[f"{name}.schema.json"] = {**head, **{k: v for k, v in schema.items() if k != "title"}}
    return out


def rendered(schema: dict[str, Any]) -> str:
    """One schema as its file holds it: sorted keys, two-space indent, a final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(out: Path) -> list[Path]:
    """Write every schema into ``out`` (created if missing); return the files written.

    Raises:
        OSError: ``out`` cannot be created or written.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = out / name
        path.write_text(rendered(schema), encoding="utf-8")
        written.append(path)
    return written


def stale(out: Path = SCHEMA_DIR) -> list[str]:
    """The schema files in ``out`` that differ from the models (or are missing), by name: [] when up to date."""
    return [name for name, schema in schemas().items() if _read(out / name) != rendered(schema)]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
