"""A small generic Gemini server over trio and TLS, and the sample Geminispace it serves.

A leaf beside the stages: it builds on the core (:mod:`sextant.urls`, :mod:`sextant.tls`,
:mod:`sextant.protocol`) and nothing imports it but the search capsule, the demo's sample
space and the tests. The core stays what it says it is: shared parsing, models and config.
"""
