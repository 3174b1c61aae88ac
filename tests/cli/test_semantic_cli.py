"""The whole semantic path through `mem`, with the real offline model, on the bundled sample."""

from __future__ import annotations

import json

import pytest

from crossmodalrag.cli.main import main

pytestmark = pytest.mark.integration
pytest.importorskip("fastembed")


def run_json(capsys, *argv: str):
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory):
    """One seeded, embedded sample shared by the tests below (embedding is the slow part)."""
    db = tmp_path_factory.mktemp("semantic") / "memory.db"
    assert main(["models", "install", "--offline", "--db-path", str(db)]) == 0
    assert main(["seed-sample", "--db-path", str(db)]) == 0
    return db


def test_seed_sample_embeds_everything(capsys, sample_db):
    code, report, _ = run_json(capsys, "reindex-embeddings", "--db-path", str(sample_db))
    assert code == 0 and report["newly_embedded"] == 0 and report["missing"] == 0
    assert report["embedded"] == report["chunks"]
    assert report["model"] == "sentence-transformers/all-MiniLM-L6-v2" and report["chunks"] > 50
    assert main(["reindex-embeddings", "--db-path", str(sample_db)]) == 0  # nothing to do says so
    assert "embedding: nothing to do:" in capsys.readouterr().err


def test_hybrid_answers_a_paraphrase_and_explains_every_component(capsys, sample_db):
    code, answer, _ = run_json(
        capsys,
        "ask",
        "how did we stop the renderer from serving outdated pages",
        "--no-llm",
        "--db-path",
        str(sample_db),
    )
    assert code == 0 and answer["retrieval"] == "hybrid" and not answer["abstained"]
    assert any("cache" in e["title"].lower() for e in answer["evidence"][:2])
    assert {"vector", "lexical", "recency", "usage", "title", "cosine"} <= set(answer["evidence"][0]["components"])


@pytest.mark.parametrize(
    "question", ["What is the capital of France?", "What were the quarterly revenue figures for the Tokyo office?"]
)
def test_off_topic_questions_still_abstain_with_vectors(capsys, sample_db, question):
    code, answer, _ = run_json(capsys, "ask", question, "--no-llm", "--db-path", str(sample_db))
    assert code == 0 and answer["abstained"] and answer["abstention_reason"] == "weak_retrieval"


@pytest.mark.parametrize("profile", ["balanced", "relevant", "recent", "usage"])
def test_every_profile_keeps_the_sample_answerable(capsys, sample_db, profile):
    code, report, _ = run_json(
        capsys, "eval", "--query-prefix", "[sample]", "--profile", profile, "--db-path", str(sample_db)
    )
    overall = report["overall"]
    assert code == 0 and report["retrieval"] == "hybrid"
    assert overall["hit_rate"] == 1.0 and overall["false_abstain_rate"] == 0.0 and overall["false_answer_rate"] == 0.0


def test_comparative_question_reports_its_sides(capsys, sample_db):
    code, answer, _ = run_json(
        capsys,
        "ask",
        "compare the LRU render cache with content-hash memoization",
        "--no-llm",
        "--db-path",
        str(sample_db),
    )
    assert code == 0 and answer["comparison"]["sides"] == ["LRU render cache", "content-hash memoization"]
    assert {e["sub_query"] for e in answer["evidence"]} & {"LRU render cache", "content-hash memoization"}


def test_models_list_shows_the_active_model(capsys, sample_db):
    code, listing, _ = run_json(capsys, "models", "list", "--db-path", str(sample_db))
    assert code == 0 and listing["active"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert listing["installed"] and listing["extra_installed"]
