"""Built-in backends, each registered through trackmux's own entry points."""
