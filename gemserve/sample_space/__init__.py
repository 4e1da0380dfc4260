"""A small Geminispace that ships with Sextant, so the whole product can be seen offline.

Nine capsules, each on its own loopback address and port 1965, with the variety
a crawler and a search engine meet in the real Geminispace: a gemlog with a
gemsub and an Atom feed, robots.txt rules for ``indexer`` (one of them served as
text/gemini, one in a pubnix user directory), permanent, relative and
cross-capsule redirects, an input endpoint answering ``10``, pages in English,
German, French and Spanish, a Latin-1 page with no declared charset, binary
files, links out to https/gopher/mailto, and a directory capsule linking all
the others so link analysis has something to rank.
"""
