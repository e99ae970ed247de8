"""Backends: the plugin contract a backend implements (contract) and how plugins are found,
isolated and chosen by name (registry, over pluggy and ``trackmux.hookspecs``). Names no
backend library; the built-in ones live in ``trackmux.plugins``.
"""
