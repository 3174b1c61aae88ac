"""Episodes, concepts and the graph over scripted events; forget cascades; the CLI's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.memory.concepts import cluster, concept_threshold, list_concepts
from crossmodalrag.memory.episodes import EventRow, timeline
from crossmodalrag.memory.graph import pagerank
from crossmodalrag.memory.stats import memory_stats
from crossmodalrag.types import Document
from tests.fakes import HashingEmbedder
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output, semantic_for

TOKENIZER = "We replaced the regex parser with a tokenizer for markdown."


def _doc(uri: str, days: float, kind: str = "note", text: str = TOKENIZER) -> Document:
    return Document(
        uri,
        kind,
        uri.rsplit("/", 1)[-1],
        f"# T\n\n{text}\n",
        "markdown",
        timestamp=1_735_689_600.0 + days * 86400,
        locator=uri.rsplit("/", 1)[-1],
    )


def _memory(store, db_path, docs, statement=TOKENIZER):
    add_docs(store, *docs)
    llm = ScriptedExtractor(events_output(event(statement)))
    return build(store, db_path, llm=llm), llm


def test_episodes_split_by_project_and_gap_and_mix_modalities(store, db_path) -> None:
    docs = [
        _doc("/work/a/n1.md", 0),
        _doc("/work/a/shot.png", 0.5, "image"),
        _doc("/work/a/n2.md", 5),
        _doc("/work/b/n3.md", 0),
    ]
    _memory(store, db_path, docs)
    episodes = timeline(store)
    by_title = sorted((e["project"], len(e["events"])) for e in episodes)
    assert by_title == [("/work/a", 1), ("/work/a", 2), ("/work/b", 1)]  # the 5-day gap cuts /work/a
    first = next(e for e in episodes if len(e["events"]) == 2)
    assert {ev["source_type"] for ev in first["evidence"]} == {"note", "image"}  # one cross-modal episode
    assert all(ev["role"] == "member" for ev in first["evidence"])
    assert timeline(store, project="b")[0]["project"] == "/work/b"
    times = [e["first_time"] for e in episodes]
    assert times == sorted(times) and timeline(store, limit=2) == episodes[-2:]  # the latest two, oldest first


def test_concepts_are_stable_and_a_rebuild_is_a_no_op(store, db_path) -> None:
    docs = [_doc(f"/work/p{i}/n.md", i * 3) for i in range(4)]
    first, llm = _memory(store, db_path, docs)
    assert first.levels["concept"]["concepts"] == 1
    (concept,) = list_concepts(store)
    assert concept["support"] == 4 and concept["projects"] == 4 and concept["centrality"] > 0
    assert concept["title"]  # the deterministic fallback name (the scripted model has no label to give)
    calls = len(llm.calls)
    again = build(store, db_path, llm=llm)
    assert len(llm.calls) == calls  # no extraction, no naming
    assert again.levels["concept"]["changed"] == 0 and again.levels["episode"]["changed"] == 0
    assert list_concepts(store)[0]["id"] == concept["id"] and list_concepts(store)[0]["title"] == concept["title"]
    add_docs(store, _doc("/work/p9/n.md", 30))  # newer events never move older ones
    build(store, db_path, llm=llm)
    assert list_concepts(store)[0]["id"] == concept["id"]


def _topic_events(common: float) -> list[EventRow]:
    """Two events on each of three topics, sharing a direction of weight `common` (squared): its cosine
    between events of different topics, as a model's scale puts unrelated text (e5 ~0.82, MiniLM ~0.15)."""
    axes = np.eye(8)
    rows = []
    for topic in range(3):
        for second in (False, True):
            own = 0.8 * axes[1 + topic] + 0.6 * axes[4 + topic] if second else axes[1 + topic]
            vector = np.sqrt(common) * axes[0] + np.sqrt(1 - common) * own
            rows.append(
                EventRow(f"ev{topic}{second:d}", "", float(len(rows)), "", "fact", "note", vector.astype("float32"))
            )
    return rows


