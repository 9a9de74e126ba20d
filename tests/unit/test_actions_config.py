"""streamrelay/config/actions.toml and its loader: strict keys, compensations, JSON Schemas compiled once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamrelay.config.actions import DEFAULT_ACTIONS, SchemaValidator, load_actions
from streamrelay.core.contracts.units import ToolCallUnit
from streamrelay.core.errors import ConfigError
from streamrelay.core.json_types import JsonObject
from streamrelay.core.lanes.gate import ActionClass, Verdict


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "actions.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_actions(path)
    message = str(info.value)
    assert str(path) in message, message
    return message


def test_the_shipped_file_loads_with_each_class_and_a_compensation() -> None:
    catalog, validate = load_actions(DEFAULT_ACTIONS)
    classes = {action.name: action.cls for action in catalog}
    assert classes["search"] is ActionClass.IDEMPOTENT
    assert classes["write_draft"] is ActionClass.REVERSIBLE and classes["write_file"] is ActionClass.REVERSIBLE
    assert classes["charge_card"] is ActionClass.COMPENSABLE and classes["send_email"] is ActionClass.IRREVERSIBLE
    charge = catalog.get("charge_card")
    assert charge is not None and charge.compensation == "refund_card" and "refund_card" in catalog
    assert isinstance(validate, SchemaValidator) and "write_file" in validate and "write_draft" not in validate
    assert validate("write_file", {"path": "notes.txt", "content": "hi"}) is None
    assert validate("write_draft", {"anything": 1}) is None


def test_the_shipped_catalog_gates_calls() -> None:
    catalog, _ = load_actions()
    unit = ToolCallUnit(index=1, run="r", id="c", name="charge_card", args={})
    assert catalog.decide(unit, committed=False, ended=None).verdict is Verdict.WAIT


def test_no_path_means_an_empty_catalog_that_checks_nothing() -> None:
    catalog, validate = load_actions(None)
    assert len(catalog) == 0 and validate("search", {}) is None


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    message = _error(tmp_path / "nope.toml")
    assert "not found" in message


def test_a_file_that_is_not_toml(tmp_path: Path) -> None:
    assert "not valid TOML" in _error(_write(tmp_path, "[actions.search\n"))


def test_an_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, '[actions.search]\nclass = "idempotent"\ncolour = "blue"\n'))
    assert "unknown key 'actions.search.colour'" in message
    assert "allowed: class, compensation, description, schema, schema_file" in message


def test_an_unknown_top_level_table(tmp_path: Path) -> None:
    assert "unknown key 'tools'" in _error(_write(tmp_path, '[tools.search]\nclass = "idempotent"\n'))


def test_a_missing_or_unknown_class(tmp_path: Path) -> None:
    assert "actions.search.class" in _error(_write(tmp_path, '[actions.search]\ndescription = "web"\n'))
    message = _error(_write(tmp_path, '[actions.search]\nclass = "harmless"\n'))
    assert "actions.search.class" in message and "'idempotent'" in message


def test_a_compensable_action_must_name_its_compensation(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, '[actions.charge_card]\nclass = "compensable"\n'))
    assert "actions.charge_card.compensation" in message
    assert "charge_card is compensable: name its compensation" in message
    assert 'compensation = "refund_card"' in message


def test_a_compensation_must_be_in_the_catalog(tmp_path: Path) -> None:
    text = '[actions.charge_card]\nclass = "compensable"\ncompensation = "refund_card"\n'
    message = _error(_write(tmp_path, text))
    assert "actions.charge_card.compensation" in message and "'refund_card' is not another action" in message


def test_only_a_compensable_action_names_a_compensation(tmp_path: Path) -> None:
    text = '[actions.send_email]\nclass = "irreversible"\ncompensation = "x"\n[actions.x]\nclass = "idempotent"\n'
    message = _error(_write(tmp_path, text))
    assert "actions.send_email.compensation" in message and "send_email is irreversible" in message


def test_an_invalid_schema_names_the_action(tmp_path: Path) -> None:
    text = '[actions.search]\nclass = "idempotent"\nschema = { type = "objekt" }\n'
    message = _error(_write(tmp_path, text))
    assert "actions.search.schema" in message and "not a valid JSON Schema" in message and "$.type" in message


def test_an_unknown_schema_draft_is_an_error(tmp_path: Path) -> None:
    text = '[actions.search]\nclass = "idempotent"\nschema = { "$schema" = "https://example.com/my-draft" }\n'
    message = _error(_write(tmp_path, text))
    assert "actions.search.schema" in message and "https://example.com/my-draft" in message


def test_schema_and_schema_file_together_are_an_error(tmp_path: Path) -> None:
    text = '[actions.search]\nclass = "idempotent"\nschema = { type = "object" }\nschema_file = "s.json"\n'
    assert "schema or schema_file, not both" in _error(_write(tmp_path, text))


def test_schema_file_is_relative_to_the_toml_file(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    (tmp_path / "schemas" / "search.json").write_text(json.dumps(schema), encoding="utf-8")
    path = _write(tmp_path, '[actions.search]\nclass = "idempotent"\nschema_file = "schemas/search.json"\n')
    _, validate = load_actions(str(path))
    assert validate("search", {"q": "cats"}) is None
    assert validate("search", {}) == "args do not match search's schema: 'q' is a required property (at $)"


@pytest.mark.parametrize(
    ("content", "words"),
    [(None, "not found"), ("{not json", "not valid JSON"), ("[1, 2]", "must hold a JSON object")],
)
def test_a_bad_schema_file_names_the_action_and_both_files(tmp_path: Path, content: str | None, words: str) -> None:
    if content is not None:
        (tmp_path / "search.json").write_text(content, encoding="utf-8")
    message = _error(_write(tmp_path, '[actions.search]\nclass = "idempotent"\nschema_file = "search.json"\n'))
    assert "actions.search.schema_file" in message and str(tmp_path / "search.json") in message and words in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = '[actions.a]\nclass = "compensable"\n[actions.b]\nclass = "idempotent"\nschema = { type = 3 }\n'
    message = _error(_write(tmp_path, text))
    assert "actions.a.compensation" in message and "actions.b.schema" in message


def test_the_validator_lists_at_most_three_errors_with_their_paths() -> None:
    _, validate = load_actions()
    args: JsonObject = {"customer": 7, "amount_cents": 0, "currency": "usd", "tip": 1}
    message = validate("charge_card", args)
    assert message is not None and message.startswith("args do not match charge_card's schema: ")
    assert "(at $.customer)" in message and "(at $.amount_cents)" in message and "(at $.currency)" in message
    assert message.endswith("; and more")


def test_the_validator_checks_formats() -> None:
    _, validate = load_actions()
    assert validate("send_email", {"to": "ann@example.com", "subject": "hi", "body": "hello"}) is None
    message = validate("send_email", {"to": "not an address", "subject": "hi", "body": "hello"})
    assert message is not None and "(at $.to)" in message


def test_the_validator_never_quotes_a_long_value(tmp_path: Path) -> None:
    text = '[actions.note]\nclass = "reversible"\nschema = { properties = { t = { maxLength = 10 } } }\n'
    _, validate = load_actions(_write(tmp_path, text))
    long = "x" * 5000
    message = validate("note", {"t": long})
    assert message is not None and "(at $.t)" in message and "(5000 chars)" in message
    assert "x" * 81 not in message and len(message) < 300


def test_a_ref_inside_the_schema_resolves_and_a_remote_one_is_never_fetched(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"$ref": "#/$defs/query"}, "r": {"$ref": "https://example.invalid/remote.json"}},
        "$defs": {"query": {"type": "string"}},
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    _, validate = load_actions(_write(tmp_path, '[actions.s]\nclass = "idempotent"\nschema_file = "s.json"\n'))
    assert validate("s", {"q": "cats"}) is None
    assert "(at $.q)" in (validate("s", {"q": 1}) or "")
    message = validate("s", {"r": 1})
    assert message is not None and "does not resolve" in message
