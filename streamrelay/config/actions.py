"""The action catalog: ``streamrelay/config/actions.toml`` loaded strictly, with a JSON Schema validator for arguments.

One ``[actions.NAME]`` table per tool (``NAME`` is the tool's name as the model calls it)::

    [actions.search]
    class = "idempotent"              # idempotent | reversible | compensable | irreversible (core/lanes/gate.py)
    description = "web search"        # optional, for people
    schema = { type = "object", properties = { q = { type = "string" } }, required = ["q"] }
    # or: schema_file = "schemas/search.json"   (JSON, relative to the TOML file)

    [actions.charge_card]
    class = "compensable"
    compensation = "refund_card"      # required for compensable, and only there; must be in the catalog

Unknown keys, a compensable action without its compensation, a compensation that is not in the
catalog, both ``schema`` and ``schema_file``, a schema file that is missing or not a JSON object, and a
schema that is not valid JSON Schema are all :class:`~core.errors.ConfigError` at start-up; the message
names the key and the file. Schemas follow their ``$schema`` draft (2020-12 when absent,
https://json-schema.org/draft/2020-12), ``format`` is asserted (an ``"email"`` that is not one fails),
and a ``$ref`` is resolved inside the schema only: remote schemas are never fetched.
"""

from __future__ import annotations

import json
import tomllib
import warnings
from collections.abc import Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

from jsonschema.exceptions import SchemaError
from jsonschema.exceptions import ValidationError as SchemaValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from referencing.exceptions import Unresolvable
from referencing.jsonschema import EMPTY_REGISTRY

from streamrelay.core.errors import ConfigError
from streamrelay.core.json_types import JsonObject
from streamrelay.core.lanes.gate import Action, ActionCatalog, ActionClass
from streamrelay.core.lanes.pipeline import ArgsValidator

DEFAULT_ACTIONS = Path(__file__).with_name("actions.toml")

MAX_ERRORS = 3
"""Schema errors listed per rejected call; more are summed up as "and more"."""
MAX_VALUE_CHARS = 80
"""An argument value whose repr is longer than this is never quoted whole in a message."""
_MAX_ERROR_CHARS = 240


class ActionSettings(BaseModel):
    """One ``[actions.NAME]`` table."""

    model_config = ConfigDict(extra="forbid")

    action_class: ActionClass = Field(alias="class")
    compensation: str | None = None
    description: str = ""
    json_schema: JsonObject | None = Field(default=None, alias="schema")
    schema_file: str | None = None


class ActionsFile(BaseModel):
    """The whole file: ``[actions.NAME]`` tables and nothing else."""

    model_config = ConfigDict(extra="forbid")

    actions: dict[str, ActionSettings] = Field(default_factory=dict)


_ACTION_KEYS = ", ".join(f.alias or name for name, f in ActionSettings.model_fields.items())


class SchemaValidator:
    """The :data:`~core.lanes.pipeline.ArgsValidator` of a catalog: each tool's JSON Schema, compiled once.

    Calling it with ``(tool name, args)`` returns None when the args are valid (or the tool has no
    schema, or is not in the catalog), else one line such as
    ``args do not match search's schema: 'q' is a required property (at $)``: at most
    :data:`MAX_ERRORS` errors, each with its JSON path, and no argument value longer than
    :data:`MAX_VALUE_CHARS` quoted whole.
    """

    def __init__(self, validators: Mapping[str, Validator] | None = None) -> None:
        self._validators = dict(validators or {})

    def __contains__(self, name: object) -> bool:
        return name in self._validators

    def __call__(self, name: str, args: JsonObject) -> str | None:
        validator = self._validators.get(name)
        if validator is None:
            return None
        try:
            errors = list(islice(validator.iter_errors(args), MAX_ERRORS + 1))
        except Unresolvable as exc:
            return f"args of {name} cannot be checked: a $ref of its schema does not resolve ({exc})"
        if not errors:
            return None
        shown = "; ".join(_explain(error) for error in errors[:MAX_ERRORS])
        more = "; and more" if len(errors) > MAX_ERRORS else ""
        return f"args do not match {name}'s schema: {shown}{more}"


class ActionsConfig(NamedTuple):
    """What :func:`load_actions` returns; unpacks as ``catalog, validate = load_actions(...)``.

    Attributes:
        catalog: the gate's catalog (core/lanes/gate.py).
        validate: the arguments validator (a :class:`SchemaValidator`), for the pipeline lane
            (:class:`core.lanes.pipeline.ToolCallCollector`).
    """

    catalog: ActionCatalog
    validate: ArgsValidator