def test_the_concept_threshold_is_on_the_embedding_models_own_scale() -> None:
    e5_like, minilm_like = _topic_events(0.82), _topic_events(0.15)
    assert len(cluster(e5_like, 0.6)) == 1  # a flat 0.6: every event in one concept
    assert len(cluster(e5_like, concept_threshold(None, "multilingual-e5-small"))) == 3
    minilm = concept_threshold(None, "sentence-transformers/all-MiniLM-L6-v2")
    assert minilm == 0.6 and len(cluster(minilm_like, minilm)) == 3  # MiniLM's behaviour unchanged
    assert concept_threshold(None, "someone/unfitted") == 0.6 == concept_threshold(None, None)
    assert concept_threshold(0.7, "multilingual-e5-small") == 0.7  # a threshold set by the user wins


@pytest.mark.parametrize(
    ("model", "setting", "concepts"),
    [("fake/hashing", None, 1), ("multilingual-e5-small", None, 0), ("multilingual-e5-small", 0.6, 1)],
)
def test_build_memory_clusters_on_the_scale_of_the_model_that_embedded_the_events(
    store, db_path, model, setting, concepts
) -> None:
    short = "We replaced the regex parser."  # hashing cosine 0.84 to TOKENIZER: over 0.6, under e5's 0.90
    add_docs(store, _doc("/work/a/n.md", 0), _doc("/work/b/n.md", 3, text=short))
    llm = ScriptedExtractor(events_output(event(short)), events_output(event(TOKENIZER)))
    semantic = semantic_for(store, db_path, HashingEmbedder(name=model))
    settings = {} if setting is None else {"concept_sim_threshold": setting}
    report = build(store, db_path, llm=llm, semantic=semantic, **settings)
    assert report.levels["event"]["events"] == 2 and report.levels["concept"]["concepts"] == concepts


def test_concepts_are_skipped_with_a_reason_without_embeddings(store, db_path) -> None:
    add_docs(store, _doc("/work/a/n.md", 0))
    llm = ScriptedExtractor(events_output(event(TOKENIZER)))

    class NoVectors:  # an index whose model cannot embed statements is the same as none
        embedder = None

    from crossmodalrag.config import Settings
    from crossmodalrag.memory.build import build_memory

    report = build_memory(store, Settings(db_path=db_path, llm_provider="none"), llm=llm, semantic=None)
    assert "reindex-embeddings" in report.levels["concept"]["skipped"]
    assert report.levels["episode"]["episodes"] == 1


def test_episodes_built_before_embeddings_get_their_centroid_once_events_have_vectors(store, db_path) -> None:
    from crossmodalrag.config import Settings
    from crossmodalrag.memory.build import build_memory

    add_docs(store, _doc("/work/a/n.md", 0), _doc("/work/b/n.md", 3))
    llm = ScriptedExtractor(events_output(event(TOKENIZER)))
    build_memory(store, Settings(db_path=db_path, llm_provider="none"), llm=llm, semantic=None)
    missing = "SELECT COUNT(*) FROM memory_nodes WHERE level = ? AND vector IS NULL"
    assert store.conn.execute(missing, ("episode",)).fetchone()[0] == 2
    report = build(store, db_path, llm=llm)  # now with embeddings (`mem reindex-embeddings`)
    assert report.levels["event"]["embedded"] == 2 and report.levels["episode"]["changed"] == 2
    assert store.conn.execute(missing, ("episode",)).fetchone()[0] == 0
    assert build(store, db_path, llm=llm).levels["episode"]["changed"] == 0  # and a rebuild still writes nothing


