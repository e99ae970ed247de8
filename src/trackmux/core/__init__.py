"""Core of trackmux: events, normalisation, spool, delivery, run lifecycle, plugin registry.

Imports no backend library, ever.
"""
