"""``python -m trackmux`` is the ``trackmux`` command."""

from trackmux.cli.main import main

main()