def test_no_concepts_says_why_when_events_and_embeddings_are_there(store, db_path, capsys) -> None:
    """One event with a vector forms no concept (a concept needs two related events): the hint must not
    send the user to install embeddings they have."""
    report, _ = _memory(store, db_path, [_doc("/work/a/n.md", 0)])
    assert report.levels["concept"]["concepts"] == 0
    skipped = report.levels["drift"]["skipped"]
    assert "close enough in meaning" in skipped and "embedding" not in skipped
    assert main(["concepts", "--db-path", str(db_path)]) == 0
    said = capsys.readouterr().err
    assert "no concepts: no 2 events are close enough in meaning" in said and "embedding" not in said


def test_pagerank_ranks_the_hub_first_and_sums_to_one() -> None:
    scores = pagerank(5, np.array([0, 0, 0, 0]), np.array([1, 2, 3, 4]), np.ones(4))
    assert abs(scores.sum() - 1.0) < 1e-6
    assert scores.argmax() == 0 and np.allclose(scores[1:], scores[1])


def test_forget_removes_derived_nodes_and_nothing_cites_the_chunks(store, db_path) -> None:
    docs = [_doc(f"/work/p{i}/n.md", i * 3) for i in range(3)]
    _memory(store, db_path, docs)
    before = memory_stats(store)["nodes"]
    from crossmodalrag.memory.usage import record

    nodes = [row[0] for row in store.conn.execute("SELECT id FROM memory_nodes WHERE source_uri = '/work/p0/n.md'")]
    record(store, nodes, "retrieved")
    report = forget_sources(store, find_sources(store, "/work/p0/n.md"))
    assert report.memory_nodes >= 2  # its event, its episode, and the concept built on it
    assert store.conn.execute("SELECT COUNT(*) FROM memory_usage").fetchone()[0] == 0  # nor their usage
    after = memory_stats(store)
    assert after["nodes"]["event"] == before["event"] - 1 and after["nodes"]["concept"] == 0
    gone = store.conn.execute(
        "SELECT COUNT(*) FROM memory_evidence e LEFT JOIN chunks c ON c.id = e.chunk_id WHERE c.id IS NULL"
    ).fetchone()[0]
    assert gone == 0


def test_a_source_deleted_by_sync_is_reported_by_the_next_build(store, db_path) -> None:
    from crossmodalrag.ingest import remove_sources

    _memory(store, db_path, [_doc("/work/a/n.md", 0), _doc("/work/b/n.md", 1)])
    remove_sources(store, ["/work/a/n.md"])
    assert memory_stats(store)["integrity"]["events_with_source_gone"] == 1
    report = build(store, db_path, llm=ScriptedExtractor(events_output(event(TOKENIZER))))
    (gone,) = report.levels["event"]["removed_orphans"]
    assert gone["source_uri"] == "/work/a/n.md"
    assert memory_stats(store)["integrity"]["events_with_source_gone"] == 0


def test_sync_says_how_many_events_lost_their_source(db_path, tmp_path, monkeypatch, capsys) -> None:
    from crossmodalrag.cli.main import main
    from crossmodalrag.store import open_store
    from tests.conftest import write_note

    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser\nWe replaced the regex parser with a tokenizer.\n")
    write_note(vault, "cache.md", "# Cache\nThe LRU cache served stale HTML.\n")
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(vault))
    assert main(["sync", "--db-path", str(db_path)]) == 0
    with open_store(db_path) as opened:
        build(opened, db_path, llm=ScriptedExtractor(events_output(event(TOKENIZER))), levels=("event",))
    (vault / "parser.md").unlink()
    capsys.readouterr()
    assert main(["sync", "--db-path", str(db_path)]) == 0
    assert "note: 1 memory event lost its source; `mem build-memory` lists and removes them" in capsys.readouterr().err


