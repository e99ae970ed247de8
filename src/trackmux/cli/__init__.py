"""The trackmux command line: one module per command."""
