"""Derived indexes over the store (rebuildable from `chunks`)."""
