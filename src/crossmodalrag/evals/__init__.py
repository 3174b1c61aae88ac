"""Measuring retrieval: metrics, the eval query set, and runs over it."""
