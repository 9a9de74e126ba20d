"""mkdocs hook: the API reference page is built from the committed JSON Schemas (docs/schema/*.schema.json).

A line ``<!-- schema: NAME -->`` in a page becomes NAME's reference: its title and description, then one table per
object it defines (the schema itself, or each variant of its ``oneOf``, then the objects those name), one row a
field: name, type, whether it is required, default, description. The schemas are written from the models by
``streamrelay schema --out docs/schema`` (tests/unit/test_contracts.py fails when they are stale), so the page never
drifts from the code. Standard library only; mkdocs calls ``on_page_markdown`` for every page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schema"
PLACEHOLDER = re.compile(r"^<!-- schema: (?P<name>[a-z-]+) -->$", re.M)


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, pipes escaped, rST double backticks as code."""
    return " ".join(text.replace("``", "`").replace("|", "\\|").split())


def _type(prop: dict[str, Any]) -> str:
    """A property's type in a few words: ``string``, ``integer ≥ 1``, ``"run"``, ``Source or null``, ``array of X``."""
    if "$ref" in prop:
        name = str(prop["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_type(p) for p in prop[key])
    kind = str(prop.get("type", "any"))
    if kind == "array" and "items" in prop:
        return f"array of {_type(prop['items'])}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"object of {_type(prop['additionalProperties'])}"
    if "minimum" in prop:
        kind += f" ≥ {prop['minimum']}"
    if "maximum" in prop:
        kind += f" ≤ {prop['maximum']}"
    return kind


def _object(name: str, schema: dict[str, Any]) -> list[str]:
    """One object's heading, description and field table (or its values when it is an enum)."""
    lines = [f"#### {name}", ""]
    if schema.get("description"):
        lines += [_cell(str(schema["description"])), ""]
    props: dict[str, dict[str, Any]] = schema.get("properties", {})
    if not props:
        lines += [f"Type: {_type(schema)}", ""]
        return lines
    required = set(schema.get("required", []))
    lines += ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    for field, prop in props.items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        need = "yes" if field in required else ""
        lines.append(f"| `{field}` | {_type(prop)} | {need} | {default} | {_cell(str(prop.get('description', '')))} |")
    return [*lines, ""]


def reference(name: str) -> str:
    """The Markdown reference of ``docs/schema/<name>.schema.json``; FileNotFoundError names a missing schema."""
    schema: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    lines = [f"**{schema['title']}** (`docs/schema/{name}.schema.json`)", ""]
    defs: dict[str, dict[str, Any]] = schema.get("$defs", {})
    if "properties" in schema:
        lines += _object(str(schema["title"]).rstrip("."), schema)
    if "oneOf" in schema:
        variants = [str(v["$ref"]).rsplit("/", 1)[-1] for v in schema["oneOf"] if "$ref" in v]
        lines += ["One of: " + ", ".join(f"[{v}](#{v.lower()})" for v in variants) + ".", ""]
    for def_name, definition in defs.items():
        lines += _object(def_name, definition)
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """mkdocs' page hook: every ``<!-- schema: NAME -->`` line replaced by NAME's reference."""
    return PLACEHOLDER.sub(lambda found: reference(found.group("name")), markdown)
