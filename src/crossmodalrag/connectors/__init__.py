"""Connectors parse a path into Documents and nothing else: no store, no index, no settings."""
