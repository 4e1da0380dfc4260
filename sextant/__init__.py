"""Sextant: a search engine for Geminispace.

The core package holds what every stage shares — URLs, gemtext, the protocol's
header grammar, robots.txt, TLS helpers, the store and configuration — and never
imports a stage. Data flows one way: crawler → store → indexer → search capsule.
"""

__version__ = "0.1.0"
