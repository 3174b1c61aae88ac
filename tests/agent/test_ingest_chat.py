"""`mem ingest-chat`: one source per session, turn chunks with locators, incremental growth."""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc

import pytest

from crossmodalrag.chunking.turns import semantic_text
from crossmodalrag.cli.main import main
from crossmodalrag.connectors.chats import UNZIP_FIRST, ChatRead, open_chat
from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.index.embeddings import embed_missing
from tests.agent.chats import SAMPLES, claude_record, needs_samples, write_jsonl
from tests.fakes import HashingEmbedder


def chunk_rows(store, uri_part):
    return store.conn.execute(
        "SELECT c.id, c.locator, c.text, c.metadata FROM chunks c JOIN sources s ON s.id = c.source_id"
        " WHERE s.uri LIKE ? ORDER BY c.chunk_index",
        (f"%{uri_part}%",),
    ).fetchall()


@needs_samples
def test_every_sample_ingests_as_one_source_per_session(store):
    report = ingest_conversations(store, [SAMPLES])
    assert report.failed == 0 and report.added == 11 and not report.notices
    kinds = dict(store.conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY source_type").fetchall())
    assert kinds == {"conversation": 11}
    again = ingest_conversations(store, [SAMPLES])
    assert (again.added, again.updated, again.unchanged, again.chunks) == (0, 0, 11, 0)


@needs_samples
def test_a_turn_chunk_cites_its_session_and_turn(store):
    ingest_conversations(store, [SAMPLES / "claude-code/short.jsonl"])
    _, locator, text, metadata = chunk_rows(store, "short.jsonl")[0]
    meta = json.loads(metadata)
    assert locator == f"mix phx.server doesnt seem to start · {meta['turn_id']}"
    assert text.startswith("mix phx.server doesnt seem to start · 2026-02-10\nuser: ")
    assert meta["speaker"] == "user" and meta["turn"] == 0 and meta["time"] > 0


def test_a_growing_session_writes_only_its_new_turns(store, tmp_path):
    records = [
        claude_record("u1", None, "user", "How do we deploy?"),
        claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Through the VPN."}]),
    ]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    ingest_conversations(store, [path])
    before = chunk_rows(store, "s.jsonl")
    records += [
        claude_record("u2", "a1", "user", "And the staging key?"),
        claude_record("a2", "u2", "assistant", [{"type": "text", "text": "It rotates monthly."}]),
    ]
    write_jsonl(path, records)
    report = ingest_conversations(store, [path])
    after = chunk_rows(store, "s.jsonl")
    assert report.updated == 1 and report.chunks == 2
    assert after[:2] == before and len(after) == 4  # the old chunks (ids, vectors) untouched
    assert "rotates monthly" in after[3][2]


def test_a_session_cut_short_keeps_the_turns_stored_from_it(store, tmp_path):
    records = [
        claude_record("u1", None, "user", "How do we deploy?"),
        claude_record("a1", "u1", "assistant", "Through the VPN."),
        claude_record("u2", "a1", "user", "And the staging key?"),
        claude_record("a2", "u2", "assistant", "It rotates monthly."),
    ]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    ingest_conversations(store, [path])
    before = chunk_rows(store, "s.jsonl")
    write_jsonl(path, records[:2])  # an interrupted copy: transcripts only ever grow
    report = ingest_conversations(store, [path])
    assert chunk_rows(store, "s.jsonl") == before and (report.unchanged, report.removed) == (1, 0)
    assert any("lacks the last 2 turns stored from it: kept" in notice for notice in report.notices)
    write_jsonl(path, records)
    assert ingest_conversations(store, [path]).unchanged == 1  # whole again: nothing to write


def test_a_changed_earlier_turn_rewrites_from_there(store, tmp_path):
    records = [
        claude_record("u1", None, "user", "one"),
        claude_record("a1", "u1", "assistant", "two"),
        claude_record("u2", "a1", "user", "three"),
    ]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    ingest_conversations(store, [path])
    records[1] = claude_record("a1", "u1", "assistant", "TWO")
    write_jsonl(path, records)
    report = ingest_conversations(store, [path])
    assert report.chunks == 2 and [r[2].split("\n")[1] for r in chunk_rows(store, "s.jsonl")] == [
        "user: one",
        "assistant: TWO",
        "user: three",
    ]


def test_a_conversation_gone_from_an_export_leaves_memory(store, tmp_path):
    def export(*names):
        return [
            {
                "uuid": n,
                "name": n,
                "created_at": "2025-01-01T00:00:00Z",
                "chat_messages": [{"uuid": n + "m", "sender": "human", "text": f"about {n}", "content": []}],
            }
            for n in names
        ]

    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export("alpha", "beta")))
    ingest_conversations(store, [path])
    path.write_text(json.dumps(export("alpha")))
    report = ingest_conversations(store, [path])
    assert report.removed == 1 and report.unchanged == 1


