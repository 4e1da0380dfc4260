"""Imports flow one way: sextant ← stages, indexer ← search_capsule, never back.

A static walk of the import statements, so a violation fails here before it
becomes a cycle somebody has to untangle.
"""

from __future__ import annotations

import ast
import subprocess
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


def test_no_file_cites_material_a_checkout_does_not_have() -> None:
    """The leads' notes beside the project are not in a user's checkout: citing them sends
    readers nowhere (pyproject.toml once cited one)."""
    absent = [name + ".md" for name in ("PERFORMANCE", "STYLE", "GEMINI")]
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".gmi", ".txt", ".cfg", ".ini"}:
            continue
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        cited = [file for file in absent if file in text and not (ROOT / file).exists()]
        assert not cited, f"{name} cites {cited}, which are not in the repository"
