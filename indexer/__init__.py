"""Stage 2: store → Whoosh index, built incrementally, and the search API over it."""

from indexer.mapped import install as _install_mapped_files

_install_mapped_files()  # before any index is opened: see indexer/mapped.py
