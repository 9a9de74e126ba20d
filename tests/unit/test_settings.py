"""streamrelay/config/channels.toml and its loader: strict keys, environment overrides, tokens only from the env."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from streamrelay.config.settings import DEFAULT_CONFIG, load_settings
from streamrelay.core.budgets.rate import BudgetScope
from streamrelay.core.errors import ConfigError
from streamrelay.core.events import DeliveryMode
from streamrelay.core.ports import CallKind
from streamrelay.core.units import LengthUnit


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "channels.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_file_loads_with_a_telegram_channel() -> None:
    settings = load_settings(DEFAULT_CONFIG)
    telegram = settings.channels["telegram"]
    policy = telegram.policy("telegram")
    assert policy.max_units == 4096 and policy.unit is LengthUnit.UTF16
    budgets = {b.budget.name: b.budget for b in telegram.budgets()}
    assert budgets["per_chat"].per_s == 1.0 and budgets["per_chat"].scope is BudgetScope.CHAT
    assert budgets["per_group"].per_s == pytest.approx(19 / 60)
    assert settings.service.host == "127.0.0.1"


def test_every_rate_budget_and_limit_in_the_shipped_file_carries_a_documentation_link() -> None:
    raw = tomllib.loads(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    for name, channel in raw["channels"].items():
        for budget, table in channel.get("rate", {}).items():
            assert str(table.get("source", "")).startswith("https://"), f"channels.{name}.rate.{budget} has no source"
    lines = DEFAULT_CONFIG.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^(limit|throttle_ms)\s*=", line):
            assert any("https://" in c for c in lines[max(0, i - 3) : i]), f"no link above {line!r}"


def test_the_shipped_file_knows_every_platform_and_starts_only_enabled_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert set(load_settings(DEFAULT_CONFIG).channels) == {"telegram", "web"}  # slack and discord ship disabled
    monkeypatch.setenv("STREAMRELAY_CHANNELS__SLACK__ENABLED", "true")
    monkeypatch.setenv("STREAMRELAY_CHANNELS__DISCORD__ENABLED", "true")
    settings = load_settings(DEFAULT_CONFIG)
    slack, discord = settings.channels["slack"], settings.channels["discord"]
    assert slack.policy("slack").max_units == 4000 and discord.policy("discord").max_units == 2000
    update = next(b.budget for b in slack.budgets() if b.budget.name == "update_per_workspace")
    assert update.scope is BudgetScope.BOT and update.calls == {CallKind.EDIT}
    assert update.per_s == pytest.approx(42 / 60) and update.burst == 7
    assert update.burst + update.per_s * 60 <= 50  # Tier 3: at most 50 in any 60 s, a restart included
    monkeypatch.delenv("STREAMRELAY_CHANNELS__SLACK__ENABLED")
    assert "slack" not in load_settings(DEFAULT_CONFIG).channels


def test_a_budget_table_overrides_the_built_in_one_field_by_field(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.t]\nplatform = "telegram"\n[channels.t.rate.per_chat]\nburst = 3\n')
    budgets = {b.budget.name: b for b in load_settings(path).channels["t"].budgets()}
    assert budgets["per_chat"].budget.burst == 3 and budgets["per_chat"].budget.per_s == 1.0
    assert budgets["per_chat"].source.startswith("https://core.telegram.org/")
    assert set(budgets) == {"per_chat", "per_group", "per_bot"}


def test_a_new_budget_without_its_source_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.t]\nplatform = "telegram"\n[channels.t.rate.mine]\nscope = "bot"\nper_s = 3\n')
    with pytest.raises(ConfigError, match="needs scope, per_s or per_min, and source"):
        load_settings(path)


def test_native_delivery_on_a_platform_without_it_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.d]\nplatform = "discord"\ndelivery = "native"\n')
    with pytest.raises(ConfigError, match="discord has no native streaming"):
        load_settings(path)


def test_an_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.t]\nplatform = "telegram"\nthrotle_ms = 3\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "channels.t.throtle_ms" in str(info.value)
    assert str(path) in str(info.value)


def test_a_bad_value_names_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.t]\nplatform = "telegram"\ndelivery = "carrier-pigeon"\n')
    with pytest.raises(ConfigError, match=r"channels\.t\.delivery"):
        load_settings(path)


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-5"])
def test_a_retry_window_that_is_not_a_finite_positive_number_is_refused(tmp_path: Path, value: str) -> None:
    """``[service] retry_window_s = inf`` would retry a part through a permanent outage forever, its run never
    reported: refused, naming the key."""
    path = _write(tmp_path, f'[service]\nretry_window_s = {value}\n[channels.t]\nplatform = "telegram"\n')
    with pytest.raises(ConfigError, match=r"service\.retry_window_s"):
        load_settings(path)


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(_write(tmp_path, "[channels.t\n"))


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")


def test_the_environment_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRELAY_CHANNELS__TELEGRAM__THROTTLE_MS", "250")
    monkeypatch.setenv("STREAMRELAY_CHANNELS__TELEGRAM__DELIVERY", "block")
    monkeypatch.setenv("STREAMRELAY_TOKEN", "unrelated-secret")
    telegram = load_settings(DEFAULT_CONFIG).channels["telegram"]
    assert telegram.throttle_ms == 250
    assert telegram.delivery is DeliveryMode.BLOCK
    assert telegram.limit == 4096  # the rest of the table is kept


def test_tokens_come_only_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    telegram = load_settings(DEFAULT_CONFIG).channels["telegram"]
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN is not set"):
        telegram.token("telegram")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:secret-value")
    token = telegram.token("telegram")
    assert token.get_secret_value() == "123456:secret-value"
    assert "secret-value" not in repr(token) and "secret-value" not in str(token)


def test_an_unknown_platform_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.w]\nplatform = "irc"\n')
    with pytest.raises(
        ConfigError,
        match=r"channels\.w\.platform.*'telegram', 'slack', 'discord', 'matrix', 'whatsapp', 'teams' or 'web'",
    ):
        load_settings(path)


def test_the_web_channel_needs_no_token(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.w]\nplatform = "web"\n')
    assert load_settings(path).channels["w"].token("w").get_secret_value() == ""


def test_a_small_limit_caps_the_block_parameters(tmp_path: Path) -> None:
    path = _write(tmp_path, '[channels.t]\nplatform = "telegram"\nlimit = 50\n')
    policy = load_settings(path).channels["t"].policy("t")
    assert policy.max_units == 50
    assert policy.coalesce.max_chars == 50 and policy.coalesce.min_chars <= 50
    assert policy.block_params().max_chars == 50


def test_max_retry_after_s_reaches_the_send_chains_and_a_bad_one_names_the_key(tmp_path: Path) -> None:
    from streamrelay.core.delivery.send_chain import MAX_RETRY_AFTER_S

    assert load_settings().channels["telegram"].policy("telegram").max_retry_after_s == MAX_RETRY_AFTER_S
    path = _write(tmp_path, '[channels.m]\nplatform = "matrix"\nmax_retry_after_s = 30\n')
    assert load_settings(path).channels["m"].policy("m").max_retry_after_s == 30.0
    path = _write(tmp_path, '[channels.m]\nplatform = "matrix"\nmax_retry_after_s = 0\n')
    with pytest.raises(ConfigError, match="max_retry_after_s"):
        load_settings(path)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('[channels.m]\nplatform = "matrix"\nmax_retry_after_s = true', "max_retry_after_s"),
        ('[channels.m]\nplatform = "matrix"\nthrottle_ms = false', "throttle_ms"),
        ('[channels.m]\nplatform = "matrix"\n[channels.m.chunk]\nmax_chars = true', "max_chars"),
        ('[channels.m]\nplatform = "matrix"\n[channels.m.rate.per_room]\nper_s = true', "per_s"),
        ("[service.connections]\nheader_timeout_s = true", "header_timeout_s"),
        ('[channels.m]\nplatform = "matrix"\n[clients.a]\ntoken_env = "A"\nmax_active_runs = true', "max_active_runs"),
    ],
)
def test_a_boolean_where_a_number_goes_is_refused_naming_the_key(tmp_path: Path, table: str, key: str) -> None:
    """pydantic's lax mode read ``max_retry_after_s = true`` as 1.0 (the breaker): a guess, now an error."""
    with pytest.raises(ConfigError, match=rf"{key} must be a number, not the boolean"):
        load_settings(_write(tmp_path, table + "\n"))


