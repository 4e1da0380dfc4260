"""Stage 1: Geminispace → store.

A polite trio crawler: reads seeds, keeps its frontier in the database, obeys
robots.txt, throttles per capsule and per address, and records every answer.
"""