def load_actions(path: str | Path | None = DEFAULT_ACTIONS) -> ActionsConfig:
    """Load the action catalog and compile its schemas.

    Args:
        path: the TOML file; None for no catalog (every tool is unknown, so treated as irreversible, and
            no arguments are checked).

    Raises:
        ConfigError: the file is missing or not TOML, a key is unknown, or a value, a compensation or
            a schema is wrong; the message names the key and the file.
    """
    if path is None:
        return ActionsConfig(ActionCatalog(), SchemaValidator())
    toml_path = Path(path)
    if not toml_path.is_file():
        raise ConfigError(f"action catalog {toml_path} not found")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{toml_path}: not valid TOML: {exc}") from None
    try:
        parsed = ActionsFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, toml_path)) from None

    problems = list(_compensation_problems(parsed.actions))
    validators: dict[str, Validator] = {}
    for name, settings in parsed.actions.items():
        try:
            schema = _schema_of(settings, toml_path.parent)
            if schema is not None:
                validators[name] = _compile(schema)
        except _Problem as exc:
            problems.append((f"actions.{name}.{exc.key}", exc.message))
    if problems:
        raise ConfigError("; ".join(f"{key} in {toml_path}: {message}" for key, message in problems))
    catalog = ActionCatalog(
        Action(name, s.action_class, s.compensation, s.description) for name, s in parsed.actions.items()
    )
    return ActionsConfig(catalog, SchemaValidator(validators))


class _Problem(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _compensation_problems(actions: Mapping[str, ActionSettings]) -> Iterator[tuple[str, str]]:
    for name, settings in actions.items():
        key, compensation, cls = f"actions.{name}.compensation", settings.compensation, settings.action_class
        if cls is ActionClass.COMPENSABLE and not compensation:
            yield (
                key,
                (
                    f"{name} is compensable: name its compensation, the catalog action that offsets it"
                    ' (e.g. compensation = "refund_card" for charge_card)'
                ),
            )
        elif compensation is not None and cls is not ActionClass.COMPENSABLE:
            yield key, f'{name} is {cls}: only a compensable action names a compensation (set class = "compensable")'
        elif compensation is not None and (compensation not in actions or compensation == name):
            yield key, f"{compensation!r} is not another action of the catalog: add an [actions.{compensation}] table"


def _schema_of(settings: ActionSettings, base: Path) -> JsonObject | None:
    if settings.schema_file is None:
        return settings.json_schema
    if settings.json_schema is not None:
        raise _Problem("schema_file", "give schema or schema_file, not both")
    file = base / settings.schema_file
    try:
        schema = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _Problem("schema_file", f"{file} not found (schema_file is relative to the TOML file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Problem("schema_file", f"{file} cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise _Problem("schema_file", f"{file} is not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise _Problem("schema_file", f"{file} must hold a JSON object (a JSON Schema), not {type(schema).__name__}")
    return schema


def _compile(schema: JsonObject) -> Validator:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # jsonschema warns on an unknown $schema
        try:
            cls = validator_for(schema)
        except DeprecationWarning:
            draft = schema.get("$schema")
            raise _Problem("schema", f"$schema {draft!r} is not a JSON Schema draft jsonschema knows") from None
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise _Problem("schema", f"not a valid JSON Schema: {_clip(exc.message)} (at {exc.json_path})") from None
    return cls(schema, registry=EMPTY_REGISTRY, format_checker=cls.FORMAT_CHECKER)


def _explain(error: SchemaValidationError) -> str:
    message = error.message
    quoted = repr(error.instance)
    if len(quoted) > MAX_VALUE_CHARS:
        message = message.replace(quoted, _summary(error.instance))
    return f"{_clip(message)} (at {error.json_path})"


def _summary(value: Any) -> str:
    if isinstance(value, str):
        return f"{value[: MAX_VALUE_CHARS // 2]!r}… ({len(value)} chars)"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return f"{repr(value)[: MAX_VALUE_CHARS // 2]}…"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"


def _describe(exc: ValidationError, path: Path) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            allowed = _ACTION_KEYS if len(err["loc"]) == 3 else "actions" if len(err["loc"]) == 1 else None
            hint = f" (allowed: {allowed})" if allowed else ""
            lines.append(f"unknown key {key!r} in {path}{hint}")
        else:
            lines.append(f"{key} in {path}: {err['msg']}")
    return "; ".join(lines)
