"""`mem eval-generation`'s summary over per-query rows."""

from __future__ import annotations

from crossmodalrag.evals.generation import GenerationReport


def row(timing: dict, abstained: bool = False) -> dict:
    return {
        "expected_source_uris": ["a.md"],
        "mode": "llm",
        "fallback": False,
        "invalid_citations": [],
        "cited_expected": [] if abstained else ["a.md"],
        "abstention_correct": not abstained,
        "abstained": abstained,
        "warning_kinds": [],
        "timing": timing,
    }


def test_a_gate_abstention_has_no_first_token_and_is_left_out_of_its_median() -> None:
    """The gate refuses before any token is generated: its row has no first-token time, and the
    summary must not fail on it (it raised KeyError and `mem eval-generation` ended with an error)."""
    answered = row({"first_token_seconds": 2.0, "total_seconds": 5.0})
    refused = row({"retrieval_seconds": 0.1, "gate_seconds": 1.0, "total_seconds": 1.2}, abstained=True)
    overall = GenerationReport({"provider": "fake"}, 5, [answered, refused]).overall()
    assert overall["first_token_p50_seconds"] == 2.0
    assert overall["latency_p50_seconds"] == 3.1 and overall["generated"] == 2