def test_an_export_whose_conversations_were_all_deleted_empties_the_memory_of_it(store, tmp_path, capsys):
    path = claude_ai_export(tmp_path / "conversations.json", [("c1", "Cache", ["drop the cache"])])
    ingest_conversations(store, [path])
    path.write_text("[ ]\n")
    assert ingest_conversations(store, [path]).removed == 1
    assert main(["ingest-chat", str(path)]) == 0 and "0 removed" in capsys.readouterr().err  # no longer refused


def test_an_export_in_another_encoding_is_refused_and_the_good_copy_kept(store, tmp_path):
    # A cp1252 copy was stored with its accented letters replaced, and then "kept once" over the
    # good UTF-8 copy of the same conversations read after it.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bad = claude_ai_export(tmp_path / "a" / "conversations.json", [("c1", "Heizung", ["Firma Müller & Söhne"])])
    bad.write_bytes(json.dumps(json.loads(bad.read_text()), ensure_ascii=False).encode("cp1252"))
    good = claude_ai_export(tmp_path / "b" / "conversations.json", [("c1", "Heizung", ["Firma Müller & Söhne"])])
    report = ingest_conversations(store, [bad, good])
    assert report.added == 1 and report.failures == [
        f"{bad}: not valid UTF-8 (byte {bad.read_bytes().index(0xFC)}); nothing was read from it"
        " (hint: re-save it as UTF-8, the encoding the service exported it in)"
    ]
    assert [row[0] for row in store.conn.execute("SELECT uri FROM sources")] == [f"{good}@c1"]
    assert "Müller" in store.conn.execute("SELECT text FROM chunks").fetchone()[0]


def test_a_folder_holding_only_a_zipped_export_says_to_unzip_it(store, tmp_path):
    import zipfile

    with zipfile.ZipFile(tmp_path / "export.zip", "w") as zipped:
        zipped.writestr("conversations.json", "[]")
    report = ingest_conversations(store, [tmp_path])
    assert report.notices == [f"{tmp_path}: no chat file in it, only export.zip (hint: {UNZIP_FIRST})"]


def test_the_same_export_in_two_folders_is_stored_once_and_a_longer_copy_wins(store, tmp_path):
    def export(folder, *turns):
        messages = [{"uuid": f"m{i}", "sender": "human", "text": text, "content": []} for i, text in enumerate(turns)]
        conversation = {"uuid": "c1", "name": "Cache", "created_at": "2025-01-01T00:00:00Z", "chat_messages": messages}
        path = tmp_path / folder / "conversations.json"
        path.parent.mkdir()
        path.write_text(json.dumps([conversation]))
        return path

    jan, feb = export("jan", "drop the cache"), export("feb", "drop the cache")
    first = ingest_conversations(store, [jan.parent, feb.parent])
    assert (first.added, first.unchanged) == (1, 1) and "already stored from another file" in first.notices[0]
    march = export("mar", "drop the cache", "and the queue")
    later = ingest_conversations(store, [jan.parent, feb.parent, march.parent])
    assert (later.added, later.updated) == (0, 1)
    uris = [row[0] for row in store.conn.execute("SELECT uri FROM sources")]
    assert uris == [f"{march}@c1"] and "and the queue" in chunk_rows(store, "mar")[-1][2]
    again = ingest_conversations(store, [jan.parent, feb.parent, march.parent])
    assert (again.added, again.updated, again.removed, again.unchanged) == (0, 0, 0, 3)


