"""PNG charts where a picture beats a table.

matplotlib is an optional extra (``pip install 'sextant-search[plot]'``): it is large, and
only this command needs it. Figures are drawn through the object-oriented API on the Agg
canvas, so no display, GUI backend or pyplot global state is involved.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sextant.census import Breakdown, Census
from sextant.errors import SextantError
from sextant.graph.stats import GraphStats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TOP = 15
MISSING = (
    "charts need matplotlib, an optional extra: pip install 'sextant-search[plot]' "
    "(or pip install matplotlib)"
)


def plot_charts(stats: GraphStats, census: Census, out_dir: Path, *, top: int = TOP) -> list[Path]:
    """Draw every chart into ``out_dir`` (created if needed); return the files written."""
    require_matplotlib()
    from matplotlib.figure import Figure

    if out_dir.exists() and not out_dir.is_dir():
        raise SextantError(f"{out_dir} is a file; give --output a directory for the charts")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SextantError(f"cannot create {out_dir}: {exc.strerror}") from exc
    charts = {
        "degree-distribution.png": lambda fig: _degrees(fig, stats),
        "top-capsules.png": lambda fig: _top_capsules(fig, stats, top),
        "mime-types.png": lambda fig: _bars(fig, census.mime_types[:top], "MIME types", "pages"),
        "languages.png": lambda fig: _bars(fig, census.languages[:top], "Languages", "pages"),
        "status-families.png": lambda fig: _bars(
            fig, census.status_families, "Responses by status family", "pages"
        ),
        "page-sizes.png": lambda fig: _bars(fig, census.page_sizes, "Page sizes", "pages"),
    }
    written = []
    for name, draw in charts.items():
        figure = Figure(figsize=(8, 5), layout="constrained")
        draw(figure)
        path = out_dir / name
        figure.savefig(path, dpi=100, format="png")
        written.append(path)
    return written


def require_matplotlib() -> None:
    """Stop with the install command when the optional extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise SextantError(MISSING) from exc


def _degrees(figure: Figure, stats: GraphStats) -> None:
    """Log-log degree distribution: a straight-ish line is the heavy tail of a link graph."""
    axes = figure.add_subplot()
    series = (("in-degree", stats.page_in_degree), ("out-degree", stats.page_out_degree))
    plotted = False
    for label, degrees in series:
        points = [(d, n) for d, n in degrees.distribution if d > 0]  # log scale has no 0
        if points:
            axes.loglog(*zip(*points, strict=True), marker="o", linestyle="", label=label)
            plotted = True
    axes.set_title(f"Degree distribution ({stats.pages:,} pages, {stats.links:,} links)")
    axes.set_xlabel("links")
    axes.set_ylabel("pages")
    if plotted:
        axes.legend()
    else:
        _no_data(axes)


def _top_capsules(figure: Figure, stats: GraphStats, top: int) -> None:
    ranked = stats.top_capsules_by_inbound[:top]
    _bars(
        figure,
        tuple((r.name, r.inbound) for r in ranked),
        "Capsules by links from other capsules",
        "inbound links",
    )


def _bars(figure: Figure, rows: Breakdown, title: str, unit: str) -> None:
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.set_xlabel(unit)
    if not any(count for _, count in rows):
        _no_data(axes)
        return
    labels = [_short(label) for label, _ in rows]
    counts = [count for _, count in rows]
    positions = list(range(len(rows)))
    axes.barh(positions, counts)
    # Counts have no fractions. A linear axis's locator is an AutoLocator (a MaxNLocator, which
    # takes ``integer``); the stubs type it as the base Locator.
    axes.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()  # the first row on top, as in the tables


def _no_data(axes: Any) -> None:
    axes.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=axes.transAxes)


def _short(label: str, limit: int = 40) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
