"""Agent-written memories: duplicates, merges, links, knowledge updates, history, validation."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import numpy as np
import pytest

from crossmodalrag.agent.browse import change_notices, list_memories, memory_texts
from crossmodalrag.agent.edits import update_memory
from crossmodalrag.agent.memories import InvalidMemory, remember
from crossmodalrag.cli.main import main
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import open_store
from tests.fakes import HashingEmbedder


@pytest.fixture
def embedder():
    return HashingEmbedder(dim=256)


def test_a_memory_is_a_source_with_its_attributes(store, embedder):
    result = remember(
        store, "Deploys need the VPN <private>pin 4242</private>", ["Ops"], 0.8, "fact", "s1", "claude", embedder
    )
    assert result.status == "stored" and result.to_dict()["uri"] == f"mem://source/{result.id}"
    (record,) = list_memories(store)
    assert record["text"] == "Deploys need the VPN" and record["tags"] == ["ops"]
    assert (record["kind"], record["importance"], record["session_id"], record["agent_id"]) == (
        "fact",
        0.8,
        "s1",
        "claude",
    )
    assert "4242" not in str([tuple(r) for r in store.conn.execute("SELECT * FROM chunks")])
    assert store.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0] == 1  # embedded at once


def test_an_exact_duplicate_returns_the_stored_memory(store, embedder):
    first = remember(store, "The cache lives on port 6379", ["a"], 0.2, embedder=embedder)
    again = remember(store, "  the cache lives on PORT 6379 ", ["b"], 0.9, embedder=embedder)
    assert (again.id, again.status) == (first.id, "duplicate")
    (record,) = list_memories(store)
    assert record["tags"] == ["a", "b"] and record["importance"] == 0.9 and len(record["stored_times"]) == 2


def test_a_near_duplicate_is_merged_and_says_so(store, embedder):
    first = remember(store, "The build runs on Python 3.11, always.", ["ci"], 0.3, embedder=embedder)
    merged = remember(store, "Always: the build runs on Python 3.11!", ["python"], 0.6, embedder=embedder)
    assert merged.status == "merged" and merged.id == first.id and merged.similarity >= 0.95
    (record,) = list_memories(store)
    assert record["tags"] == ["ci", "python"] and record["importance"] == 0.6 and len(record["stored_times"]) == 2


def test_a_near_duplicate_with_another_number_date_or_time_is_kept(store):
    # The differing words read as one vector, as MiniLM nearly reads them (cosine 0.97-0.99).
    embedder = HashingEmbedder(dim=256, synonyms={"10": "14", "09": "08", "tuesday": "monday", "4522": "4521"})
    texts = [
        "Meeting room booked for 14:00 on 2026-12-08",
        "Meeting room booked for 10:00 on 2026-12-09",
        "I went to the gym on Monday",
        "I went to the gym on Tuesday",
        "Ticket 4521 is assigned to Ada",
        "Ticket 4522 is assigned to Ada",
    ]
    results = [remember(store, text, embedder=embedder) for text in texts]
    assert [(r.status, r.supersedes) for r in results] == [("stored", [])] * len(texts)
    assert sorted(m["text"] for m in list_memories(store)) == sorted(texts)
    # without an embedding model (word overlap), a sign is a value too
    assert remember(store, "The offset is -5").status == remember(store, "The offset is 5").status == "stored"


def test_a_near_duplicate_saying_another_thing_is_kept(store):
    # A bag of words reads swapped words as one vector (cosine 1.0), as MiniLM nearly does (0.98-0.99).
    embedder = HashingEmbedder(dim=256, synonyms={"beta": "alpha", "after": "before"})
    pairs = [
        ("I prefer tabs over spaces", "I prefer spaces over tabs"),
        ("We chose PostgreSQL over MySQL for billing", "We chose MySQL over PostgreSQL for billing"),
        ("Ana is the owner and Ben is the reviewer", "Ben is the owner and Ana is the reviewer"),
        ("alpha private fact about the ibis queue", "beta private fact about the ibis queue"),
        ("Deploy the hotfix before the freeze", "Deploy the hotfix after the freeze"),
    ]
    for old, new in pairs:
        remember(store, old, embedder=embedder)
        assert remember(store, new, embedder=embedder).status == "stored", new
    assert len(list_memories(store, limit=50, history=True)) == 2 * len(pairs)  # a reversal may supersede
    # without an embedding model (word overlap: Jaccard 1.0) too
    remember(store, "Redis is faster than Memcached")
    assert remember(store, "Memcached is faster than Redis").status == "stored"


def test_agents_storing_the_same_memory_at_once_store_it_once(any_store, db_path, request, embedder):
    """Each agent has its own connection (its own `mem mcp`); they store the same texts at the same moment."""
    import threading

    from crossmodalrag.store import open_store

    url = request.getfixturevalue("postgres_url") if any_store.backend == "postgresql" else None

    def connect():
        if url is None:
            return open_store(db_path)
        from crossmodalrag.store.postgres import open_postgres_store

        return open_postgres_store(url)

    agents, rounds = 4, 5
    start = threading.Barrier(agents)
    failures = []

    def agent():
        try:
            with connect() as store:
                for i in range(rounds):
                    start.wait()
                    remember(store, f"The shared fact: cache TTL is {i} hundred seconds", embedder=embedder)
        except Exception as error:  # reported below: a thread's exception does not fail the test
            failures.append(error)

    threads = [threading.Thread(target=agent) for _ in range(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    texts = [m["text"] for m in list_memories(any_store, history=True)]
    assert sorted(texts) == sorted(set(texts)) and len(texts) == rounds


def test_the_same_words_in_another_context_are_another_memory(store, embedder):
    deploy = remember(store, "Yes, ship it", embedder=embedder, context="Deploy on Friday?")
    cache = remember(store, "Yes, ship it", embedder=embedder, context="Drop the old cache?")
    assert cache.status == "stored" and cache.id != deploy.id
    again = remember(store, "yes, ship it", embedder=embedder, context="deploy on  friday?")
    assert (again.id, again.status) == (deploy.id, "duplicate")
    assert {m["context"] for m in list_memories(store)} == {"Deploy on Friday?", "Drop the old cache?"}


def test_new_memories_link_to_their_closest_ones(store, embedder):
    a = remember(store, "the release checklist needs the changelog the tag and the signed wheel", embedder=embedder)
    remember(store, "lunch on friday is pizza", embedder=embedder)
    b = remember(
        store,
        "the release checklist needs the changelog and the signed wheel plus docs and screenshots",
        embedder=embedder,
    )
    assert [link["id"] for link in b.links] == [a.id] and b.links[0]["similarity"] >= 0.75


def test_a_restated_fact_supersedes_the_older_memory(store, embedder):
    old = remember(store, "Deploys need the VPN; the staging key rotates monthly", embedder=embedder)
    new = remember(store, "The staging key rotates weekly", embedder=embedder)
    assert new.supersedes == [old.id]
    assert [m["id"] for m in list_memories(store)] == [new.id]
    assert {m["id"] for m in list_memories(store, history=True)} == {old.id, new.id}
    assert "replaced an older one" in change_notices(store, [old.id])[0]
    result = search(store, "staging key rotates", SearchOptions(top_k=2))
    assert [h.source_id for h in result.hits] == [new.id, old.id]
    assert result.hits[1].components["superseded"] == 1.0


@pytest.mark.parametrize("strategy", ["direct", "episodic", "fusion"])
def test_a_replaced_memory_closer_in_meaning_still_ranks_below_its_successor(store, db_path, embedder, strategy):
    # The old text holds the question's "do": closer in meaning, and min-max over a pool of two gave the
    # new memory vector 0.0 to its 1.0, more than the superseded factor took back; the fused strategies
    # rank by places, where the factor counted for nothing.
    from crossmodalrag.agent.recall import with_recall
    from crossmodalrag.answer.evidence import Retriever
    from crossmodalrag.config import Settings
    from crossmodalrag.retrieval.semantic import SemanticIndex

    old = remember(store, "We do not use Redis for session storage", kind="decision", embedder=embedder)
    new = remember(store, "We use Redis for session storage", kind="decision", embedder=embedder)
    assert new.supersedes == [old.id]
    semantic = SemanticIndex(store, embedder, Settings(db_path=db_path))
    retriever = with_recall(Retriever(store, SearchOptions(top_k=2), semantic), strategy, None, None)
    hits = retriever.search("Do we use Redis for session storage?").hits
    assert [h.source_id for h in hits] == [new.id, old.id]
    assert hits[0].score > hits[1].score


def test_a_short_fact_with_a_new_value_supersedes_the_older_memory(store, embedder):
    old = remember(store, "Our office is in Berlin", embedder=embedder)
    assert remember(store, "I visited Berlin", embedder=embedder).supersedes == []
    new = remember(store, "Our office is in Munich", embedder=embedder)
    assert new.supersedes == [old.id]
    assert [m["text"] for m in list_memories(store)] == ["Our office is in Munich", "I visited Berlin"]


def test_a_new_value_close_enough_to_merge_still_supersedes(store):
    embedder = HashingEmbedder(dim=256, synonyms={"60": "30"})  # the two read as one vector: cosine 1.0
    old = remember(store, "The API timeout is 30 seconds", embedder=embedder)
    new = remember(store, "The API timeout is 60 seconds", embedder=embedder)
    assert new.status == "stored" and new.supersedes == [old.id]


def test_turns_of_one_speaker_far_apart_in_meaning_do_not_supersede(store, embedder):
    remember(store, "Caroline: I went to the LGBTQ support group yesterday", embedder=embedder)
    later = remember(store, "Caroline: I went hiking with my kids", embedder=embedder)
    assert later.supersedes == []


def test_an_unrelated_memory_supersedes_nothing(store, embedder):
    remember(store, "The staging key rotates monthly", embedder=embedder)
    assert remember(store, "Alice prefers tea in the morning", embedder=embedder).supersedes == []


def test_without_an_embedding_model_word_overlap_decides(store):
    first = remember(store, "Backups run nightly at two")
    assert remember(store, "nightly, backups run at two").status == "merged"
    assert remember(store, "Backups run weekly at two").supersedes == [first.id]


def test_a_superseded_value_stated_again_is_current_again(store, embedder):
    monthly = remember(store, "The staging key rotates monthly", embedder=embedder)
    weekly = remember(store, "The staging key rotates weekly", embedder=embedder)
    daily = remember(store, "The staging key rotates daily", embedder=embedder)
    assert (weekly.supersedes, daily.supersedes) == ([monthly.id], [weekly.id])
    again = remember(store, "the staging key rotates MONTHLY", embedder=embedder)
    assert (again.id, again.status, again.supersedes) == (monthly.id, "duplicate", [daily.id])  # the current one
    assert [m["id"] for m in list_memories(store)] == [monthly.id]
    record = next(m for m in list_memories(store, history=True) if m["id"] == monthly.id)
    assert (
        record["superseded_by"] is None
        and {"id": daily.id, "relation": "supersedes"}.items() <= record["links"][0].items()
    )
    (hit, *_) = search(store, "how often does the staging key rotate", SearchOptions(top_k=3)).hits
    assert hit.source_id == monthly.id


def test_a_superseded_value_restated_with_other_punctuation_is_current_again(store, embedder):
    weekly = remember(store, "The staging key rotates weekly", embedder=embedder)
    daily = remember(store, "The staging key rotates daily", embedder=embedder)
    again = remember(store, "the staging key rotates weekly.", embedder=embedder)
    assert (again.id, again.status, again.supersedes) == (weekly.id, "duplicate", [daily.id])
    # punctuation inside a word is part of it: a sign, a version
    from crossmodalrag.agent.memories import content_hash

    assert content_hash("The offset is -5") != content_hash("The offset is 5")
    assert content_hash("We use C++") != content_hash("We use C") and content_hash("???") != content_hash("!!!")


def test_a_memory_stored_before_punctuation_was_ignored_is_still_found(store, embedder):
    from crossmodalrag.agent.memories import content_hashes

    old = remember(store, "The cache lives on port 6379.", embedder=embedder)
    legacy = content_hashes("The cache lives on port 6379.")[1]
    store.conn.execute("UPDATE agent_memories SET content_hash = ? WHERE source_id = ?", (legacy, old.id))
    store.conn.commit()
    assert remember(store, "the cache lives on port 6379.", embedder=embedder).id == old.id


def test_an_update_that_would_copy_another_memory_is_refused(store, embedder):
    from crossmodalrag.agent.tools import InvalidArgument

    vpn = remember(store, "Deploys need the VPN", embedder=embedder)
    lunch = remember(store, "Lunch on Friday is pizza", embedder=embedder)
    with pytest.raises(InvalidArgument, match=f"memory {vpn.id} already says this"):
        update_memory(store, lunch.id, content="deploys need the VPN!", embedder=embedder)
    assert update_memory(store, vpn.id, content="Deploys need the VPN.", embedder=embedder)["id"] == vpn.id


@pytest.mark.parametrize("with_vectors", [True, False])
def test_rewriting_a_memory_derives_its_links_and_supersession_again(store, embedder, with_vectors):
    embedder = embedder if with_vectors else None
    old = remember(store, "The backup window for the durian database is 01:00 UTC", embedder=embedder)
    new = remember(store, "The backup window for the durian database is 03:00 UTC", embedder=embedder)
    assert new.supersedes == [old.id]
    update_memory(store, new.id, content="Lunch for the team is ordered from the taqueria", embedder=embedder)
    # Its new text replaces nothing and is close to nothing: the old one is current again.
    assert {m["id"] for m in list_memories(store)} == {old.id, new.id}
    assert [link for m in list_memories(store) for link in m["links"]] == []
    (hit,) = search(store, "durian database backup window", SearchOptions(top_k=1)).hits
    assert hit.source_id == old.id and "superseded" not in hit.components
    # Rewritten to another value of the same fact, it replaces the old one again.
    update_memory(store, new.id, content="The backup window for the durian database is 04:00 UTC", embedder=embedder)
    assert [m["id"] for m in list_memories(store)] == [new.id]
    record = next(m for m in list_memories(store, history=True) if m["id"] == old.id)
    assert record["superseded_by"] == new.id


def test_rewriting_the_older_memory_to_the_newer_value_lets_it_replace_the_newer(store, embedder):
    # An update states its text now: the older memory, rewritten, is the newest statement of the fact.
    old = remember(store, "The staging key rotates monthly", embedder=embedder)
    new = remember(store, "The staging key rotates weekly", embedder=embedder)
    update_memory(store, old.id, content="The staging key rotates daily", embedder=embedder)
    assert [m["id"] for m in list_memories(store)] == [old.id]
    assert next(m for m in list_memories(store, history=True) if m["id"] == new.id)["superseded_by"] == old.id


def test_an_update_that_changes_nothing_writes_nothing(store, embedder):
    from crossmodalrag.agent.tools import InvalidArgument

    memory = remember(store, "The cache listens on port 7379", ["ops"], 0.5, "fact", embedder=embedder)
    before = list_memories(store)
    with pytest.raises(InvalidArgument, match="nothing to change"):
        update_memory(store, memory.id)
    # the values it already has: not even its `updated` time moves, so no change is reported
    update_memory(store, memory.id, content="The cache listens on port 7379", tags=["ops"], importance=0.5, kind="fact")
    assert list_memories(store) == before
    assert store.conn.execute("SELECT COUNT(*) FROM change_states").fetchone()[0] == 0


def test_secrets_are_masked_in_a_memory_and_its_context(store):
    result = remember(
        store, "Deploy token: ghp_abcdefghijklmnopqrstuvwxyz0123456789", context="password=hunter2hunter2 ok?"
    )
    assert result.to_dict()["secrets_masked"] == 2
    (record,) = list_memories(store)
    assert "ghp_" not in record["text"] and "hunter2" not in record["context"]
    assert "[secret masked]" in record["text"]
    stored = str([tuple(r) for r in store.conn.execute("SELECT text FROM chunks")])
    assert "ghp_abc" not in stored and "hunter2" not in stored


def test_when_and_context_place_a_turn_stored_alone(store, embedder):
    """A reply stored alone is found by the words it answers (its context), on the day it was said."""
    said = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp()
    question = "Ana: Which museum <private>(my pin 4242)</private> did you visit with the dinosaur skeletons?"
    reply = remember(store, "Ben: The one downtown, twice!", embedder=embedder, when=said, context=question)
    (record,) = list_memories(store)
    assert record["date"].startswith("2023-05-08T13:56") and record["text"] == "Ben: The one downtown, twice!"
    assert record["context"].startswith("Ana: Which museum") and "4242" not in record["context"]
    (chunk,) = store.conn.execute("SELECT text FROM chunks WHERE source_id = ?", (reply.id,)).fetchone()
    first_line = chunk.split("\n")[0]
    assert first_line.startswith("Ben: The one downtown, twice! · 8 May 2023 · 2023-05-08 · re: Ana: Which museum")
    (vector,) = store.conn.execute("SELECT vector FROM chunk_vectors").fetchone()
    own = embedder.embed(["Ben: The one downtown, twice! · 8 May 2023 · 2023-05-08\nBen: The one downtown, twice!"])[0]
    assert np.frombuffer(vector, dtype=np.float32) @ own == pytest.approx(1.0)  # the context is not embedded
    (hit,) = search(store, "dinosaur skeletons museum", SearchOptions(top_k=1)).hits
    assert hit.source_id == reply.id
    within = SearchOptions(top_k=1, after=said - 86_400, before=said + 86_400)
    assert [h.source_id for h in search(store, "downtown", within).hits] == [reply.id]
    # the same words again are a duplicate in the same context only; an update keeps when and context
    assert remember(store, "Ben: the one downtown, twice!", context=question).status == "duplicate"
    assert remember(store, "Ben: the one downtown, twice!", context="other").status == "stored"
    update_memory(store, reply.id, content="Ben: The one downtown, three times!", embedder=embedder)
    (chunk,) = store.conn.execute("SELECT text FROM chunks WHERE source_id = ?", (reply.id,)).fetchone()
    assert " · 8 May 2023 · 2023-05-08 · re: Ana: Which museum" in chunk.split("\n")[0]


def test_invisible_characters_around_a_memory_are_not_its_text(store):
    stored = remember(store, "\ufeff\u200bDeploys need the VPN\u2060 ")
    assert memory_texts(store, [stored.id])[stored.id] == "Deploys need the VPN"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"content": ""}, "empty"),
        ({"content": "<private>all of it</private>"}, "empty"),
        ({"content": "\u200b\u200b\u200b"}, "empty"),  # zero-width spaces: str.strip keeps them
        ({"content": " \ufeff\u2060\n"}, "empty"),  # a byte order mark and a word joiner
        ({"content": 42}, "must be text"),
        ({"content": "x" * 50_000}, "at most"),
        ({"content": "ok", "importance": 1.5}, "from 0 to 1"),
        ({"content": "ok", "importance": "high"}, "from 0 to 1"),
        ({"content": "ok", "kind": "Robert'); DROP TABLE"}, "kind"),
        ({"content": "ok", "tags": ["a b c"]}, "tags"),
        ({"content": "ok", "tags": [str(i) for i in range(30)]}, "tags"),
        ({"content": "ok", "context": "x" * 5_000}, "context"),
        ({"content": "ok", "context": 7}, "context"),
        ({"content": "ok", "when": 32_503_680_000.0}, "in the future"),  # 2999: it became the memory's "now"
    ],
)
def test_unusable_input_is_refused(store, kwargs, message):
    with pytest.raises(InvalidMemory, match=message):
        remember(store, **kwargs)
    assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0


def test_cli_remember_memories_and_ask_mentions_the_change(capsys):
    assert main(["remember", "Deploys need the VPN; the staging key rotates monthly", "--tags", "ops"]) == 0
    assert "remembered as memory 1" in capsys.readouterr().out
    assert main(["remember", "The staging key rotates weekly", "--kind", "fact", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["supersedes"] == [1]
    assert main(["memories", "--history", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["memories"]
    assert [(m["id"], m["superseded_by"]) for m in listed] == [(2, None), (1, 2)]
    assert main(["ask", "how often does the staging key rotate", "--no-llm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["evidence"][0]["source_id"] == 2 and any("replaced an older one" in n for n in out["notices"])
    assert main(["sources", "--kind", "memory", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 2
    assert main(["remember", "", "--json"]) == 1
    assert "error: the memory is empty" in capsys.readouterr().err
    assert main(["remember", "Ben: the one downtown", "--when", "2023-05-08", "--context", "Ana: which museum?"]) == 0
    capsys.readouterr()
    assert main(["memories", "--json"]) == 0
    oldest = json.loads(capsys.readouterr().out)["memories"][-1]  # newest first by their own dates
    assert oldest["date"].startswith("2023-05-08") and oldest["context"] == "Ana: which museum?"
    assert main(["memories"]) == 0  # the text list shows each memory's own date, the order it is in
    assert capsys.readouterr().out.splitlines()[-2].split()[1] == "2023-05-08"
    assert main(["memories", "--limit", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 2  # the current ones: the cut list says so
    assert main(["memories", "--limit", "1"]) == 0
    assert "showing 1 of 2 memories (raise --limit" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--when", "yesterday"], "argument --when: the date must be an ISO date"),
        (["--importance", "7"], "argument --importance: must be a number from 0 to 1"),
        (["--importance", "nan"], "argument --importance: must be a number from 0 to 1"),
        (["--kind", "Bad Kind"], "argument --kind: must be one short lowercase word"),  # exited 1
    ],
)
def test_cli_remember_refuses_a_bad_value_as_a_usage_error_before_any_work(option, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["remember", "x", *option])
    assert exit_.value.code == 2 and said in capsys.readouterr().err


def test_cli_remember_reads_the_memory_from_stdin_given_a_dash(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("The deploy key rotates monthly\n"))
    assert main(["remember", "-", "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)["id"]
    assert main(["source", str(stored), "--json"]) == 0
    assert "The deploy key rotates monthly" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("Two lines:\nthe second one\n"))
    assert main(["remember", "-"]) == 0
    capsys.readouterr()
    assert main(["memories"]) == 0
    assert "\n        the second one" in capsys.readouterr().out  # under its header, not at column 0


def test_a_rollback_derives_the_restored_memories_supersession_again(capsys, db_path):
    def history():
        capsys.readouterr()
        assert main(["memories", "--history", "--json"]) == 0
        return [(m["id"], m["superseded_by"]) for m in json.loads(capsys.readouterr().out)["memories"]]

    assert main(["remember", "The lychee cluster runs Postgres 14"]) == 0
    assert main(["checkpoint", "cp1"]) == 0
    assert main(["remember", "The lychee cluster runs Postgres 16"]) == 0
    assert main(["checkpoint", "cp2"]) == 0
    assert history() == [(2, None), (1, 2)]
    assert main(["rollback", "cp1"]) == 0
    assert main(["rollback", "cp2"]) == 0  # the newer memory is back, and so is its mark on the older
    assert history() == [(2, None), (1, 2)]
    capsys.readouterr()
    assert main(["ask", "which Postgres version does the lychee cluster run", "--no-llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evidence"][0]["source_id"] == 2
    # The older memory rewritten, then rolled back: restored as of when it was stored, the newer replaces it.
    assert main(["checkpoint", "cp3"]) == 0
    with open_store(db_path) as store:
        update_memory(store, 1, content="Lunch for the team is ordered from the taqueria")
    assert history()[-1] == (1, None)
    assert main(["rollback", "cp3"]) == 0
    assert (1, 2) in history()


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("The API timeout is 30 seconds.", "The API timeout is 60 seconds.", True),
        ("Python for the service is 3.10", "Python for the service is 3.12", True),  # a version is one word
        ("The API supports pagination", "The API does not support pagination", True),
        # a rule reversed: the negation may open the clause, before the word its subject starts with
        ("Do not deploy on Fridays.", "Do deploy on Fridays.", True),
        ("Never deploy on Fridays.", "Deploy on Fridays now.", True),
        ("We deploy on Fridays.", "We do not deploy on Fridays.", True),
        ("Never use tabs.", "Use spaces.", False),
        ("Caroline: Hey Mel! Good to see you!", "Caroline: Totally agree, Mel!", False),  # no statement
        ("Is the cache on Redis?", "Is the cache on Postgres?", False),
        ("Alice prefers tea", "Bob prefers tea", False),
        ("We use Redis for the cache", "We use Redis for the cache and for rate limits", False),
        # one slot changed, not words here and there
        ("Alice leads the payments team in Berlin", "Alice joined the payments team in Lisbon", False),
        # a speaker label must match but is no subject: these two thank for different things
        ("Jon: Thanks for the support.", "Jon: Thanks for having my back.", False),
        ("Staging: the key rotates monthly", "Production: the key rotates weekly", False),
        ("Jon: The standup is at 9:30 on Mondays", "Jon: The standup is at 10:00 on Mondays", True),
        # a bracketed aside (a shared photo's caption) states nothing the speaker claims
        (
            "Mel: Love it. [shares a photo: a photo of a bowl with a black and white design]",
            "Mel: Here it is. [shares a photo: a photo of a bowl with a colorful design]",
            False,
        ),
        ("The API timeout is 30 seconds [set in config.py]", "The API timeout is 60 seconds", True),
        # the changed words name another subject: before the verb, the subject is another thing
        ("Ticket 4521 is assigned to Ada", "Ticket 4522 is assigned to Ada", False),
        ("Ticket 4521 is assigned to Ada", "Ticket 4521 is assigned to Grace", True),
        ("The log level in production is debug", "The log level in staging is debug", False),
        ("Flight LH123 departs at 09:40", "Flight LH456 departs at 09:40", False),
        ("Flight LH123 departs at 09:40", "Flight LH123 departs at 10:15", True),
        ("We use Postgres for the rate limits", "We use Redis for the rate limits", True),
        # the value must stay a value of the same thing: what it is for, a verb of many values, its kind
        ("Use port 5432 for Postgres", "Use port 6379 for Redis", False),
        ("Use port 5432 for Postgres", "Use port 5433 for Postgres", True),
        ("We use Postgres for the cache", "We use Redis for the sessions", False),
        ("Alice owns the billing service", "Alice owns the search service", False),
        ("Maria likes tea in the morning", "Maria likes coffee in the morning", False),
        ("Maria prefers dark mode in the editor", "Maria prefers vim keybindings in the editor", False),
        ("Maria prefers dark mode in the editor", "Maria prefers light mode in the editor", True),
        ("Maria prefers tea in the morning", "Maria prefers coffee in the morning", True),
        # two events, both true: a happening does not replace another
        ("Fixed the login bug in the auth service", "Fixed the logout bug in the auth service", False),
        ("I went to the gym on Monday", "I went to the gym on Tuesday", False),
        ("We have moved the standup to Monday", "We have moved the standup to Tuesday", False),
        ("The team meeting moved to Thursdays", "The team meeting is on Fridays", True),  # a state now
        ("The cluster has three replicas", "The cluster has five replicas", True),  # "has": a state
        # a short fact: one word besides the value, a name or number, where the words before it hold one value
        ("Our office is in Berlin", "Our office is in Munich", True),
        ("I live in Paris", "I live in London", True),
        ("My manager is Alice Smith", "My manager is Bob Jones", True),
        ("I live in Paris", "I visited Paris", False),
        ("My manager is Alice", "My dentist is Alice", False),
        ("I love Paris", "I love London", False),  # one loves both
        ("I like hiking", "I like swimming", False),
        ("Mel: Thanks, Caroline.", "Mel: Thanks, Caro.", False),  # no verb: nothing stated
        ("Our office is in Berlin", "Our office is in Berlin and Lisbon", False),
        # two words swapped after the subject: the preference turned
        ("I prefer tabs over spaces", "I prefer spaces over tabs", True),
        ("Alice reports to Bob", "Bob reports to Alice", False),  # the subject changed
        # the new memory is mostly something else: one sentence in it shaped like an old one is no update
        (
            "Mel: Thanks, Caroline.",
            "Mel: Thanks, Caro. I spent the weekend painting sunsets by the lake with the kids.",
            False,
        ),
    ],
)
def test_what_counts_as_a_restated_fact(old, new, expected):
    from crossmodalrag.agent.updates import restates_with_new_value

    assert restates_with_new_value(old, new) is expected


def test_forgetting_the_newer_memory_makes_the_older_current_again(store, embedder):
    from crossmodalrag.agent.edits import forget_source

    old = remember(store, "Deploys need the VPN; the staging key rotates monthly", embedder=embedder)
    new = remember(store, "The staging key rotates weekly", embedder=embedder)
    forget_source(store, new.id)
    assert [m["id"] for m in list_memories(store)] == [old.id]
    (hit,) = search(store, "staging key rotates", SearchOptions(top_k=2)).hits
    assert hit.source_id == old.id and "superseded" not in hit.components


def test_memory_forget_erases_agent_memories_only(store, embedder, tmp_path):
    # An agent steered by text it read from memory must not erase the user's notes, commits or chats.
    from crossmodalrag.agent.edits import forget_source
    from crossmodalrag.agent.tools import InvalidArgument
    from crossmodalrag.store.documents import fingerprint, write_document
    from crossmodalrag.types import Document

    note = Document(str(tmp_path / "plan.md"), "note", "plan", "Ship the cache on Friday.", "markdown")
    with store.batched() as batch:
        write_document(batch, note, fingerprint(note))
    note_id = store.conn.execute("SELECT id FROM sources WHERE source_type = 'note'").fetchone()[0]
    memory = remember(store, "The staging key rotates monthly", embedder=embedder)
    with pytest.raises(InvalidArgument) as refused:
        forget_source(store, note_id)
    assert "not an agent memory" in refused.value.message and f"mem forget {note_id}" in refused.value.hint
    assert store.conn.execute("SELECT COUNT(*) FROM sources WHERE id = ?", (note_id,)).fetchone()[0] == 1
    assert forget_source(store, memory.id)["sources"] == 1


def test_forgetting_the_middle_of_an_update_chain_keeps_the_oldest_superseded(any_store, embedder):
    from crossmodalrag.agent.edits import forget_source

    monthly = remember(any_store, "The staging key rotates monthly", embedder=embedder)
    weekly = remember(any_store, "The staging key rotates weekly", embedder=embedder)
    daily = remember(any_store, "The staging key rotates daily", embedder=embedder)
    forget_source(any_store, weekly.id)
    assert [m["id"] for m in list_memories(any_store)] == [daily.id]
    record = next(m for m in list_memories(any_store, history=True) if m["id"] == monthly.id)
    assert record["superseded_by"] == daily.id
    forget_source(any_store, daily.id)  # the newest gone: the value before it is current again
    assert [m["id"] for m in list_memories(any_store)] == [monthly.id]


def test_forgetting_a_value_stated_again_makes_only_the_latest_before_it_current(store, embedder):
    from crossmodalrag.agent.edits import forget_source

    monthly = remember(store, "The staging key rotates monthly", embedder=embedder)
    weekly = remember(store, "The staging key rotates weekly", embedder=embedder)
    daily = remember(store, "The staging key rotates daily", embedder=embedder)
    again = remember(store, "The staging key rotates weekly!", embedder=embedder)  # supersedes daily now
    assert (again.id, again.supersedes) == (weekly.id, [daily.id])
    forget_source(store, weekly.id)  # monthly and daily were both superseded by it
    assert [m["id"] for m in list_memories(store)] == [daily.id]
    record = next(m for m in list_memories(store, history=True) if m["id"] == monthly.id)
    assert record["superseded_by"] == daily.id


def test_a_search_by_tag_or_kind_fills_its_limit_however_many_others_match_first(store):
    from crossmodalrag.agent.tools import search_memory
    from crossmodalrag.answer.evidence import Retriever

    for index in range(12):  # team b's memories match fewer of the query's words: they rank last
        text = f"Project {index} deploys every sprint from its pipeline." if index < 9 else f"Project {index} deploys."
        remember(store, text, ["team-b" if index >= 9 else "team-a"], 0.5)
    retriever = Retriever(store, SearchOptions(), None)
    found = search_memory(retriever, "project deploys every sprint pipeline", limit=2, tags=["team-b"])
    assert found["count"] == 2
    assert search_memory(retriever, "project deploys", limit=5, tags=["team-b"], kind="decision")["count"] == 0


def test_an_empty_date_window_is_refused_alike_and_a_month_is_a_date(store):
    from crossmodalrag.agent.tools import InvalidArgument, parse_window, search_memory, timeline_view
    from crossmodalrag.answer.evidence import Retriever

    with pytest.raises(InvalidArgument, match="after=2026-03-01 is not earlier than before=2026-02-01"):
        search_memory(Retriever(store, SearchOptions(), None), "x", after="2026-03-01", before="2026-02-01")
    with pytest.raises(InvalidArgument, match="not earlier than"):
        timeline_view(store, after="2026-03", before="2026-03")
    assert parse_window("2026-02", None)[0] == datetime(2026, 2, 1, tzinfo=timezone.utc).timestamp()


def test_browsing_before_a_date_excludes_that_instant_as_search_does(store):
    may_tenth = datetime(2025, 5, 10, tzinfo=timezone.utc).timestamp()
    remember(store, "The vendor call moved to Friday.", [], 0.5, when=may_tenth)
    assert list_memories(store, until=may_tenth) == [] and len(list_memories(store, until=may_tenth + 1)) == 1


def test_a_memory_is_embedded_at_once_on_both_backends(any_store, embedder):
    first = remember(any_store, "The staging VPN password rotates monthly", ["ops"], 0.5, embedder=embedder)
    again = remember(any_store, "The staging VPN password rotates monthly!", ["ops"], 0.5, embedder=embedder)
    assert first.status == "stored" and again.id == first.id
    assert any_store.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0] == 1


def test_storing_again_embeds_a_memory_a_killed_store_left_without_its_vector(any_store, embedder):
    first = remember(any_store, "The staging VPN password rotates monthly", embedder=embedder)
    with any_store.transaction() as conn:  # as a kill -9 between the store's commit and its embedding leaves it
        conn.execute("DELETE FROM chunk_vectors")
    again = remember(any_store, "The staging VPN password rotates monthly", embedder=embedder)
    assert (again.id, again.status) == (first.id, "duplicate")
    assert any_store.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0] == 1
    calls = len(embedder.calls)
    remember(any_store, "The staging VPN password rotates monthly", embedder=embedder)
    assert len(embedder.calls) == calls  # embedded once: a duplicate with its vector is not embedded again


def test_what_changed_since_counts_a_memory_whose_attributes_changed(any_store):
    import time as clock

    from crossmodalrag.agent.tools import changes_since
    from crossmodalrag.types import iso_time

    first = remember(any_store, "The cache listens on port 7379", ["ops"], 0.5).id
    since = iso_time(clock.time() + 1)  # whole seconds: the next one
    assert changes_since(any_store, since)["changed"] == []
    clock.sleep(1.1)
    update_memory(any_store, first, tags=["ops", "db"], importance=0.9)
    assert [c["id"] for c in changes_since(any_store, since)["changed"]] == [first]


def test_what_changed_since_pages_and_counts_every_change(any_store):
    """Listing the newest 200 alone, an agent took them for every change of a busy day."""
    from crossmodalrag.agent.tools import changes_since

    ids = [remember(any_store, f"Rack {n} holds the {word} shelf", [], 0.5).id for n, word in enumerate(WORDS)]
    page = changes_since(any_store, "2000-01-01", limit=3)
    assert page["changed_total"] == len(ids) and len(page["changed"]) == 3
    rest = changes_since(any_store, "2000-01-01", limit=100, offset=3)["changed"]
    assert sorted(c["id"] for c in page["changed"] + rest) == sorted(ids)


WORDS = ["amber", "birch", "cedar", "dune", "ember", "fjord", "garnet"]


@pytest.mark.parametrize(
    ("when", "words"),
    [(datetime(2023, 5, 8, 23, 59, tzinfo=timezone.utc).timestamp(), "8 May 2023"), (None, ""), (1e20, "")],
)
def test_a_memorys_day_in_words_is_the_days_of_a_chat_sessions_breadcrumb(when, words):
    """A chat turn's breadcrumb says "8 May, 2023"; a memory's said only 2023-05-08, which neither
    the words index nor the embedder relates to "in May" (#13 benchmark 2, docs/benchmarks.md session 36)."""
    from crossmodalrag.agent.memories import day_in_words, memory_document

    assert day_in_words(when) == words
    crumb = memory_document("Deploys need the VPN", "k", when, {}).metadata["_breadcrumb"]
    assert crumb == (f"Deploys need the VPN · {words} · 2023-05-08" if words else "Deploys need the VPN")