def claude_ai_export(path, conversations):
    """A Claude.ai conversations.json of (uuid, name, [texts]) at path (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            [
                {
                    "uuid": uuid,
                    "name": name,
                    "created_at": "2025-01-01T00:00:00Z",
                    "chat_messages": [
                        {"uuid": f"{uuid}-{i}", "sender": "human", "text": text, "content": []}
                        for i, text in enumerate(texts)
                    ],
                }
                for uuid, name, texts in conversations
            ]
        )
    )
    return path


def test_a_newer_export_in_another_folder_takes_over_from_a_deleted_one(store, tmp_path):
    # Each download lands in a new folder and the old one is deleted: renamed conversations take the new
    # title (keeping their id), deleted ones leave instead of staying cited from a file that is gone.
    june = claude_ai_export(
        tmp_path / "june" / "conversations.json",
        [("c1", "Cache", ["drop the cache"]), ("c2", "Trip", ["book Lisbon"]), ("c3", "Old", ["forget me"])],
    )
    ingest_conversations(store, [june.parent])
    ids = dict(store.conn.execute("SELECT json_extract(metadata, '$.session'), id FROM sources"))
    july = claude_ai_export(
        tmp_path / "july" / "conversations.json",
        [("c1", "Cache", ["drop the cache"]), ("c2", "Trip to Lisbon", ["book Lisbon"])],
    )
    june.unlink()
    report = ingest_conversations(store, [july.parent])
    assert (report.moved, report.removed, report.added) == (2, 1, 0)
    rows = store.conn.execute("SELECT json_extract(metadata, '$.session'), id, title, uri FROM sources ORDER BY id")
    assert [tuple(row) for row in rows] == [
        ("c1", ids["c1"], "Cache", f"{july}@c1"),
        ("c2", ids["c2"], "Trip to Lisbon", f"{july}@c2"),
    ]
    again = ingest_conversations(store, [july.parent])
    assert (again.unchanged, again.moved, again.removed) == (2, 0, 0)


def test_two_exports_on_disk_keep_what_only_the_older_holds(store, tmp_path):
    # Both files still there (two accounts' exports, or a copy kept on purpose): nothing is retired.
    june = claude_ai_export(
        tmp_path / "june" / "conversations.json", [("c1", "Cache", ["drop the cache"]), ("c3", "Old", ["keep me"])]
    )
    july = claude_ai_export(tmp_path / "july" / "conversations.json", [("c1", "Cache", ["drop the cache"])])
    ingest_conversations(store, [june.parent])
    report = ingest_conversations(store, [july.parent])
    assert (report.moved, report.removed, report.unchanged) == (0, 0, 1)
    assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2


def test_a_session_transcript_copied_elsewhere_does_not_retire_its_sub_agents(store, tmp_path):
    # Claude Code deletes old transcripts itself: a session read from a vanished file is kept, and it
    # moves to a copy only with all its turns.
    records = [
        claude_record("u1", None, "user", "fix the cache"),
        claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Fixed."}]),
        claude_record("s1", None, "user", "look for callers", isSidechain=True, agentId="x"),
    ]
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = write_jsonl(tmp_path / "old" / "s.jsonl", records)
    ingest_conversations(store, [old])
    old.unlink()
    cut = write_jsonl(tmp_path / "new" / "cut.jsonl", records[:1])
    report = ingest_conversations(store, [cut])
    assert (report.moved, report.removed, report.added) == (0, 0, 0)
    whole = write_jsonl(tmp_path / "new" / "whole.jsonl", records)
    report = ingest_conversations(store, [whole])
    assert (report.moved, report.removed, report.added) == (2, 0, 0)
    uris = [row[0] for row in store.conn.execute("SELECT uri FROM sources ORDER BY id")]
    assert uris == [f"{whole}@s-1", f"{whole}@s-1/agent-x"]


def test_cli_reports_bad_lines_and_masked_secrets_and_forget_reaches_sessions(tmp_path, capsys):
    path = write_jsonl(tmp_path / "s.jsonl", [claude_record("u1", None, "user", "token ghp_" + "k" * 36), "{broken"])
    assert main(["ingest-chat", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["added"] == 1 and f"{path}:2: not valid JSON" in out["notices"][0]
    assert "1 secrets" in out["notices"][1] and "note: " in captured.err
    assert main(["ingest-chat", str(path), "--json"]) == 0  # unchanged: nothing stored, no secrets note again
    assert not any("secrets" in notice for notice in json.loads(capsys.readouterr().out)["notices"])
    assert main(["forget", "--path", str(path), "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sources"] == 1


def test_a_fifo_named_as_a_session_is_skipped_instead_of_blocking_the_ingest(store, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [claude_record("u1", None, "user", "plan the migration")])
    os.mkfifo(tmp_path / "b.jsonl")  # reading its head waited for a writer forever
    report = ingest_conversations(store, [tmp_path])
    assert report.added == 1 and report.failed == 0
    assert report.notices == [f"skipped {tmp_path / 'b.jsonl'}: not a regular file"]


def test_in_a_folder_an_unreadable_export_is_named_and_other_json_is_not(store, tmp_path):
    (tmp_path / "conversations.json").write_text('[{"title": "Plans", "create_time": 1685016050.1, "upd')
    (tmp_path / "package.json").write_text('{"name": "not a chat"}')
    report = ingest_conversations(store, [tmp_path])
    assert report.failed == 0 and report.added == 0
    assert report.notices == [f"skipped {tmp_path / 'conversations.json'}: not a chat transcript this version reads"]


def test_cli_with_nothing_to_ingest_names_the_setting(capsys):
    assert main(["ingest-chat"]) == 1
    assert "CHAT_PATH_1" in capsys.readouterr().err


@pytest.mark.slow
def test_a_100_mb_session_streams_without_being_loaded_whole(tmp_path):
    path = tmp_path / "big.jsonl"
    output = "x" * 50_000  # tool output: summarised to a line, never kept whole
    with path.open("w") as handle:
        parent = None
        for i in range(2100):
            tool = claude_record(
                f"r{i}", parent, "user", [{"type": "tool_result", "tool_use_id": "t", "content": output}]
            )
            handle.write(json.dumps(claude_record(f"u{i}", parent, "user", f"question {i}")) + "\n")
            handle.write(json.dumps({**tool, "parentUuid": f"u{i}"}) + "\n")
            parent = f"r{i}"
    assert path.stat().st_size > 100_000_000
    tracemalloc.start()
    chat = open_chat(path)
    (session,) = list(chat.sessions())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(session.turns) == 4200 and peak < 20_000_000  # a fifth of the file at most


def ingest_question_and_reply(store, tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "Did you go to the pottery class?"),
            claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Yes, last Friday!"}]),
        ],
    )
    ingest_conversations(store, [path])


def test_a_reply_carries_what_it_answers_in_its_breadcrumb(store, tmp_path):
    ingest_question_and_reply(store, tmp_path)
    _, reply = chunk_rows(store, "s.jsonl")
    breadcrumb, body = reply[2].split("\n", 1)
    assert breadcrumb.endswith("re: user: Did you go to the pottery class?") and body == "assistant: Yes, last Friday!"


def test_a_reply_is_embedded_without_what_it_answers(store, tmp_path):
    """The previous turn is context for words (FTS); in a short turn's vector it drowns the turn."""
    ingest_question_and_reply(store, tmp_path)
    embedded = []

    class Recording(HashingEmbedder):
        def embed(self, texts):
            embedded.extend(texts)
            return super().embed(texts)

    embed_missing(store, Recording())
    reply = next(text for text in embedded if "Friday" in text)
    stored = store.conn.execute("SELECT text FROM chunks WHERE text LIKE '%Friday%'").fetchone()[0]
    assert " · re: user: Did you go" in stored and " · re: " not in reply
    assert reply == stored.split(" · re: ")[0] + "\nassistant: Yes, last Friday!"
    assert semantic_text("notes · plans\nbody · re: kept") == "notes · plans\nbody · re: kept"  # only a breadcrumb's


