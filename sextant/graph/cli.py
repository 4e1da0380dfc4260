"""``sextant graph``: statistics, census, exports and charts of what the crawler found."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

import click
from sqlalchemy.orm import Session

from sextant.cli import pass_settings
from sextant.config import Settings
from sextant.display import json_text
from sextant.errors import SextantError
from sextant.graph.formats import FORMATS, TABLES, check_request

quiet_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress on stderr (it is off anyway when not a TTY)."
)


@click.group()
def graph() -> None:
    """Link-graph statistics, exports and charts, and the census of Geminispace.

    Everything here only reads the store, so it is safe while a crawl runs.
    """


@graph.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--top", default=10, show_default=True, type=click.IntRange(1), help="Top-list length."
)
@quiet_option
@pass_settings
def stats(settings: Settings, as_json: bool, top: int, quiet: bool) -> None:
    """Pages, capsules and links; degrees, top pages and capsules, components, reach.

    Includes the census (see `sextant graph census`). Pages and capsules whose robots.txt
    disallows the agent `researcher` are left out, and counted as such.
    """
    from sextant.census import census
    from sextant.graph.load import load_graph
    from sextant.graph.report import render_census, render_stats
    from sextant.graph.researcher import left_out
    from sextant.graph.stats import graph_stats

    status = _Status(quiet)
    with _session(settings) as session:
        status("reading robots.txt files")
        left = left_out(session)  # judged once for both the census and the graph
        status("taking the census")
        counted = census(session, left=left)
        status("reading the link graph and computing PageRank")
        result = graph_stats(session, load_graph(session, left), top=top)
    status.done()
    if as_json:
        _echo_json({"census": counted.as_dict(), "graph": result.as_dict()})
    else:
        click.echo(render_census(counted) + "\n\n" + render_stats(result))


@graph.command("census")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@pass_settings
def census_command(settings: Settings, as_json: bool) -> None:
    """What Geminispace is made of: types, languages, statuses, sizes, TLS, certificates.

    Pages and capsules whose robots.txt disallows the agent `researcher` are left out, and
    counted as such.
    """
    from sextant.census import census
    from sextant.graph.report import render_census

    with _session(settings) as session:
        counted = census(session)
    if as_json:
        _echo_json(counted.as_dict())
    else:
        click.echo(render_census(counted))


@graph.command()
@click.option(
    "--level",
    type=click.Choice(["page", "capsule"]),
    default="page",
    show_default=True,
    help="Nodes are pages, or capsules with link counts as edge weights.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="graphml",
    show_default=True,
    help="graphml/gexf for Gephi and networkx, dot for Graphviz, csv/jsonl for scripts.",
)
@click.option(
    "--table",
    type=click.Choice(TABLES),
    default="all",
    show_default=True,
    help="csv needs nodes or edges (one table per file); jsonl takes any.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="File to write [default: stdout].",
)
@quiet_option
@pass_settings
def export(
    settings: Settings,
    level: str,
    fmt: str,
    table: str,
    output: Path | None,
    quiet: bool,
) -> None:
    """Write the link graph for Gephi, networkx, Graphviz or a spreadsheet.

    Nodes carry title, capsule, status, MIME type, inbound links and PageRank. The file is
    written as a stream, so a million links need little memory. Pages and capsules whose
    robots.txt disallows the agent `researcher` are left out; how many is said on stderr
    and in the file's description (GraphML, GEXF, DOT).
    """
    from sextant.graph.export import export_graph, export_size, left_out_note
    from sextant.graph.load import load_graph

    try:
        check_request(fmt, table)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    status = _Status(quiet)
    with _session(settings) as session:
        status("reading the link graph")
        loaded = load_graph(session)
        status.done()
        with _output(output) as out:
            with click.progressbar(
                length=export_size(loaded, level, table),
                label=f"exporting {level} graph",
                file=sys.stderr if status.active else cast(TextIO, _Discard()),
            ) as bar:
                written = export_graph(
                    session,
                    out,
                    level=level,
                    fmt=fmt,
                    table=table,
                    graph=loaded,
                    progress=bar.update,
                )
    if output is not None and not quiet:
        click.echo(
            f"wrote {written.nodes:,} nodes and {written.edges:,} edges to {output}", err=True
        )
    if not quiet:
        click.echo(left_out_note(loaded), err=True)


@graph.command()
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the PNG files (created if missing).",
)
@click.option(
    "--top", default=15, show_default=True, type=click.IntRange(1), help="Bars per chart."
)
@quiet_option
@pass_settings
def plot(settings: Settings, output: Path, top: int, quiet: bool) -> None:
    """PNG charts: degree distribution (log-log), top capsules, MIME types, languages, sizes.

    Needs matplotlib: pip install 'sextant-search[plot]'.
    """
    from sextant.census import census
    from sextant.graph.load import load_graph
    from sextant.graph.plot import plot_charts, require_matplotlib
    from sextant.graph.researcher import left_out
    from sextant.graph.stats import graph_stats

    require_matplotlib()  # before the slow part
    status = _Status(quiet)
    with _session(settings) as session:
        status("reading robots.txt files")
        left = left_out(session)
        status("taking the census")
        counted = census(session, left=left)
        status("reading the link graph and computing PageRank")
        result = graph_stats(session, load_graph(session, left), top=top)
    status("drawing")
    written = plot_charts(result, counted, output, top=top)
    status.done()
    for path in written:
        click.echo(str(path))


@contextmanager
def _session(settings: Settings) -> Iterator[Session]:
    """One read transaction, so every figure describes the same moment of the store."""
    from sextant.store import session_factory
    from sextant.store.migrate import open_store

    engine = open_store(settings.db_url)
    try:
        with session_factory(engine)() as session:
            if engine.dialect.name == "postgresql":
                # SQLite's read transaction is already a snapshot; PostgreSQL's default
                # READ COMMITTED would let a running crawl change the data between queries.
                session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            yield session
    finally:
        engine.dispose()


@contextmanager
def _output(path: Path | None) -> Iterator[TextIO]:
    """stdout, or ``path`` written beside it and renamed at the end.

    An export that fails or is interrupted halfway then leaves the previous file (or
    nothing) in place, never a truncated graph that looks whole.
    """
    if path is None:
        yield from _utf8_stdout()
        return
    partial = path.with_name(path.name + ".partial")
    try:
        handle = partial.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise SextantError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with handle:
            yield handle
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def _utf8_stdout() -> Iterator[TextIO]:
    """stdout as UTF-8 whatever the locale: the XML formats declare UTF-8 in their header."""
    stdout = sys.stdout
    buffer = getattr(stdout, "buffer", None)
    if buffer is None:  # already a text-only stream (an IDE, a test harness)
        yield stdout
        return
    stdout.flush()
    wrapper = io.TextIOWrapper(buffer, encoding="utf-8", newline="")
    try:
        yield wrapper
    finally:
        wrapper.flush()
        wrapper.detach()  # leave sys.stdout's buffer open


def _echo_json(data: Any) -> None:
    click.echo(json_text(data, indent=2))


class _Status:
    """A one-line status on stderr for an interactive user; silent otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.active = not quiet and sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        if self.active:
            click.echo(f"\r\x1b[K{message}…", nl=False, err=True)

    def done(self) -> None:
        if self.active:
            click.echo("\r\x1b[K", nl=False, err=True)


class _Discard:
    """A file that swallows the progress bar when there is no one to see it."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
