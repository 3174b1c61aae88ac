"""`mem seed-sample`: deterministic, ingested, and its eval queries behave as promised."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.store import open_store

pytestmark = pytest.mark.integration
NEGATIVE = "[sample] What were the quarterly revenue figures for the Tokyo office?"


def seed(capsys, *extra: str) -> dict:
    assert main(["seed-sample", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def commit_uris(db_path: Path) -> list[str]:
    with open_store(db_path) as store:
        return sorted(r[0] for r in store.conn.execute("SELECT uri FROM sources WHERE source_type = 'commit'"))


def test_seed_then_eval_answers_every_positive_and_abstains_on_the_negative(capsys, db_path):
    report = seed(capsys)
    assert report["workspace"] == str(db_path.parent / "sample")
    assert report["notes"]["added"] >= 8 and report["git"]["added"] >= 8 and report["queries"] >= 8
    assert report["embedded"] >= 0  # the chunks given vectors: 0 here, where no embedding model is installed
    assert main(["eval", "--query-prefix", "[sample]", "--json"]) == 0
    evaluation = json.loads(capsys.readouterr().out)
    by_text = {q["query_text"]: q for q in evaluation["per_query"]}
    assert by_text[NEGATIVE]["abstained"] is True
    positives = [q for q in evaluation["per_query"] if q["expected_source_uris"]]
    assert positives and all(not q["abstained"] for q in positives)
    assert evaluation["overall"]["hit_rate"] == 1.0


def test_the_readme_question_cites_the_parser_rewrite(capsys):
    seed(capsys)
    assert main(["ask", "Why did I change the parser?", "--no-llm", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert not answer["abstained"]
    top_two = {e["source_type"] for e in answer["evidence"][:3]}
    assert top_two == {"note", "commit"}
    assert any("tokenizer" in e["title"].lower() for e in answer["evidence"][:2])


def test_seeding_is_deterministic_and_idempotent(capsys, tmp_path, db_path):
    seed(capsys)
    first = commit_uris(db_path)
    again = seed(capsys)
    assert again["notes"]["unchanged"] == again["notes"]["added"] + again["notes"]["unchanged"]
    assert again["git"]["added"] == 0 and commit_uris(db_path) == first
    other_db = tmp_path / "other" / "m.db"
    seed(capsys, "--db-path", str(other_db), "--workspace-dir", str(tmp_path / "elsewhere"))
    assert [u.rsplit("@", 1)[1] for u in commit_uris(other_db)] == [u.rsplit("@", 1)[1] for u in first]


def test_a_foreign_non_empty_workspace_needs_force(capsys, tmp_path):
    workspace = tmp_path / "mine"
    workspace.mkdir()
    (workspace / "precious.txt").write_text("keep me")
    assert main(["seed-sample", "--workspace-dir", str(workspace)]) == 1
    assert "pass --force" in capsys.readouterr().err
    assert (workspace / "precious.txt").exists()
    assert main(["seed-sample", "--workspace-dir", str(workspace), "--force"]) == 0


def test_the_wheel_ships_the_sample_as_package_data(tmp_path):
    """seed-sample must work from a regular install, so the fixtures must be inside the wheel."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(root)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("crossmodalrag-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    vault = [n for n in names if n.startswith("crossmodalrag/sample/vault/") and n.endswith(".md")]
    shipped = {p.relative_to(root / "src").as_posix() for p in (root / "src/crossmodalrag/sample/vault").rglob("*.md")}
    assert set(vault) == shipped and len(vault) >= 8
    assert "crossmodalrag/sample/repo.json" in names and "crossmodalrag/sample/queries.json" in names


def test_cross_modal_sample_answers_text_and_misses_what_is_only_drawn(capsys, db_path):
    pytest.importorskip("pypdfium2")
    pytest.importorskip("rapidocr")
    report = seed(capsys)
    assert [f["added"] for f in report["files"]] == [1, 2]  # the PDF, then the two images
    assert main(["eval", "--query-prefix", "[sample-xmodal-text]", "--json"]) == 0
    text = json.loads(capsys.readouterr().out)["overall"]
    assert text["answerable"] == 2 and text["recall"] == 1.0
    root = Path(__file__).resolve().parents[1]
    gate = subprocess.run(
        [sys.executable, str(root / "scripts" / "xmodal_gate.py"), "--db-path", str(db_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    verdict = json.loads(gate.stdout)
    assert verdict["text_slice_recall"] == 1.0 and verdict["visual_slice_recall"] == 0.0
    assert verdict["native_image_embeddings_justified"] is True


def test_the_sample_images_are_dated_on_its_timeline_not_the_day_it_was_seeded(capsys, db_path):
    pytest.importorskip("PIL")
    seed(capsys)
    with open_store(db_path) as store:
        years = [row[0] for row in store.conn.execute("SELECT strftime('%Y', timestamp, 'unixepoch') FROM sources")]
    assert years and max(years) <= "2025"  # every source of the sample, its images too
