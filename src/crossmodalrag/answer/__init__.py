"""Turning retrieved evidence into an answer (deterministic now; an LLM later)."""
