"""Backends: the plugin contract a backend implements (contract) and how plugins are found,
isolated and chosen by name (registry, over pluggy and ``trackmux.hookspecs``), and the
one-name-per-key rule for backends whose stores rename keys (keynames). Names no backend
library; the built-in ones live in ``trackmux.plugins``.
"""