def test_cli_json_contracts(store, db_path, capsys) -> None:
    docs = [_doc(f"/work/p{i}/n.md", i * 3) for i in range(3)]
    _memory(store, db_path, docs)
    for argv, key in (
        (["memory-stats", "--json"], "nodes"),
        (["events", "--json"], "events"),
        (["timeline", "--json"], "episodes"),
        (["concepts", "--json"], "concepts"),
        (["distill", "--json"], "nodes"),
        (["drift", "--json"], "concepts"),
    ):
        assert main([*argv, "--db-path", str(db_path)]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert key in payload
    assert main(["events", "--db-path", str(db_path)]) == 0
    assert TOKENIZER in capsys.readouterr().out


def test_build_memory_cli_exits_1_when_nothing_can_run(db_path, capsys) -> None:
    from crossmodalrag.store import open_store

    open_store(db_path).close()
    assert main(["build-memory", "--db-path", str(db_path), "--level", "concept"]) == 1
    err = capsys.readouterr().err
    assert "skipped: no events yet" in err
    assert err.splitlines()[-1].startswith("error: nothing was built")  # a failure says so, as failures do


def test_forget_says_which_remaining_events_lost_their_episode(store, db_path, capsys) -> None:
    """Two notes of one folder a day apart share an episode: forgetting one takes the episode, and the
    other's event is in no episode until the next build, so forget says to run it."""
    _memory(store, db_path, [_doc("/work/p/a.md", 0), _doc("/work/p/b.md", 0.5)])
    assert store.conn.execute("SELECT COUNT(*) FROM memory_nodes WHERE level = 'episode'").fetchone()[0] == 1
    store.close()
    assert main(["forget", "/work/p/a.md", "--yes", "--db-path", str(db_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stranded_events"] == 1
    assert "note: 1 remaining memory event shared an episode or concept" in captured.err
    assert "run `mem build-memory` to re-derive it (until then it is in no timeline)" in captured.err


def test_a_note_deleted_from_the_vault_leaves_no_event_to_match_and_ingest_says_so(db_path, tmp_path, capsys) -> None:
    from crossmodalrag.store import open_store
    from tests.conftest import write_note

    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser\nWe replaced the regex parser with a tokenizer.\n")
    write_note(vault, "cache.md", "# Cache\nThe LRU cache served stale HTML.\n")
    assert main(["ingest-notes", str(vault), "--db-path", str(db_path)]) == 0
    with open_store(db_path) as opened:
        build(opened, db_path, llm=ScriptedExtractor(events_output(event(TOKENIZER))), levels=("event",))
    (vault / "parser.md").unlink()
    capsys.readouterr()
    assert main(["ingest-notes", str(vault), "--db-path", str(db_path)]) == 0
    assert "note: 1 memory event lost its source; `mem build-memory` lists and removes them" in capsys.readouterr().err
    argv = ["ask", "regex parser tokenizer", "--level", "event", "--no-llm", "--json", "--db-path", str(db_path)]
    main(argv)
    payload = json.loads(capsys.readouterr().out)
    assert all("parser.md" not in (node["title"] + json.dumps(node["evidence"])) for node in payload["matched_nodes"])
    assert not any(node["evidence"] == [] for node in payload["matched_nodes"])


def test_an_answer_at_a_level_says_how_many_sources_have_no_events_yet(db_path, tmp_path, capsys) -> None:
    from crossmodalrag.store import open_store
    from tests.conftest import write_note

    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser\nWe replaced the regex parser with a tokenizer.\n")
    assert main(["ingest-notes", str(vault), "--db-path", str(db_path)]) == 0
    with open_store(db_path) as opened:
        build(opened, db_path, llm=ScriptedExtractor(events_output(event(TOKENIZER))), levels=("event",))
    write_note(vault, "cache.md", "# Cache\nThe LRU cache served stale HTML.\n")  # not extracted: no model since
    assert main(["ingest-notes", str(vault), "--db-path", str(db_path)]) == 0
    capsys.readouterr()
    main(["ask", "regex parser tokenizer", "--level", "event", "--no-llm", "--json", "--db-path", str(db_path)])
    notices = json.loads(capsys.readouterr().out)["notices"]
    assert "1 of 2 sources have no events yet, so --level event cannot see them" in " ".join(notices)
    assert "with a language model but for git commits: `mem doctor` says if one is set up" in " ".join(notices)
    write_note(vault, "parser.md", "# Parser\nWe kept the regex parser after all.\n")  # edited: no model since
    assert main(["ingest-notes", str(vault), "--db-path", str(db_path)]) == 0
    with open_store(db_path) as opened:
        build(opened, db_path, levels=("event",))
    capsys.readouterr()
    main(["ask", "regex parser tokenizer", "--level", "event", "--no-llm", "--json", "--db-path", str(db_path)])
    notices = " ".join(json.loads(capsys.readouterr().out)["notices"])
    assert "1 of 2 sources have no events yet" in notices  # the edited one has its event: waiting, not missing
    assert "1 event of sources edited since they were drawn waits for a model to read them again" in notices


class Unreachable(ScriptedExtractor):
    def stream(self, messages, generation):
        from crossmodalrag.answer.llm.base import LLMUnavailable

        self.calls.append(messages)
        raise LLMUnavailable("cannot connect to http://127.0.0.1:9/v1: Connection refused", "start it")


def test_an_unreachable_model_server_leaves_sources_waiting_and_the_other_levels_build(store, db_path) -> None:
    from crossmodalrag.config import Settings
    from crossmodalrag.errors import CMRAGError
    from crossmodalrag.memory.build import build_memory

    add_docs(store, _doc("/work/p/a.md", 0), _doc("/work/p/b.md", 1), _doc("/work/repo/c1", 2, kind="commit"))
    model = Unreachable("{}")
    report = build(store, db_path, llm=model)
    assert report.ran and len(model.calls) == 1  # the server is not asked again for every source
    assert report.levels["event"]["from_git"] == 1 and report.levels["event"]["waiting"] == 2
    assert report.levels["episode"]["episodes"] == 1
    assert any("2 sources wait" in n and "the model server is unreachable" in n for n in report.notices)
    with pytest.raises(CMRAGError, match="the model named cannot be used"):  # asked for by name: an error
        build_memory(store, Settings(db_path=db_path, llm_provider="none"), llm=Unreachable("{}"), model="named")


def test_memory_stats_counts_add_up_to_the_sources(store, db_path, capsys) -> None:
    """A failed source is not also counted as not extracted: the three counts partition the sources."""
    add_docs(store, _doc("/work/p/a.md", 0), _doc("/work/repo/c1", 1, kind="commit"))
    build(store, db_path, llm=ScriptedExtractor("not JSON"), levels=("event",))
    add_docs(store, _doc("/work/p/new.md", 2))
    sources = memory_stats(store)["sources"]
    assert (sources["total"], sources["extracted"], sources["not_extracted"], len(sources["failed"])) == (3, 1, 1, 1)
    assert sources["pending"] == 2  # the old key keeps its old meaning
    store.close()
    assert main(["memory-stats", "--db-path", str(db_path)]) == 0
    assert "sources: 3: 1 extracted, 1 not extracted yet, 1 failed" in capsys.readouterr().out


def test_the_sources_waiting_for_a_model_are_named_by_the_build_and_memory_stats(store, db_path, capsys) -> None:
    """`mem ask --level` says `mem memory-stats` tells why sources have no events: it names them."""
    add_docs(store, *[_doc(f"/work/p/n{i}.md", i) for i in range(7)], _doc("/work/repo/c1", 9, kind="commit"))
    report = build(store, db_path, levels=("event",)).levels["event"]
    assert report["waiting"] == 7 and [w["uri"] for w in report["waiting_sources"]][:2] == [
        "/work/p/n6.md",
        "/work/p/n5.md",
    ]
    waiting = memory_stats(store)["sources"]["not_extracted_sources"]
    # Newest first, as the build names them; not the commit: it has its event.
    assert [w["uri"] for w in waiting] == [w["uri"] for w in report["waiting_sources"]]
    assert [w["uri"] for w in waiting] == [f"/work/p/n{i}.md" for i in reversed(range(7))]
    assert waiting[0]["reason"].endswith("with a language model but for git commits") and waiting[0]["source_id"]
    store.close()
    assert main(["memory-stats", "--db-path", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "  not extracted: /work/p/n6.md (source " in out and "/work/p/n1.md" not in out
    assert "  not extracted: and 2 more (`mem memory-stats --json` lists them all)" in out
    assert main(["build-memory", "--level", "event", "--db-path", str(db_path)]) == 0
    err = capsys.readouterr().err
    assert "waiting: /work/p/n6.md (source " in err and "waiting: and 2 more" in err


def test_a_conversations_episodes_are_labelled_and_found_by_its_title(store, db_path) -> None:
    from pathlib import Path

    from crossmodalrag.connectors.chats import Session, Turn, session_document

    turns = [Turn("Maria", "Meet Coco, I adopted her last week!", "D1:1"), Turn("John", "So cute!", "D1:2")]
    add_docs(store, session_document(Path("/chats/c.json"), Session("s1", "Maria & John", "locomo", turns)))
    title = store.conn.execute("SELECT title FROM sources").fetchone()[0]
    llm = ScriptedExtractor({"Maria": [event("Maria adopted a puppy named Coco.", [1], "change")], "John": []})
    build(store, db_path, llm=llm, levels=("event", "episode"), event_support_min_cosine=0.0)  # hashing embedder
    (episode,) = timeline(store)
    assert episode["title"].startswith(f"{title}: ") and episode["project"] != title  # grouped by session id
    assert [e["id"] for e in timeline(store, project=title)] == [episode["id"]]


def test_a_timeline_episode_lists_its_first_events_and_best_chunks_and_counts_them_all(
    store, db_path, monkeypatch
) -> None:
    from crossmodalrag.memory import episodes

    _memory(store, db_path, [_doc(f"/work/a/n{i}.md", i * 0.25) for i in range(3)])
    (whole,) = timeline(store)
    monkeypatch.setattr(episodes, "EVENTS_SHOWN", 2)
    monkeypatch.setattr(episodes, "EVIDENCE_SHOWN", 1)
    (episode,) = timeline(store)
    assert episode["events"] == whole["events"][:2] and episode["events_total"] == len(whole["events"]) == 3
    assert episode["evidence"] == whole["evidence"][:1] and episode["evidence_total"] == len(whole["evidence"]) == 3


def test_the_timeline_tool_keeps_the_episodes_its_window_overlaps_up_to_its_limit(store, db_path) -> None:
    from crossmodalrag.agent.tools import timeline_view

    # day 0 is 2025-01-01: /work/a spans its first half-day, /work/b is on 2025-01-11, /work/c on 2025-01-21
    docs = [_doc("/work/a/n1.md", 0), _doc("/work/a/n2.md", 0.5), _doc("/work/b/n.md", 10), _doc("/work/c/n.md", 20)]
    _memory(store, db_path, docs)

    def projects(**window) -> list[str]:
        return [e["project"] for e in timeline_view(store, **window)["episodes"]]

    assert projects() == ["/work/a", "/work/b", "/work/c"] and projects(limit=1) == ["/work/c"]
    assert projects(after="2025-01-01T06:00", before="2025-01-05") == ["/work/a"]  # begun before the window
    assert projects(after="2025-01-15") == ["/work/c"] and projects(before="2025-01-12") == ["/work/a", "/work/b"]
    assert projects(after="2030-01-01") == []


def test_the_timeline_cuts_a_long_summary_at_a_word_and_marks_it(store, db_path, capsys) -> None:
    long = "We moved raw readings to Parquet because the Postgres table hit 400 million rows. " * 3
    _memory(store, db_path, [_doc("/work/a/n.md", 0, text=long)], statement=long[:170].strip() + ".")
    assert main(["timeline", "--db-path", str(db_path)]) == 0
    summary = capsys.readouterr().out.splitlines()[1].strip()
    assert summary.endswith(" …") and len(summary) <= 162 and summary[:-2].split()[-1] in long.split()
