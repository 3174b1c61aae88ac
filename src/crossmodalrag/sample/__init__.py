"""The bundled sample: a small vault, a git history and eval queries, shipped as package data."""