def test_the_splitter_recuts_a_part_that_rendering_made_too_long() -> None:
    from streamrelay.core.policy import ChannelPolicy, Splitter
    from streamrelay.core.ports import TextFormat

    policy = ChannelPolicy(name="c", max_units=100, unit=LengthUnit.CHARS, fmt=TextFormat.MARKDOWN)

    def measure(text: str, fmt: TextFormat) -> int:  # a renderer that turns each rule into 20 chars
        return len(text.replace("---", "-" * 20))

    text = "\n\n".join(["Intro words here.", "---", "More text follows.", "---", "And the end of it."] * 3)
    parts = Splitter(policy, measure).split(text)
    assert all(measure(p, TextFormat.MARKDOWN) <= 100 for p in parts)
    assert "".join("".join(p.split()) for p in parts) == "".join(text.split())


def test_clients_tables_give_limits_tokens_and_refuse_unknown_channels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[channels.web]\nplatform = "web"\n\n[clients.team-a]\ntoken_env = "TEAM_A"\nchannels = ["web"]\n'
        'max_active_runs = 5\nseq_window = 7\n\n[clients.team-b]\ntoken_env = "TEAM_B"\n'
    )
    settings = load_settings(path)
    limits = settings.client_limits()
    assert limits["team-a"].max_active_runs == 5 and limits["team-a"].seq_window == 7
    assert limits["team-a"].channels == frozenset({"web"}) and limits["team-b"].channels is None
    with pytest.raises(ConfigError, match=re.escape("clients.team-a: environment variable TEAM_A is not set")):
        settings.client_tokens()
    monkeypatch.setenv("TEAM_A", "a-token")
    monkeypatch.setenv("TEAM_B", "b-token")
    assert [(lim.name, tok.get_secret_value()) for lim, tok in settings.client_tokens()] == [
        ("team-a", "a-token"),
        ("team-b", "b-token"),
    ]
    assert "a-token" not in repr(settings.client_tokens())
    path.write_text('[channels.web]\nplatform = "web"\n\n[clients.x]\ntoken_env = "X"\nchannels = ["telegram"]\n')
    with pytest.raises(ConfigError, match="unknown channels"):
        load_settings(path)
    path.write_text('[clients.Bad]\ntoken_env = "X"\n')
    with pytest.raises(ConfigError, match="client name 'Bad'"):
        load_settings(path)
    path.write_text('[clients.x]\ntoken_env = "X"\nmax_active_runs = 0\n')
    with pytest.raises(ConfigError, match=re.escape("clients.x.max_active_runs")):
        load_settings(path)


