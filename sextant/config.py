"""Where Sextant keeps its data, decided once and passed down explicitly.

Precedence follows click's: command-line option, then environment
(``SEXTANT_DATA_DIR``, ``SEXTANT_DB_URL``), then the XDG data directory
(``~/.local/share/sextant`` on Linux). Nothing deeper in the code reads the
environment; it receives a :class:`Settings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from sextant.errors import ConfigError

APP_NAME = "sextant"


def default_data_dir() -> Path:
    """The XDG data directory, unless SEXTANT_DATA_DIR says otherwise."""
    env = os.environ.get("SEXTANT_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    db_url: str

    @classmethod
    def load(cls, *, data_dir: Path | None = None, db_url: str | None = None) -> Settings:
        data_dir = (data_dir or default_data_dir()).expanduser().resolve()
        db_url = (
            db_url or os.environ.get("SEXTANT_DB_URL") or f"sqlite:///{data_dir / 'sextant.db'}"
        )
        return cls(data_dir=data_dir, db_url=db_url)

    @property
    def index_dir(self) -> Path:
        """The live Whoosh index; rebuilds happen beside it and are swapped in."""
        return self.data_dir / "index"

    @property
    def cert_dir(self) -> Path:
        """Certificates the search capsule generates for itself."""
        return self.data_dir / "certs"

    @property
    def is_sqlite(self) -> bool:
        return self.db_url.startswith("sqlite")

    def ensure_data_dir(self) -> Path:
        """Create the data directory, with a message that says what to do when we cannot."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the data directory {self.data_dir}: {exc.strerror}. "
                "Choose another with --data-dir or SEXTANT_DATA_DIR."
            ) from exc
        return self.data_dir
