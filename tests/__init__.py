"""Test suite: a package, so helpers import as ``tests.<module>`` everywhere, subprocesses too."""
