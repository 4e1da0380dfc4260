"""The ``sextant`` command: one click group, stages loaded by name when used.

The core must never import a stage, so stage commands are named here only as
``"package.module:attribute"`` strings and imported on first use (click's
"Complex Applications" lazy-loading pattern). That keeps ``sextant --help``
fast and the import graph pointing one way.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import trio

from sextant import __version__
from sextant.config import Settings, default_data_dir
from sextant.display import one_line
from sextant.errors import SextantError

T = TypeVar("T")

#: The exit status of a command Ctrl-C stopped: what a shell reports for one SIGINT killed.
EXIT_INTERRUPTED = 130

#: Subcommands that live outside the core, by dotted path.
LAZY_COMMANDS: dict[str, str] = {
    "crawl": "crawler.cli:crawl",
    "show": "crawler.cli:show",
    "forget": "crawler.cli:forget",
    "index": "indexer.cli:index",
    "search": "indexer.cli:search",
    "serve": "search_capsule.cli:serve",
    "graph": "sextant.graph.cli:graph",
    "sample-space": "gemserve.sample_space.cli:sample_space",
    "demo": "sextant.pipeline:demo",
    "run": "sextant.pipeline:run",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when asked for.

    It is also the one place where our own errors become a one-line message
    and a non-zero exit, for every subcommand at once, and where a Ctrl-C that
    no command handled itself (one during start-up, say) ends it quietly.
    """

    def __init__(
        self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, cmd_name: str) -> click.Command | None:
        module_name, _, attribute = self.lazy_commands[cmd_name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
                raise  # a missing dependency inside the stage is a real error
            return None  # the stage is not part of this installation
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SextantError as exc:
            # Messages quote what capsules sent (a meta, a URL, a robots line).
            raise click.ClickException(one_line(str(exc))) from exc
        except KeyboardInterrupt:  # click would print "Aborted!" and exit 1
            click.echo(f"{ctx.invoked_subcommand or ctx.info_name} stopped", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None


pass_settings: Callable[..., Any] = click.make_pass_decorator(Settings)


def run_async(main: Callable[[], Awaitable[T]], *, interrupted: str = "interrupted") -> T:
    """Run a trio program from a command, the way every command wants it run.

    trio wraps errors from nurseries in exception groups; a user must see the
    one error inside (a ``SextantError`` or ``ClickException`` becomes the usual
    one-line message), and Ctrl-C must end the command quietly with exit 130.
    """
    try:
        return trio.run(main)
    except BaseException as exc:
        inner = _sole_exception(exc)
        if isinstance(inner, KeyboardInterrupt):
            click.echo(interrupted, err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None
        if inner is not exc:
            raise inner from None
        raise


def _sole_exception(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        interrupts = exc.subgroup(lambda e: isinstance(e, KeyboardInterrupt))
        if interrupts is not None:
            return KeyboardInterrupt()
        if len(exc.exceptions) != 1:
            return exc
        exc = exc.exceptions[0]
    return exc


@click.group(
    cls=LazyGroup,
    lazy_commands=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "SEXTANT"},
)
@click.version_option(__version__, prog_name="sextant")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Where the database, index and certificates live [default: {default_data_dir()}; "
    "env SEXTANT_DATA_DIR].",
)
@click.option(
    "--db-url",
    default=None,
    help="SQLAlchemy URL of the store "
    "[default: sqlite:///DATA_DIR/sextant.db; env SEXTANT_DB_URL].",
)
@click.pass_context
def cli(ctx: click.Context, data_dir: Path | None, db_url: str | None) -> None:
    """Sextant, a search engine for Geminispace.

    Data flows one way: `crawl` fills the store, `index` builds the search
    index from it, `serve` answers Gemini clients, `search` queries from the
    shell. `demo` shows all of it on a bundled sample Geminispace.
    """
    ctx.obj = Settings.load(data_dir=data_dir, db_url=db_url)


@cli.group()
def db() -> None:
    """Create, upgrade and inspect the store's schema (Alembic migrations)."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@pass_settings
def db_upgrade(settings: Settings, revision: str) -> None:
    """Create the store or bring its schema up to date."""
    from sextant.store import make_engine
    from sextant.store.migrate import current_revision, upgrade

    if settings.is_sqlite:
        settings.ensure_data_dir()
    engine = make_engine(settings.db_url)
    upgrade(engine, revision)
    click.echo(f"database at revision {current_revision(engine)} ({_safe_url(settings)})")


@db.command("current")
@pass_settings
def db_current(settings: Settings) -> None:
    """Print the schema revision of the store and the one the code expects."""
    from sextant.store import make_engine
    from sextant.store.migrate import current_revision, head_revision

    engine = make_engine(settings.db_url)
    current = current_revision(engine)
    head = head_revision(engine)
    state = "up to date" if current == head else "run `sextant db upgrade`"
    click.echo(f"current: {current or 'none'}\nhead:    {head}\n{state}")


@db.command("check")
@pass_settings
def db_check(settings: Settings) -> None:
    """Fail when the models and the migrations disagree."""
    from sextant.store.migrate import check, open_store

    check(open_store(settings.db_url))
    click.echo("models and migrations agree")


def _safe_url(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    return make_url(settings.db_url).render_as_string(hide_password=True)


def main() -> None:
    try:
        cli(prog_name="sextant")
    finally:
        # The command is done and its output flushed; what is left is freeing memory. The
        # interpreter's last collection would walk every object a stage imported (0.2-0.5 s
        # measured for the crawler and the capsule), time a Ctrl-C waits for; frozen, they
        # are skipped and the OS frees them.
        gc.freeze()
