"""Ranking evidence: candidate generation, scoring, diversity and the abstention gate."""
