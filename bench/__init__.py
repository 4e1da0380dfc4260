"""Benchmarks: each ``bench_<area>.py`` has ``run(*, quick=False) -> dict`` and prints a report.

They run outside the test suite: ``make bench`` (``python -m bench``) runs them all
and prints one table; ``python -m bench.bench_crawl`` runs one.
"""
