"""Stage 2: store → Whoosh index, built incrementally, and the search API over it."""
