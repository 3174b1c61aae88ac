"""/ask/kept/{id}: a streamed answer again (what the console shows on Back), only while its evidence is stored."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import redirect_stdout

from fastapi.testclient import TestClient

from crossmodalrag.api.app import create_app
from crossmodalrag.api.kept import KeptAnswers
from crossmodalrag.cli.main import main
from tests.api.helpers import BASE, server_settings

QUESTION = "Why did I change the parser?"


def streamed_answer(client: TestClient) -> dict:
    lines = client.get("/ask/stream", params={"q": QUESTION, "no_llm": "true"}).text.splitlines()
    return json.loads(lines[-1])


def test_a_kept_answer_is_served_until_its_evidence_is_forgotten(sample_db, tmp_path) -> None:
    db = tmp_path / "memory.db"
    with sqlite3.connect(sample_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    with TestClient(create_app(server_settings(db)), base_url=BASE) as client:
        final = streamed_answer(client)
        kept = final.pop("kept")
        final.pop("type")
        assert client.get(f"/ask/kept/{kept}").json() == final
        with redirect_stdout(io.StringIO()):
            assert main(["forget", str(final["evidence"][0]["source_id"]), "--yes", "--db-path", str(db)]) == 0
        gone = client.get(f"/ask/kept/{kept}")
        assert gone.status_code == 404
        assert gone.json() == {"error": "that answer is no longer kept", "hint": "ask the question again"}


def test_an_unknown_id_is_a_404_and_the_oldest_answers_make_room(client) -> None:
    assert client.get("/ask/kept/nonsense").status_code == 404
    kept = KeptAnswers(most=2)
    ids = [kept.keep({"evidence": []}) for _ in range(3)]
    assert [kept.get(None, kept_id) is not None for kept_id in ids] == [False, True, True]
