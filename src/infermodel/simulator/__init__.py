"""Serving simulator (placeholder docstring, replaced below)."""
