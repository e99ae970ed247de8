"""Integrations with training frameworks."""
