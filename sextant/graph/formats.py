"""Graph file formats written as streams: one node or edge in, one line or element out.

Library writers (networkx's among them) build the whole document in memory first; these
write each node and edge as it arrives, so exporting a million links needs no more memory
than one line. Nodes must all come before edges, which every format here expects anyway.

Formats and the tools they are for:

* ``csv`` — spreadsheets and Gephi's table import: one table per file (nodes or edges).
* ``jsonl`` — scripts: one JSON object per line, ``"type"`` says node or edge.
* ``graphml`` — networkx, igraph, Gephi, yEd (GraphML 1.0, graphml.graphdrawing.org).
* ``gexf`` — Gephi's own format (GEXF 1.2, gexf.net).
* ``dot`` — Graphviz (graphviz.org/doc/info/lang.html).

A stream's ``description`` (what the export left out, and why) goes where a format has room
for one: GraphML's ``<desc>``, GEXF's ``<description>``, DOT's ``comment`` attribute; CSV
and JSON Lines have none, so the command line says it instead.

XML 1.0 cannot carry most control characters at all (not even as character references),
so in GraphML and GEXF they become U+FFFD; the other formats keep text exactly. JSON Lines
spells control and bidi characters as escapes (:func:`sextant.display.json_text`), since
the export goes to the terminal when no ``--output`` is given; CSV and DOT have no escape
for them, and are meant for files.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from sextant.display import json_text

AttributeType = Literal["string", "int", "float"]
Node = tuple[str, str, Mapping[str, Any]]  # id, label, attributes (None = no value)
Edge = tuple[str, str, int]  # source id, target id, weight

FORMATS = ("csv", "jsonl", "graphml", "gexf", "dot")
TABLES = ("all", "nodes", "edges")


@dataclass(frozen=True, slots=True)
class GraphStream:
    """A directed graph as two iterables, consumed once, nodes first."""

    name: str
    node_attributes: tuple[tuple[str, AttributeType], ...]  # besides id and label
    nodes: Iterable[Node]
    edges: Iterable[Edge]
    description: str = ""  # about the whole graph, for formats with a place for it


@dataclass(frozen=True, slots=True)
class Written:
    nodes: int
    edges: int


def write_graph(graph: GraphStream, out: TextIO, fmt: str, *, table: str = "all") -> Written:
    """Write ``graph`` to ``out`` in ``fmt``; ``table`` limits the output to nodes or edges.

    CSV holds a single table, so it needs ``table`` to be ``nodes`` or ``edges``; the other
    formats describe one graph and take ``all`` only, except JSON Lines, which takes any.
    """
    check_request(fmt, table)
    return WRITERS[fmt](graph, out, table)


def check_request(fmt: str, table: str) -> None:
    """Refuse a format/table combination that cannot be written, before any work is done."""
    if fmt not in WRITERS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; choose one of {', '.join(TABLES)}")
    if fmt == "csv" and table == "all":
        raise ValueError(
            "a CSV file holds one table: choose --table nodes or --table edges "
            "(run the export twice for both)"
        )
    if fmt in ("graphml", "gexf", "dot") and table != "all":
        raise ValueError(f"{fmt} describes a whole graph: --table works with csv and jsonl only")


# --- CSV and JSON Lines ---------------------------------------------------------------------


def _write_csv(graph: GraphStream, out: TextIO, table: str) -> Written:
    writer = csv.writer(out, lineterminator="\n")
    nodes = edges = 0
    if table == "nodes":
        names = [name for name, _ in graph.node_attributes]
        writer.writerow(["id", "label", *names])
        for node_id, label, attributes in graph.nodes:
            writer.writerow([node_id, label, *(_csv_value(attributes.get(n)) for n in names)])
            nodes += 1
    else:
        writer.writerow(["source", "target", "weight"])
        for source, target, weight in graph.edges:
            writer.writerow([source, target, weight])
            edges += 1
    return Written(nodes, edges)


def _csv_value(value: Any) -> str:
    return "" if value is None else _number(value) if isinstance(value, float) else str(value)


def _write_jsonl(graph: GraphStream, out: TextIO, table: str) -> Written:
    nodes = edges = 0
    if table in ("all", "nodes"):
        for node_id, label, attributes in graph.nodes:
            record = {"type": "node", "id": node_id, "label": label, **attributes}
            out.write(json_text(record) + "\n")
            nodes += 1
    if table in ("all", "edges"):
        for source, target, weight in graph.edges:
            record = {"type": "edge", "source": source, "target": target, "weight": weight}
            out.write(json_text(record) + "\n")
            edges += 1
    return Written(nodes, edges)


# --- GraphML --------------------------------------------------------------------------------

_GRAPHML_TYPES = {"string": "string", "int": "long", "float": "double"}


def _write_graphml(graph: GraphStream, out: TextIO, table: str) -> Written:
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns"'
        ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
        ' xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns'
        ' http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
        '  <key id="label" for="node" attr.name="label" attr.type="string"/>\n'
    )
    for name, kind in graph.node_attributes:
        out.write(
            f'  <key id="{_xml(name)}" for="node" attr.name="{_xml(name)}"'
            f' attr.type="{_GRAPHML_TYPES[kind]}"/>\n'
        )
    out.write('  <key id="weight" for="edge" attr.name="weight" attr.type="long"/>\n')
    out.write(f'  <graph id="{_xml(graph.name)}" edgedefault="directed">\n')
    if graph.description:
        out.write(f"    <desc>{_xml(graph.description)}</desc>\n")
    nodes = edges = 0
    for node_id, label, attributes in graph.nodes:
        data = [f'<data key="label">{_xml(label)}</data>']
        for name, _ in graph.node_attributes:
            value = attributes.get(name)
            if value is not None:
                data.append(f'<data key="{_xml(name)}">{_xml(_text(value))}</data>')
        out.write(f'    <node id="{_xml(node_id)}">{"".join(data)}</node>\n')
        nodes += 1
    for source, target, weight in graph.edges:
        out.write(
            f'    <edge source="{_xml(source)}" target="{_xml(target)}">'
            f'<data key="weight">{int(weight)}</data></edge>\n'
        )
        edges += 1
    out.write("  </graph>\n</graphml>\n")
    return Written(nodes, edges)


# --- GEXF -----------------------------------------------------------------------------------

_GEXF_TYPES = {"string": "string", "int": "long", "float": "double"}


def _write_gexf(graph: GraphStream, out: TextIO, table: str) -> Written:
    about = f"{graph.name}: {graph.description}" if graph.description else graph.name
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<gexf xmlns="http://www.gexf.net/1.2draft" version="1.2">\n'
        f"  <meta><creator>Sextant</creator><description>{_xml(about)}</description></meta>\n"
        '  <graph defaultedgetype="directed" mode="static">\n'
        '    <attributes class="node" mode="static">\n'
    )
    for name, kind in graph.node_attributes:
        out.write(
            f'      <attribute id="{_xml(name)}" title="{_xml(name)}"'
            f' type="{_GEXF_TYPES[kind]}"/>\n'
        )
    out.write("    </attributes>\n    <nodes>\n")
    nodes = edges = 0
    for node_id, label, attributes in graph.nodes:
        values = "".join(
            f'<attvalue for="{_xml(name)}" value="{_xml(_text(attributes[name]))}"/>'
            for name, _ in graph.node_attributes
            if attributes.get(name) is not None
        )
        out.write(
            f'      <node id="{_xml(node_id)}" label="{_xml(label)}">'
            f"<attvalues>{values}</attvalues></node>\n"
        )
        nodes += 1
    out.write("    </nodes>\n    <edges>\n")
    for source, target, weight in graph.edges:
        out.write(
            f'      <edge id="{edges}" source="{_xml(source)}" target="{_xml(target)}"'
            f' weight="{int(weight)}"/>\n'
        )
        edges += 1
    out.write("    </edges>\n  </graph>\n</gexf>\n")
    return Written(nodes, edges)


# --- DOT ------------------------------------------------------------------------------------


def _write_dot(graph: GraphStream, out: TextIO, table: str) -> Written:
    out.write(f"digraph {_dot(graph.name)} {{\n")
    if graph.description:
        out.write(f"  comment={_dot(graph.description)};\n")
    nodes = edges = 0
    for node_id, label, attributes in graph.nodes:
        pairs = [f"label={_dot(label)}"]
        pairs.extend(
            f"{name}={_dot(_text(attributes[name]))}"
            for name, _ in graph.node_attributes
            if attributes.get(name) is not None
        )
        out.write(f"  {_dot(node_id)} [{', '.join(pairs)}];\n")
        nodes += 1
    for source, target, weight in graph.edges:
        out.write(f"  {_dot(source)} -> {_dot(target)} [weight={int(weight)}];\n")
        edges += 1
    out.write("}\n")
    return Written(nodes, edges)


def _dot(text: str) -> str:
    """A DOT quoted string. Backslashes are doubled so none can escape the closing quote."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'


# --- shared ---------------------------------------------------------------------------------

# Characters XML 1.0 allows (section 2.2); anything else is replaced.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_XML_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        '"': "&quot;",
        "\t": "&#9;",
        "\n": "&#10;",
        "\r": "&#13;",
    }
)


def _xml(text: str) -> str:
    """Text safe inside XML content and double-quoted attributes alike.

    Tabs and line breaks become character references, or attribute-value normalization
    would turn them into spaces on reading (XML 1.0, 3.3.3).
    """
    return _NOT_XML.sub("\ufffd", text).translate(_XML_ESCAPES)


def _text(value: Any) -> str:
    return _number(value) if isinstance(value, float) else str(value)


def _number(value: float) -> str:
    return repr(value)  # the shortest text that reads back to the same float


WRITERS: dict[str, Callable[[GraphStream, TextIO, str], Written]] = {
    "csv": _write_csv,
    "jsonl": _write_jsonl,
    "graphml": _write_graphml,
    "gexf": _write_gexf,
    "dot": _write_dot,
}
