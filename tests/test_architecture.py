"""Imports flow one way: sextant ← stages, indexer ← search_capsule, never back.

A static walk of the import statements, so a violation fails here before it
becomes a cycle somebody has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"sextant", "crawler", "indexer", "search_capsule", "migrations", "gemserve"}
ALLOWED = {
    "sextant": set(),
    "crawler": {"sextant"},
    "indexer": {"sextant"},
    "search_capsule": {"sextant", "indexer", "gemserve"},
    "migrations": {"sextant"},
    # The generic Gemini server and the sample space: a leaf on the core, not part of it.
    "gemserve": {"sextant"},
}


def first_party_imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in FIRST_PARTY:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_flow_one_way(package: str) -> None:
    imported = first_party_imports(package)
    forbidden = set(imported) - ALLOWED[package] - {package}
    assert not forbidden, {name: sorted(imported[name]) for name in forbidden}


def test_nothing_reads_outside_the_checkout() -> None:
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts:
            continue
        assert "../" + "shared" not in path.read_text(encoding="utf-8"), path
