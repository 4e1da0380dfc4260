"""An installed Sextant (a wheel, not this checkout) upgrades a database and has its data.

The wheel is built and unpacked (an unpacked wheel is exactly what pip installs),
then run from another directory, so nothing can come from the source tree.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_an_installed_wheel_migrates_a_database_and_ships_its_data(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q"]
    subprocess.run(
        [*build, "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("sextant_search-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "migrations/versions/0001_initial_schema.py" in names
    assert "crawler/traps.txt" in names
    assert "gemserve/sample_space/content/station.example/index.gmi" in names
    assert not any(name.startswith(("tests/", "bench/")) for name in names)

    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = subprocess.run(
        [sys.executable, "-c", "import sextant, migrations; print(sextant.__file__)"],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.startswith(str(site))
    upgrade = subprocess.run(
        [sys.executable, "-m", "sextant", "--data-dir", str(tmp_path / "data"), "db", "upgrade"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert upgrade.returncode == 0, upgrade.stderr
    assert "database at revision" in upgrade.stdout
    assert (tmp_path / "data" / "sextant.db").exists()