def test_without_clients_the_service_token_is_the_default_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[channels.web]\nplatform = "web"\n')
    monkeypatch.setenv("STREAMRELAY_TOKEN", "the-token")
    ((limits, token),) = load_settings(path).client_tokens()
    assert limits.name == "default" and token.get_secret_value() == "the-token"


def _installed_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped channels file as a wheel installs it (inside site-packages), that folder made the SHIPPED one."""
    from streamrelay.config import paths

    shipped = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "streamrelay" / "config"
    shipped.mkdir(parents=True)
    for name in ("channels.toml", "actions.toml"):
        (shipped / name).write_bytes((paths.SHIPPED / name).read_bytes())
    monkeypatch.setattr(paths, "SHIPPED", shipped)
    return shipped / "channels.toml"


def test_the_shipped_file_of_an_installed_package_keeps_its_ledger_in_the_users_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Breaker finding 8: ``serve`` without --config after pip install wrote SQLite into site-packages."""
    config = _installed_copy(tmp_path, monkeypatch)
    monkeypatch.delenv("STREAMRELAY_SERVICE__LEDGER", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert load_settings(config).service.ledger == str(
        tmp_path / "state" / "streamrelay" / "var" / "streamrelay.sqlite3"
    )
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".local" / "state" / "streamrelay" / "var" / "streamrelay.sqlite3"
    assert load_settings(config).service.ledger == str(expected)
    monkeypatch.setenv("STREAMRELAY_SERVICE__LEDGER", str(tmp_path / "mine.sqlite3"))  # absolute: as given
    assert load_settings(config).service.ledger == str(tmp_path / "mine.sqlite3")


def test_a_channels_file_of_ones_own_keeps_its_ledger_beside_it_even_under_site_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _installed_copy(tmp_path, monkeypatch)
    monkeypatch.delenv("STREAMRELAY_SERVICE__LEDGER", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    own = config.parent.parent / "mine" / "channels.toml"
    own.parent.mkdir()
    own.write_bytes(config.read_bytes())
    assert load_settings(own).service.ledger == str(own.parent / "var" / "streamrelay.sqlite3")


def test_the_shipped_file_of_a_checkout_keeps_its_ledger_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs' rule for a source checkout: streamrelay/config/var/streamrelay.sqlite3."""
    from streamrelay.config import paths

    shipped = tmp_path / "checkout" / "streamrelay" / "config"
    shipped.mkdir(parents=True)
    for name in ("channels.toml", "actions.toml"):
        (shipped / name).write_bytes((paths.SHIPPED / name).read_bytes())
    monkeypatch.setattr(paths, "SHIPPED", shipped)
    monkeypatch.delenv("STREAMRELAY_SERVICE__LEDGER", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert not paths.installed()
    assert load_settings(shipped / "channels.toml").service.ledger == str(shipped / "var" / "streamrelay.sqlite3")


def test_matrix_cuts_in_utf16_units_and_checks_each_message_on_its_bytes(tmp_path: Path) -> None:
    """Two numbers: the chunk length (``limit``, UTF-16 units of source) and the rendered limit (bytes of the
    edit's JSON) that the adapter is built with; the other platforms keep one."""
    path = _write(tmp_path, '[channels.m]\nplatform = "matrix"\n[channels.t]\nplatform = "telegram"\nlimit = 3000\n')
    channels = load_settings(path).channels
    matrix, telegram = channels["m"].policy("m"), channels["t"].policy("t")
    assert (matrix.max_units, matrix.unit, matrix.rendered_max) == (5000, LengthUnit.UTF16, 63_488)
    assert matrix.split_params().max_chars == 4500  # Markdown: 10% for what rendering adds
    assert (telegram.max_units, telegram.render_limit, telegram.rendered_max) == (3000, None, 3000)


def test_a_matrix_limit_past_what_could_ever_fit_names_its_unit(tmp_path: Path) -> None:
    ok = _write(tmp_path, '[channels.m]\nplatform = "matrix"\nlimit = 31744\n')
    assert load_settings(ok).channels["m"].policy("m").max_units == 31_744  # the most: 2 bytes a unit at least
    path = _write(tmp_path, '[channels.m]\nplatform = "matrix"\nlimit = 63488\n')
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    message = str(err.value)
    assert "limit 63488 is over matrix's 31744" in message and "utf16 units of the source text" in message
    assert "63488 bytes of its edit's JSON" in message


def test_the_matrix_adapter_is_built_with_the_rendered_limit_not_the_chunk_length(tmp_path: Path) -> None:
    from pydantic import SecretStr

    from streamrelay.app.service import make_adapter

    path = _write(tmp_path, '[channels.m]\nplatform = "matrix"\napi_base = "http://127.0.0.1:9"\n')
    channel = load_settings(path).channels["m"]
    adapter = make_adapter("m", channel, SecretStr("syt_c3RyZWFtcmVsYXk_DryRunTokenForTheMock_0a1b2c"))
    assert adapter.max_units == 63_488 and channel.policy("m").max_units == 5000


def test_the_splitter_and_the_live_text_compare_the_rendering_with_the_rendered_limit() -> None:
    """A part of 5,000 UTF-16 units that renders to 4 bytes each (20,000) fits a 63,488-byte message: neither the
    splitter nor the live preview cuts it (comparing with the chunk length, 5,000, cut it to a quarter)."""
    from streamrelay.core.delivery.slots import PendingText
    from streamrelay.core.policy import ChannelPolicy, Splitter
    from streamrelay.core.ports import TextFormat

    def measure(text: str, fmt: TextFormat) -> int:  # a rendering that carries the text 4 times
        return 4 * len(text.encode())

    text = " ".join(["word"] * 1000)[:4999]
    two = ChannelPolicy(name="m", max_units=5000, render_limit=63_488, fmt=TextFormat.PLAIN)
    one = ChannelPolicy(name="m", max_units=5000, fmt=TextFormat.PLAIN)
    assert Splitter(two, measure).split(text) == [text]
    assert len(Splitter(one, measure).split(text)) >= 4  # each part at most 1,250 units
    assert PendingText(None, head=text, max_units=two.rendered_max).text(measure) == text
    assert len(PendingText(None, head=text, max_units=one.rendered_max).text(measure)) <= 1250
    notice = "… [cut]"
    ending = Splitter(two, measure).ending(text, notice)
    assert ending == f"{text}\n\n{notice}" and measure(ending, TextFormat.PLAIN) <= 63_488  # the notice fits too


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('platform = "teams"\nsettle_with_graph = true\n', "settle_with_graph needs graph_tenant"),
        ('platform = "slack"\nsettle_with_graph = true\n', "Microsoft Teams settings"),
        ('platform = "teams"\ngraph_tenant = "contoso"\n', "graph_tenant"),
        ('platform = "teams"\ngraph_team = "General"\n', "graph_team"),
    ],
)
def test_graph_settlement_settings_are_teams_and_need_the_tenant(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(_write(tmp_path, f"[channels.t]\n{table}"))


def test_graph_settlement_loads_with_a_tenant_and_a_team(tmp_path: Path) -> None:
    tenant, team = "99999999-8888-4777-8666-555555555555", "22222222-3333-4444-8555-666666666666"
    text = f'[channels.t]\nplatform = "teams"\nsettle_with_graph = true\ngraph_tenant = "{tenant}"\n'
    text += f'graph_team = "{team}"\n'
    channel = load_settings(_write(tmp_path, text)).channels["t"]
    assert (channel.settle_with_graph, channel.graph_tenant, channel.graph_team) == (True, tenant, team)
