"""The built-in rules, one module per family (metrics, text, rewards, time)."""
