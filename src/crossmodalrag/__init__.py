"""crossmodalrag: a local-first, cross-modal personal memory (`mem`)."""

__version__ = "0.1.0"
