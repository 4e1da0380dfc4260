"""The command line: help everywhere, the db commands, one-line errors."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sextant.cli import LAZY_COMMANDS, cli


def all_commands() -> list[list[str]]:
    """Every command path reachable from the group, loaded as a user would."""
    found: list[list[str]] = []

    def walk(group: click.Group, prefix: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None:
                continue
            found.append([*prefix, name])
            if isinstance(command, click.Group):
                walk(command, [*prefix, name])

    walk(cli, [])
    return found


def test_every_command_has_help() -> None:
    runner = CliRunner()
    commands = all_commands()
    assert ["db", "upgrade"] in commands
    for path in commands:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output
        command_help = result.output.split("Options:")[0]
        assert len(command_help.split("\n", 2)[-1].strip()) > 10, f"{path} has no description"


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert "sextant, version" in result.output


def test_db_upgrade_then_current(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--data-dir", str(tmp_path), "db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "sextant.db").exists()
    result = runner.invoke(cli, ["--data-dir", str(tmp_path), "db", "current"])
    assert "up to date" in result.output


def test_data_dir_comes_from_the_environment(tmp_path: Path) -> None:
    runner = CliRunner(env={"SEXTANT_DATA_DIR": str(tmp_path / "from-env")})
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "from-env" / "sextant.db").exists()


def test_db_current_on_an_empty_database_says_what_to_do(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "db", "current"])
    assert "current: none" in result.output
    assert "sextant db upgrade" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--db-url", "nonsense://", "db", "check"], "cannot understand the database URL"),
        (["--db-url", "not a url at all", "db", "upgrade"], "cannot understand the database URL"),
    ],
)
def test_user_mistakes_give_one_line_and_no_traceback(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("command", [["db", "check"], ["index"]])
def test_a_file_that_is_not_a_store_gives_one_line(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "sextant.db").write_bytes(b"these bytes were a store once " * 200)
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), *command])
    assert result.exit_code != 0
    assert "the store cannot be used now (file is not a database)" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_lazy_commands_point_outside_the_core_only_by_name() -> None:
    for target in LAZY_COMMANDS.values():
        module, _, attribute = target.partition(":")
        assert module
        assert attribute
