"""Gemtext rendering: pure functions from values to pages, no I/O, no store, no index."""