def test_sync_reads_the_configured_chat_folders(tmp_path, capsys, monkeypatch):
    chats = tmp_path / "chats"
    chats.mkdir()
    session = write_jsonl(chats / "s.jsonl", [claude_record("u1", None, "user", "first question")])
    monkeypatch.setenv("CHAT_PATH_1", str(chats))
    assert main(["sync", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["connectors"]["chat"]["added"] == 1
    write_jsonl(
        session,
        [claude_record("u1", None, "user", "first question"), claude_record("a1", "u1", "assistant", "an answer")],
    )
    assert main(["sync", "--only", "chat", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["connectors"]["chat"]["updated"] == 1


def test_watch_sees_chat_files():
    from crossmodalrag.watch_targets import _suffixes

    assert _suffixes("chat") == (".jsonl", ".json")


def test_a_deleted_session_file_is_kept_in_memory_and_the_ingest_says_so(store, tmp_path):
    """Claude Code deletes old transcripts: their sessions stay, but silently that read as a bug."""
    folder = tmp_path / "chats"
    folder.mkdir()
    kept = write_jsonl(folder / "kept.jsonl", [claude_record("u1", None, "user", "fix the cache")])
    deleted = write_jsonl(
        folder / "deleted.jsonl", [claude_record("u2", None, "user", "tune the index", sessionId="s-2")]
    )
    assert ingest_conversations(store, [folder]).notices == []
    deleted.unlink()
    report = ingest_conversations(store, [folder])
    assert (report.removed, report.unchanged) == (0, 1)
    assert report.notices == [
        f"{folder.resolve()}: 1 session file gone from disk, kept in memory (e.g. {deleted.resolve()}; "
        "hint: `mem forget --path FILE` erases the sessions stored from one)"
    ]
    assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2 and kept.exists()


def files_read(monkeypatch) -> list:
    """The files whose sessions are parsed from here on (parsing and masking is what costs)."""
    read, sessions = [], ChatRead.sessions

    def recording(chat):
        read.append(chat.path.name)
        return sessions(chat)

    monkeypatch.setattr(ChatRead, "sessions", recording)
    return read


def test_an_unchanged_export_is_not_read_again_and_a_changed_one_is(store, tmp_path, monkeypatch):
    path = claude_ai_export(tmp_path / "conversations.json", [("c1", "Cache", ["drop it"]), ("c2", "Trip", ["go"])])
    ingest_conversations(store, [tmp_path])
    read = files_read(monkeypatch)
    again = ingest_conversations(store, [tmp_path])
    assert (again.unchanged, again.added, again.updated, read) == (2, 0, 0, [])
    os.utime(path, ns=(1_700_000_000_000_000_000,) * 2)  # touched (copied over, restored): the same bytes
    assert (ingest_conversations(store, [tmp_path]).unchanged, read) == (2, [])
    claude_ai_export(path, [("c1", "Cache", ["drop it"])])  # a conversation deleted
    report = ingest_conversations(store, [tmp_path])
    assert (report.removed, report.unchanged, read) == (1, 1, ["conversations.json"])
    assert (ingest_conversations(store, [tmp_path]).unchanged, read) == (1, ["conversations.json"])


@pytest.mark.parametrize("said", ["my password is hunter2hunter", "my pin is <private>4821</private>"])
def test_no_hash_of_a_chat_file_with_a_masked_secret_or_private_span_is_stored(
    store, db_path, tmp_path, monkeypatch, said
):
    """The hash of the raw file would confirm a guessed password; so it is read again when touched."""
    path = write_jsonl(tmp_path / "s.jsonl", [claude_record("u1", None, "user", said)])
    os.utime(path, ns=(1_600_000_000_000_000_000,) * 2)  # settled: its stamp alone can tell it unchanged
    ingest_conversations(store, [path])
    stored = store.conn.execute("SELECT json_extract(metadata, '$.file_sha256') FROM sources").fetchall()
    assert [tuple(row) for row in stored] == [(None,)] and hashlib.sha256(
        path.read_bytes()
    ).hexdigest().encode() not in db_bytes(db_path)
    read = files_read(monkeypatch)
    assert (ingest_conversations(store, [path]).unchanged, read) == (1, [])  # by its stamp, as before
    os.utime(path, ns=(1_700_000_000_000_000_000,) * 2)
    assert (ingest_conversations(store, [path]).unchanged, read) == (1, ["s.jsonl"])


def db_bytes(db_path) -> bytes:
    return b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*") if p.is_file())


def test_a_growing_session_file_is_read_when_it_grew_and_only_then(store, tmp_path, monkeypatch):
    records = [claude_record("u1", None, "user", "How do we deploy?")]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    ingest_conversations(store, [path])
    read = files_read(monkeypatch)
    write_jsonl(path, [*records, claude_record("a1", "u1", "assistant", "Through the VPN.")])
    report = ingest_conversations(store, [path])
    assert (report.updated, report.chunks, read) == (1, 1, ["s.jsonl"])  # only the new turn written
    assert (ingest_conversations(store, [path]).unchanged, read) == (1, ["s.jsonl"])


def test_a_file_read_with_a_problem_is_read_again_even_with_bytes_stamped_before(store, tmp_path, monkeypatch):
    # A read that left a notice stamps nothing, and the session it rewrote lost its older stamp: back
    # to the bytes of a clean read, the file must still be read, or the turn edited meanwhile would stay.
    clean = [claude_record("u1", None, "user", "one"), claude_record("a1", "u1", "assistant", "two")]
    path = write_jsonl(tmp_path / "s.jsonl", clean)
    ingest_conversations(store, [path])
    write_jsonl(path, [clean[0], claude_record("a1", "u1", "assistant", "TWO"), "{broken"])
    read = files_read(monkeypatch)
    first, second = (ingest_conversations(store, [path]) for _ in range(2))
    assert "not valid JSON" in first.notices[0] and "not valid JSON" in second.notices[0]  # said each time
    write_jsonl(path, clean)
    ingest_conversations(store, [path])
    assert read == ["s.jsonl"] * 3 and "assistant: two" in chunk_rows(store, "s.jsonl")[1][2]


def test_a_file_some_of_whose_sessions_are_stored_from_another_is_read_each_time(store, tmp_path, monkeypatch):
    jan = claude_ai_export(tmp_path / "jan" / "conversations.json", [("c1", "Cache", ["drop it", "and the queue"])])
    feb = claude_ai_export(tmp_path / "feb" / "conversations.json", [("c1", "Cache", ["drop it"]), ("c2", "T", ["go"])])
    ingest_conversations(store, [jan.parent, feb.parent])
    read = files_read(monkeypatch)
    report = ingest_conversations(store, [jan.parent, feb.parent])
    assert (report.unchanged, read) == (3, ["conversations.json"])  # feb only: its c1 is stored from jan
    assert "1 sessions already stored from another file" in report.notices[0]


def test_an_ingest_job_reports_embedding_progress_and_embeds_what_an_earlier_job_left(
    store, settings, tmp_path, monkeypatch
):
    """A job's progress froze while it embedded, and an agent's client that left mid-embed left chunks
    without vectors that no later `memory_ingest` embedded (it embedded only when it stored chunks)."""
    from crossmodalrag.agent import jobs, memories

    embedder = HashingEmbedder(dim=64)
    monkeypatch.setattr(memories, "load_memory_embedder", lambda settings: (embedder, None))
    chats = tmp_path / "chats"
    chats.mkdir()
    write_jsonl(chats / "s.jsonl", [claude_record(f"u{n}", None, "user", f"question {n} about otters") for n in (1,)])
    ingest_conversations(store, [chats])  # stored, never embedded: as a job whose client left mid-embed
    heard = []
    result = jobs.ingest_work(settings, "chats", chats)(store, heard.append)
    assert result["unchanged"] == 1 and result["embedded"] == 1
    assert heard[-1]["embedded"] == 1 and heard[-1]["to_embed"] == 1
    assert jobs.ingest_work(settings, "chats", chats)(store, heard.append)["embedded"] == 0


def test_a_blank_session_file_is_skipped_without_a_word(store, tmp_path):
    """An agent's session opened and abandoned before its first line was "not a chat transcript this
    version reads": a notice in a folder, a failure (a failed digest job) when given by name."""
    chats = tmp_path / "chats"
    chats.mkdir()
    write_jsonl(chats / "s.jsonl", [claude_record("u1", None, "user", "where do otters sleep")])
    (chats / "abandoned.jsonl").write_bytes(b"")
    (chats / "blank.jsonl").write_bytes(b"\xef\xbb\xbf\n\n")
    report = ingest_conversations(store, [chats])
    assert (report.added, report.failures, report.notices) == (1, [], [])
    alone = ingest_conversations(store, [chats / "abandoned.jsonl"])
    assert (alone.added, alone.failures, alone.notices) == (0, [], [])


def test_an_updated_export_cleans_only_the_conversations_that_changed(store, tmp_path, monkeypatch):
    # Masking every turn of a 45 MB export to update one conversation took 90% of the time: a session
    # read exactly as it was stored (its digest kept, nothing withheld from it) is not cleaned again.
    import crossmodalrag.connectors.chats as chats

    key = "sk-proj-" + "a1B2c3D4" * 5
    conversations = [("c1", "Cache", ["drop the cache"]), ("c2", "Keys", [f"use {key}"]), ("c3", "Tea", ["green"])]
    path = claude_ai_export(tmp_path / "conversations.json", conversations)
    ingest_conversations(store, [path])
    stored = dict(store.conn.execute("SELECT uri, json_extract(metadata, '$.raw_sha256') FROM sources").fetchall())
    # No digest of the conversation with a masked key: the key could be confirmed against it.
    assert stored[f"{path}@c2"] is None and stored[f"{path}@c1"] and stored[f"{path}@c3"]
    # Stored before digests were kept: c1 gets its digest back, read once more without being written.
    store.conn.execute("UPDATE sources SET metadata = json_set(metadata, '$.raw_sha256', NULL) WHERE uri LIKE '%@c1'")
    cleaned = []
    masking = chats.mask_secrets
    monkeypatch.setattr(chats, "mask_secrets", lambda text: (cleaned.append(text), masking(text))[1])
    claude_ai_export(path, [*conversations[:2], ("c3", "Tea", ["green", "and oolong"])])
    report = ingest_conversations(store, [path])
    assert (report.updated, report.unchanged) == (1, 2)
    assert sorted(cleaned) == sorted(["Cache", "drop the cache", "Keys", f"use {key}", "Tea", "green", "and oolong"])
    raw = "SELECT json_extract(metadata, '$.raw_sha256') FROM sources WHERE uri = ?"
    assert store.conn.execute(raw, (f"{path}@c1",)).fetchone()[0] == stored[f"{path}@c1"]
    assert "and oolong" in store.conn.execute("SELECT group_concat(text) FROM chunks").fetchone()[0]
