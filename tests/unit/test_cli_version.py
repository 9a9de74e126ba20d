"""``streamrelay --version``: the installed distribution's version, from its metadata, and nothing else runs."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from streamrelay.app.cli import app
from streamrelay.app.version import version as streamrelay_version


def test_version_prints_the_installed_distributions_version_and_exits_0() -> None:
    done = CliRunner().invoke(app, ["--version"])
    assert done.exit_code == 0
    assert done.output == f"streamrelay {version('streamrelay')}\n"
    assert streamrelay_version() == version("streamrelay")


def test_version_wins_over_a_command_and_its_missing_arguments() -> None:
    done = CliRunner().invoke(app, ["--version", "replay"])
    assert done.exit_code == 0 and done.output.startswith("streamrelay ")


def test_case_help_names_its_paths_argument_without_pythons_type() -> None:
    done = CliRunner().invoke(app, ["case", "--help"])
    assert done.exit_code == 0, done.output
    assert "list[Path]" not in done.output
    assert "PATH... <path>  case files or folders of them" in done.output, done.output
