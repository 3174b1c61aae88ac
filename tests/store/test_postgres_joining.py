"""Joining a team's PostgreSQL memory with `mem migrate`: the database already holds other owners'
rows, and the rows it shares among them (one per embedding model) are not the copy's own."""

from __future__ import annotations

import json

from crossmodalrag.cli.main import main
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.store import open_store
from crossmodalrag.store.postgres import open_postgres_store
from tests.fakes import HashingEmbedder
from tests.postgres import create_role, hand_database_to
from tests.retrieval.helpers import add_docs, note


def test_a_copy_into_a_database_whose_models_others_registered_first_is_identical(
    postgres_url, db_path, tmp_path, monkeypatch, capsys
):
    suffix = tmp_path.name.replace("-", "_")[-12:]
    with open_postgres_store(hand_database_to(postgres_url, f"admin_{suffix}")):
        pass
    alice, bob = (create_role(postgres_url, f"{who}_{suffix}") for who in ("alice", "bob"))
    with open_postgres_store(alice) as store:  # the model's shared row is alice's time; another model too
        add_docs(store, note("plan", "# Plan\nalice's plan"))
        embed_missing(store, HashingEmbedder())
        embed_missing(store, HashingEmbedder(dim=32, name="fake/other"))
    with open_store(db_path) as store:  # bob's own memory, embedded later with the same model
        add_docs(store, note("logo", "# Logo\nthe logo is a heron"))
        embed_missing(store, HashingEmbedder())
    assert main(["migrate", "--to", bob, "--json"]) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] and report["tables"]["embedding_models"]["target_rows"] == 1
