"""L1 events: extraction through a scripted model, validation and retry, provenance, incrementality."""

from __future__ import annotations

import json
import re
import time

import pytest

from crossmodalrag.errors import CMRAGError
from crossmodalrag.memory.events import Extraction, build_events, list_events
from crossmodalrag.memory.extract import MAX_EVENTS, event_schema, extract_window, parse_events
from crossmodalrag.memory.provenance import text_pieces
from crossmodalrag.memory.stats import memory_stats
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output, note, semantic_for

PARSER = note(
    "parser",
    "# Parser\n\nWe decided to replace the regex parser with a tokenizer because regexes backtracked.\n\n"
    "## Tests\n\nThe tokenizer fixed the catastrophic backtracking bug in nested emphasis.\n",
)


def test_events_link_to_the_exact_chunks_they_cite(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor(events_output(event("We decided to replace the regex parser with a tokenizer.", [1])))
    report = build(store, db_path, llm=llm, levels=("event",))
    assert report.levels["event"]["extracted"] == 1 and report.levels["event"]["llm_calls"] == 1
    (found,) = list_events(store)
    assert found["type"] == "decision" and found["supported"]
    cited = [e for e in found["evidence"] if e["role"] == "cited"]
    chunk_text = store.conn.execute("SELECT text FROM chunks WHERE id = ?", (cited[0]["chunk_id"],)).fetchone()[0]
    assert "regex parser" in chunk_text  # the [E1] excerpt of the prompt, not every chunk of the source
    assert cited[0]["locator"] and cited[0]["source_uri"] == "/vault/parser.md"
    assert llm.generations[0].json_schema == event_schema(2)  # constrained decoding was asked for
    assert list_events(store, source="/vault/parser.md") == [found]
    with pytest.raises(CMRAGError, match="no source '/vault/parsre.md'"):  # a typo is no empty list
        list_events(store, source="/vault/parsre.md")


def test_an_unchanged_memory_makes_no_model_call(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor(events_output(event("We decided to replace the regex parser with a tokenizer.")))
    build(store, db_path, llm=llm)
    again = build(store, db_path, llm=llm)
    assert len(llm.calls) == 1
    assert again.levels["event"]["unchanged"] == 1 and again.levels["episode"]["changed"] == 0


def test_invalid_output_is_retried_once_then_stored_as_failed(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor("not json at all", '{"events": [{"type": "decision"}]}')
    report = build(store, db_path, llm=llm, levels=("event",))
    assert len(llm.calls) == 2 and report.levels["event"]["extracted"] == 0  # counted as failed only
    (failed,) = report.levels["event"]["failed"]
    assert failed["uri"] == "/vault/parser.md" and "lacks" in failed["reason"]
    assert memory_stats(store)["sources"]["failed"][0]["uri"] == "/vault/parser.md"
    fixed = ScriptedExtractor(events_output(event("The tokenizer fixed the backtracking bug.", [2], "fix")))
    assert build(store, db_path, llm=fixed, levels=("event",)).levels["event"]["extracted"] == 1  # retried
    assert memory_stats(store)["sources"]["failed"] == []


def test_a_retry_that_validates_is_kept(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor("```json\n{oops", events_output(event("The tokenizer fixed the backtracking bug.", [2])))
    report = build(store, db_path, llm=llm, levels=("event",))
    assert report.levels["event"]["events"] == 1 and report.levels["event"]["llm_calls"] == 2


def test_an_event_no_chunk_supports_is_flagged_and_counted(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor(events_output(event("Bob adopted three kittens from the shelter in Lisbon.")))
    report = build(store, db_path, llm=llm, levels=("event",))
    assert report.levels["event"]["unsupported"] == 1
    (found,) = list_events(store)
    assert not found["supported"]
    assert memory_stats(store)["integrity"]["unsupported_events"] == 1


def test_without_a_model_commits_become_events_and_notes_wait(store, db_path, tmp_path) -> None:
    from crossmodalrag.types import Document

    commit = Document(
        "/repo@abc",
        "commit",
        "Fix nested emphasis",
        "Fix nested emphasis\n\nbody",
        "diff",
        "code",
        1_735_689_600.0,
        "repo@abc",
        {"repo": "/repo", "author": "Ada"},
    )
    add_docs(store, PARSER, commit)
    report = build(store, db_path, llm=None)
    assert report.levels["event"]["from_git"] == 1 and report.levels["event"]["waiting"] == 1
    # one source, and load_llm's "no language model (…)" not nested in the notice's brackets
    assert any("1 source waits for a language model (CMRAG_LLM_PROVIDER=none);" in n for n in report.notices)
    (found,) = list_events(store)
    assert found["statement"] == "Fix nested emphasis" and found["type"] == "change" and found["people"] == ["Ada"]
    assert report.levels["episode"]["episodes"] == 1  # the levels that can run still run
    # The commit's event has a vector (no provenance check made one), so concepts can use it
    assert report.levels["event"]["embedded"] == 1 and "skipped" not in report.levels["concept"]
    assert build(store, db_path, llm=None).levels["event"]["embedded"] == 0


def test_without_a_model_a_source_another_model_extracted_is_kept_not_waiting(store, db_path) -> None:
    add_docs(store, PARSER)
    build(
        store, db_path, llm=ScriptedExtractor(events_output(event("We replaced the regex parser."))), levels=("event",)
    )
    report = build(store, db_path, llm=None, levels=("event",))
    assert report.levels["event"]["waiting"] == 0 and report.levels["event"]["unchanged"] == 1
    assert len(list_events(store)) == 1 and not report.notices


def test_limit_bounds_a_run_and_newest_sources_go_first(store, db_path) -> None:
    add_docs(
        store, note("old", "# Old\n\nWe planned the release.", days=0), note("new", "# New\n\nWe shipped it.", days=5)
    )
    llm = ScriptedExtractor(events_output(event("We shipped the release to users.")))
    first = build(store, db_path, llm=llm, levels=("event",), **{})
    assert first.levels["event"]["extracted"] == 2  # no limit
    store.conn.execute("DELETE FROM memory_extractions")
    from crossmodalrag.config import Settings
    from crossmodalrag.memory.build import build_memory

    limited = build_memory(store, Settings(db_path=db_path, llm_provider="none"), ("event",), limit=1, llm=llm)
    assert limited.levels["event"]["extracted"] == 1 and limited.levels["event"]["pending"] == 1
    assert "new" in llm.calls[-1][-1]["content"]


class SlowExtractor(ScriptedExtractor):
    """Each call takes SLOW seconds, as a local model's does."""

    def stream(self, messages, generation):
        time.sleep(SLOW)
        yield from super().stream(messages, generation)


SLOW = 0.4
LONG = "# Long\n\n" + "\n\n".join(
    f"## Part {i}\n\n" + f"We shipped part {i} of the release to users after review. " * 12 for i in range(4)
)


def test_max_minutes_stops_between_the_windows_of_a_long_source_and_stores_none_of_it(store, db_path) -> None:
    """Four windows of 0.4 s against a 0.25 s budget: the run stops after the first, the source stays
    pending with nothing stored, and the next run extracts it whole."""
    add_docs(store, note("long", LONG))
    llm = SlowExtractor(events_output(event("We shipped part 0 of the release to users after review.")))
    cut = build_events(store, Extraction(llm, None, window_chars=700), max_minutes=0.25 / 60)
    assert (cut.extracted, cut.pending, cut.llm_calls) == (0, 1, 1)
    assert not store.conn.execute("SELECT COUNT(*) FROM memory_nodes").fetchone()[0]
    assert not store.conn.execute("SELECT COUNT(*) FROM memory_extractions").fetchone()[0]
    whole = build_events(store, Extraction(llm, None, window_chars=700))
    assert (whole.extracted, whole.pending, whole.llm_calls) == (1, 0, 4) and list_events(store)


def test_past_the_budget_concepts_are_named_without_the_model(store, db_path) -> None:
    """Events of two notes, then a third note whose one 0.4 s call runs past the 0.25 s budget (stopped,
    the note left for the next run): the concept the two form is named by its words, with no model call."""
    from crossmodalrag.config import Settings
    from crossmodalrag.memory.build import build_memory

    add_docs(store, note("a", "# A\n\nWe shipped the release."), note("b", "# B\n\nWe shipped the release.", days=2))
    llm = SlowExtractor(events_output(event("We shipped the release.")))
    settings, semantic = Settings(db_path=db_path, llm_provider="none"), semantic_for(store, db_path)
    build_memory(store, settings, ("event",), llm=llm, semantic=semantic)
    add_docs(store, note("c", "# C\n\nWe shipped the release.", days=4))
    report = build_memory(store, settings, max_minutes=0.25 / 60, llm=llm, semantic=semantic_for(store, db_path))
    assert report.levels["event"]["pending"] == 1 and report.levels["concept"]["concepts"] == 1
    assert report.levels["concept"]["llm_calls"] == 0
    assert any("time budget is spent" in notice for notice in report.notices)


def test_a_concept_level_build_takes_the_configured_model_to_name_concepts(store, db_path, monkeypatch) -> None:
    from crossmodalrag.memory import build as build_module
    from crossmodalrag.memory import concepts

    model, given = object(), []
    monkeypatch.setattr(build_module, "extraction_llm", lambda settings, chosen=None: (model, "", ""))
    real = concepts.build_concepts
    monkeypatch.setattr(
        concepts,
        "build_concepts",
        lambda store, threshold, llm, events, model: given.append(llm) or real(store, threshold, None, events, model),
    )
    add_docs(store, note("a", "# A\n\nWe shipped the release."), note("b", "# B\n\nWe shipped the release.", days=2))
    build(store, db_path, llm=ScriptedExtractor(events_output(event("We shipped the release."))), levels=("event",))
    build(store, db_path, levels=("concept",))
    assert given == [model]  # it named concepts by their words only, however a model was configured


def test_a_model_named_with_model_that_cannot_load_is_an_error_not_ignored(store, db_path) -> None:
    from crossmodalrag.config import Settings
    from crossmodalrag.errors import CMRAGError
    from crossmodalrag.memory.build import build_memory

    add_docs(store, note("a", "# A\n\nWe shipped the release."))
    with pytest.raises(CMRAGError, match="the model /nonexistent/m.gguf cannot be used"):
        build_memory(
            store, Settings(db_path=db_path), model="/nonexistent/m.gguf", semantic=semantic_for(store, db_path)
        )


def test_a_rechunked_source_is_reanchored_without_the_model(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor(events_output(event("The tokenizer fixed the backtracking bug.", [2], "fix")))
    build(store, db_path, llm=llm, levels=("event",))
    # A new chunker version: same text, new fingerprint, new chunk ids.
    source_id = store.conn.execute("SELECT id FROM sources").fetchone()[0]
    with store.transaction() as conn:
        old = conn.execute(
            "SELECT id, source_id, chunk_index, text, locator, char_start, char_end FROM chunks ORDER BY id"
        ).fetchall()
        conn.execute("DELETE FROM chunks")
        conn.executemany(
            "INSERT INTO chunks (id, source_id, chunk_index, text, locator, char_start, char_end)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(r[0] + 100, *r[1:]) for r in old],
        )
        conn.execute("UPDATE sources SET fingerprint = 'rechunked' WHERE id = ?", (source_id,))
    assert memory_stats(store)["integrity"]["nodes_without_evidence"] >= 1
    report = build(store, db_path, llm=llm, levels=("event",))
    assert report.levels["event"]["reanchored"] == 1 and len(llm.calls) == 1
    (found,) = list_events(store)
    assert {e["chunk_id"] for e in found["evidence"]} and all(e["chunk_id"] > 100 for e in found["evidence"])


def test_an_edited_source_without_a_model_keeps_only_the_events_its_text_still_says(store, db_path) -> None:
    add_docs(store, PARSER)
    kept, dropped = "We decided to replace the regex parser with a tokenizer.", "Nested emphasis no longer hangs."
    llm = ScriptedExtractor(events_output(event(kept, [1]), event(dropped, [2], "fix")))
    build(store, db_path, llm=llm, levels=("event",))
    add_docs(store, note("parser", "# Parser\n\nWe decided to replace the regex parser with a tokenizer, fast.\n"))
    report = build(store, db_path, levels=("event",))
    assert report.levels["event"]["rechecked"] == 1 and report.levels["event"]["waiting"] == 1
    assert report.levels["event"]["events_waiting"] == 1 == memory_stats(store)["integrity"]["events_waiting_for_model"]
    found = {e["statement"]: e for e in list_events(store)}
    assert found[kept]["supported"] and found[kept]["evidence"]
    assert not found[dropped]["supported"] and found[dropped]["waiting"]  # kept, shown, out of retrieval
    assert build(store, db_path, levels=("event",)).levels["event"]["rechecked"] == 0, "checked once"
    again = ScriptedExtractor(events_output(event(kept, [1])))
    assert build(store, db_path, llm=again, levels=("event",)).levels["event"]["extracted"] == 1
    assert [e["statement"] for e in list_events(store)] == [kept]


RENDER_CACHE = (
    "# Render cache notes\n\nProblem: cache invalidation bugs, fonts changed but pages stayed stale (reported by"
    " Priya on 24 Sep).\n\n## Decision\n\n{}\n"
)
DROPPED = "On 2026-10-01 we dropped the render cache. Rendering is now fast enough (0.8 s per 100 pages)."
REVERTED = "Update 2026-10-03: we reverted the removal and kept the render cache after all; 40 s renders without it."


def test_an_edit_without_a_model_holds_back_the_events_of_a_changed_chunk_unless_its_text_says_them(
    store, db_path
) -> None:
    """Closeness by embedding is no test that an edited text still says an event: a reversed decision
    is on the same topic (MiniLM 0.64 for the dropped cache against "we kept the render cache")."""
    add_docs(store, note("render", RENDER_CACHE.format(DROPPED)))
    dropped, fast = "The team dropped the render cache on 2026-10-01.", "Rendering takes 0.8 s per 100 pages."
    unchanged = "Priya reported stale pages after fonts changed."  # rests on the first chunk, left as it was
    llm = ScriptedExtractor(events_output(event(dropped, [2]), event(fast, [2], "fact"), event(unchanged, [1], "fix")))
    build(store, db_path, llm=llm, levels=("event",))
    assert all(e["supported"] for e in list_events(store))
    add_docs(store, note("render", RENDER_CACHE.format(REVERTED)))
    report = build(store, db_path, levels=("event",)).levels["event"]
    found = {e["statement"]: e for e in list_events(store)}
    assert [found[s]["waiting"] for s in (dropped, fast, unchanged)] == [True, True, False]
    assert not found[dropped]["supported"] and not found[fast]["supported"] and found[unchanged]["supported"]
    assert "cited" in {e["role"] for e in found[unchanged]["evidence"]}  # its own chunk, found unchanged
    assert report["events_waiting"] == 2 and report["unsupported"] == 0
    stats = memory_stats(store)["integrity"]
    assert stats["events_waiting_for_model"] == 2 and stats["unsupported_events"] == 0
    add_docs(store, note("render", RENDER_CACHE.format(DROPPED)))  # edited back: what it rested on is there again
    build(store, db_path, levels=("event",))
    assert all(e["supported"] and not e["waiting"] for e in list_events(store))


def test_an_edited_line_that_still_holds_an_events_words_keeps_it() -> None:
    from crossmodalrag.memory.provenance import says_verbatim

    edited = "Problem: fonts changed but pages stayed stale in the cache (reported by Priya).\n\n" + REVERTED
    assert says_verbatim("Priya reported stale pages in the cache.", edited)
    assert not says_verbatim("The team dropped the render cache on 2026-10-01.", edited)
    assert not says_verbatim("Renders take 0.8 s without the cache.", edited)  # 40 s, not 0.8 s
    assert not says_verbatim("We dropped the cache.", "We did not drop the cache.")


@pytest.mark.parametrize(
    ("raw", "ok"),
    [
        (
            '```json\n{"events": [{"event": "Fixed the parser bug.", "type": "Fix", "cite": ["E1"]},]}\n```',
            True,
        ),
        (
            '{"events": [{"event": "Fixed the parser bug.", "type": "fix", "cite": [7]}]}',
            False,
        ),
        (
            '{"events": [{"event": "Fixed the parser bug.", "type": "rumour", "cite": [1]}]}',
            False,
        ),
        (json.dumps({"events": [event("Fixed the parser bug.")] * (MAX_EVENTS + 1)}), False),
    ],
)
def test_parse_repairs_syntax_but_rejects_bad_content(raw: str, ok: bool) -> None:
    if ok:
        (parsed,) = parse_events(raw, 2)
        assert parsed.type == "fix" and parsed.cited == [0]
    else:
        with pytest.raises(ValueError):
            parse_events(raw, 2)


def test_an_output_cut_off_at_the_token_limit_keeps_its_whole_events() -> None:
    whole = json.dumps(event("Fixed the parser bug.")) + ', {"event": "Planned a \\"big\\" }], release'
    (parsed,) = parse_events('{"events": [' + whole, 2)
    assert parsed.statement == "Fixed the parser bug."
    ann, ben = json.dumps(event("Ann fixed the parser bug.")), json.dumps(event("Ben shipped the fix."))
    by_person = parse_events(f'{{"Ann": [{ann}], "Ben": [{ben}, {{"ev', 2, ["Ann", "Ben"])
    assert [e.statement for e in by_person] == ["Ann fixed the parser bug.", "Ben shipped the fix."]
    with pytest.raises(ValueError):
        parse_events('{"events": [{"event": "Fixed the', 2)


def test_events_that_copy_the_answer_shape_are_dropped() -> None:
    llm = ScriptedExtractor(events_output(event("<one sentence><type><type>."), event("Fixed the parser bug.")))
    result = extract_window(llm, "Parser", "2025-03-01", ["We fixed the parser bug.", "Done."])
    assert [e.statement for e in result.events] == ["Fixed the parser bug."]


def test_a_chinese_or_japanese_sentence_can_close_its_statement_at_its_full_stop() -> None:
    one_sentence = event_schema(2)["properties"]["events"]["items"]["properties"]["event"]["pattern"]
    assert re.fullmatch(one_sentence, "田中さんが移行計画を来週までに作成します。")
    assert re.fullmatch(one_sentence, "今天决定重写解析器，因为旧的解析器太慢了！")
    assert not re.fullmatch(one_sentence, "今天决定重写解析器。新的版本使用 Pratt parsing。")  # two sentences
    assert re.fullmatch(one_sentence, "Ada moved her blog to Hugo 0.5.") and not re.fullmatch(
        one_sentence, "Ada ran. Ok."
    )


def test_tags_written_after_a_sentence_are_cut_and_a_looping_statement_is_dropped() -> None:
    padded = "今天决定重写解析器，因为旧的解析器太慢了。 #重构#2024-03-05#E1#E2#E3#E4."
    looping = "田中さんは計画を作成します #移行#移行#移行#移行#移行#移行."
    kept = "Ada fixed bug #12 in the parser."
    llm = ScriptedExtractor(events_output(event(padded), event(looping), event(kept)))
    result = extract_window(llm, "解析器", "2024-03-05", ["今天决定重写解析器。", "田中さん"])
    assert [e.statement for e in result.events] == ["今天决定重写解析器，因为旧的解析器太慢了。", kept]


def test_a_model_error_fails_that_source_and_the_run_goes_on(store, db_path) -> None:
    from crossmodalrag.answer.llm.base import LLMError

    add_docs(store, PARSER, note("other", "# Other\n\nWe planned the release."))
    llm = ScriptedExtractor(events_output(event("We planned the release for September.")))
    llm.fail, llm.fail_after = LLMError("generation passed CMRAG_LLM_TIMEOUT (120 s)"), None
    report = build(store, db_path, llm=llm, levels=("event",))
    assert len(report.levels["event"]["failed"]) == 2 and report.levels["event"]["extracted"] == 0
    assert all("timeout" in f["reason"].lower() for f in report.levels["event"]["failed"])
    assert report.levels["event"]["llm_calls"] == 2 and report.levels["event"]["prompt_chars"] > 1000  # kept
    calls, tokens = store.conn.execute("SELECT SUM(llm_calls), SUM(prompt_tokens) FROM memory_extractions").fetchone()
    assert calls == 2 and tokens > 250


def test_limit_counts_a_failed_source_as_work_done(store, db_path) -> None:
    from crossmodalrag.answer.llm.base import LLMError
    from crossmodalrag.config import Settings
    from crossmodalrag.memory.build import build_memory

    add_docs(store, PARSER, note("other", "# Other\n\nWe planned the release."))
    llm = ScriptedExtractor(events_output(event("We planned the release for September.")))
    llm.fail, llm.fail_after = LLMError("generation passed CMRAG_LLM_TIMEOUT (120 s)"), None
    options = Settings(db_path=db_path, llm_provider="none")
    report = build_memory(store, options, ("event",), limit=1, llm=llm, semantic=semantic_for(store, db_path))
    assert len(report.levels["event"]["failed"]) == 1 and report.levels["event"]["pending"] == 1


class PastTheBudget(ScriptedExtractor):
    """Sends its first piece, then runs past the call's deadline before the rest: a server, or any
    backend that cannot stop mid-computation itself."""

    def stream(self, messages, generation):
        pieces = super().stream(messages, generation)
        yield next(pieces)
        while generation.deadline is not None and time.monotonic() <= generation.deadline:
            time.sleep(0.01)
        yield from pieces


def test_a_model_call_running_past_max_minutes_is_stopped_and_its_source_left_for_the_next_run(store, db_path) -> None:
    """--max-minutes 0.6 took 2 minutes on one 7.7 KB note (one call), then failed it on the timeout."""
    from crossmodalrag.answer.llm.base import LLMOutOfTime

    add_docs(store, PARSER)
    llm = PastTheBudget(events_output(event("We decided to replace the regex parser with a tokenizer.")))
    cut = build_events(store, Extraction(llm, None), max_minutes=0.25 / 60)
    assert (cut.extracted, cut.pending, cut.failed, cut.llm_calls) == (0, 1, [], 1) and cut.prompt_chars > 0
    assert not store.conn.execute("SELECT COUNT(*) FROM memory_extractions").fetchone()[0]  # not failed: untried
    stopping = ScriptedExtractor("{}")
    stopping.fail = LLMOutOfTime("the model call was stopped at the time budget")
    itself = build_events(store, Extraction(stopping, None), max_minutes=0.25 / 60)  # llama.cpp stops itself
    assert (itself.pending, itself.failed, itself.llm_calls) == (1, [], 1)
    whole = build_events(store, Extraction(llm, None))  # no budget: no deadline on the call
    assert (whole.extracted, whole.pending) == (1, 0) and list_events(store)


def test_an_event_drawn_from_one_line_of_a_list_is_supported_by_that_line(store, db_path) -> None:
    steps = [
        "Publish the plugin API spec after the release",
        "Benchmark nested emphasis in the tokenizer",
        "Write the migration guide for plugin authors",
        "Rotate the staging deploy keys every month",
        "Archive the old documentation website",
        "Move the nightly build to the new runners",
    ]
    board = note("board", "# Whiteboard\n\nNext steps:\n" + "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 1)))
    add_docs(store, board)
    llm = ScriptedExtractor(events_output(event("The team will benchmark nested emphasis in the tokenizer.", [1])))
    # The test embedder scores the event 0.56 against the whole list and 0.88 against its line.
    build(store, db_path, llm=llm, levels=("event",), event_support_min_cosine=0.7)
    (found,) = list_events(store)
    assert found["supported"] and found["confidence"] >= 0.8


def test_a_chunk_is_checked_by_line_and_a_turn_by_sentence_with_its_speaker() -> None:
    body = "Ann: We moved to Lisbon in May. The kids love the beach! Work is busy.\n- ship the v2 docs\nok\n"
    body += "2. 2023 was good\n"
    assert text_pieces(body) == [
        body.strip(),
        "Ann: We moved to Lisbon in May. The kids love the beach! Work is busy.",
        "Ann: We moved to Lisbon in May.",
        "Ann: The kids love the beach!",
        "Ann: Work is busy.",
        "ship the v2 docs",
        "2023 was good",
    ]


def test_an_event_drawn_from_one_sentence_of_a_long_turn_is_supported_and_linked_to_it(store, db_path) -> None:
    turn = (
        "Ann: Guess what happened this spring, it was a whirlwind for the whole family. We finally moved "
        "the family to Lisbon in May. The kids adore the beach near the flat and the school is lovely. "
        "Work has been busy with the quarterly reports and endless meetings."
    )
    chat = note("chat", f"# Chat\n\n{turn}\n\nBen: Congratulations, that sounds wonderful for all of you.\n")
    add_docs(store, chat)
    llm = ScriptedExtractor(events_output(event("Ann moved the family to Lisbon in May.", [1])))
    build(store, db_path, llm=llm, levels=("event",), event_support_min_cosine=0.7)
    (found,) = list_events(store)
    assert found["supported"] and found["confidence"] >= 0.7
    assert any("Lisbon" in e["excerpt"] for e in found["evidence"]) and len(found["evidence"]) <= 3


def test_an_event_restating_an_earlier_one_of_its_source_is_dropped(store, db_path) -> None:
    add_docs(store, PARSER)
    llm = ScriptedExtractor(
        events_output(
            event("We decided to replace the regex parser with a tokenizer.", [1]),
            event("We decided to replace the regex parser with a tokenizer today.", [1]),  # a restatement
            event("The tokenizer fixed the catastrophic backtracking bug.", [2], kind="fix"),
        )
    )
    build(store, db_path, llm=llm, levels=("event",))
    assert sorted(e["statement"] for e in list_events(store)) == [
        "The tokenizer fixed the catastrophic backtracking bug.",
        "We decided to replace the regex parser with a tokenizer.",
    ]


def add_chat(store) -> None:
    from pathlib import Path

    from crossmodalrag.connectors.chats import Session, Turn, session_document

    turns = [
        Turn("Maria", "I adopted a puppy from the shelter last week, her name is Coco.", "D1:1"),
        Turn("John", "Congrats! I ran a 5K for the veterans on Saturday.", "D1:2"),
        Turn("Maria", "Wow, well done John!", "D1:3"),
    ]
    chat = Session("s1", "Maria & John", "locomo", turns, timestamp=1_735_689_600.0)
    add_docs(store, session_document(Path("/chats/locomo.json"), chat))


def test_a_conversation_lists_events_under_each_speaker_and_dates_them_from_the_source(store, db_path) -> None:
    add_chat(store)
    llm = ScriptedExtractor(
        {
            "Maria": [event("Maria adopted a puppy named Coco from the shelter.", [1], "change")],
            "John": [event("John ran a 5K for the veterans with Maria cheering.", [2], "fact")],
        }
    )
    build(store, db_path, llm=llm, levels=("event",))
    schema = llm.generations[0].json_schema
    assert schema["required"] == ["Maria", "John"]  # most turns first
    one_sentence = schema["properties"]["John"]["items"]["properties"]["event"]["pattern"]
    assert re.fullmatch(one_sentence, "John ran a 5K for the veterans!")
    assert not re.fullmatch(one_sentence, "John ran a 5K. It was fun.")  # a copied turn, not one sentence
    assert not re.fullmatch(one_sentence, 'John watched "Up') and not re.fullmatch(one_sentence, "John ran")
    assert '"John":[{"event":"<one sentence on John>"' in llm.calls[0][-1]["content"]  # the shape, spelled out
    found = {e["statement"]: e for e in list_events(store)}
    assert found["Maria adopted a puppy named Coco from the shelter."]["people"] == ["Maria"]
    assert found["John ran a 5K for the veterans with Maria cheering."]["people"] == ["John", "Maria"]
    when = store.conn.execute("SELECT metadata FROM memory_nodes WHERE level = 'event'").fetchone()[0]
    assert json.loads(when)["when"] == "2025-01-01"  # the source's date, not asked of the model


def test_speakers_need_names_the_grammar_can_carry() -> None:
    from crossmodalrag.memory.extract import speakers

    assert list(speakers(["Ben: yo\nAnn: hi", "Ann: so"]).items()) == [("Ann", 2), ("Ben", 1)]
    assert speakers(["user: fix it", "assistant: done"]) == {"user": 1, "assistant": 1}
    assert speakers(['Dr. "X": hi']) == {} and speakers(["no turns here"]) == {}
    assert speakers([f"P{chr(97 + i)}: hi" for i in range(5)]) == {}  # too many for one list each
    schema = event_schema(12, {"user": 8, "assistant": 1})["properties"]
    assert (schema["user"]["minItems"], schema["assistant"]["minItems"]) == (2, 0)  # one turn: no event forced
    assert schema["user"]["maxItems"] + schema["assistant"]["maxItems"] == MAX_EVENTS


def test_a_statement_is_read_under_its_speaker_and_the_shape_is_checked() -> None:
    raw = json.dumps({"Ann": [event("Ann moved to Lisbon with Ben.")], "Ben": []})
    (parsed,) = parse_events(raw, 1, ["Ann", "Ben"])
    assert parsed.people == ["Ann", "Ben"] and parsed.statement == "Ann moved to Lisbon with Ben."
    with pytest.raises(ValueError, match="Ben"):
        parse_events(json.dumps({"Ann": []}), 1, ["Ann", "Ben"])


def test_one_event_given_to_both_speakers_is_kept_once_for_the_one_who_told_it(store, db_path) -> None:
    add_chat(store)
    llm = ScriptedExtractor(
        {
            "Maria": [event("Maria ran a 5K for the veterans.", [2], "fact")],  # John's turn
            "John": [event("John ran a 5K for the veterans.", [2], "fact")],
        }
    )
    build(store, db_path, llm=llm, levels=("event",))
    assert [e["statement"] for e in list_events(store)] == ["John ran a 5K for the veterans."]


def test_an_event_copied_from_the_prompts_example_is_dropped(store, db_path) -> None:
    add_docs(store, PARSER)
    copied = event("Ben signed up for the Berlin marathon.", [1])  # the example's, not this note's
    llm = ScriptedExtractor(events_output(copied, event("We decided to replace the regex parser.", [1])))
    build(store, db_path, llm=llm, levels=("event",))
    assert [e["statement"] for e in list_events(store)] == ["We decided to replace the regex parser."]


def test_a_line_inside_a_turn_such_as_note_is_no_speaker() -> None:
    from crossmodalrag.memory.extract import speakers

    window = ["Ann: I booked the venue.\nNote: bring snacks", "Ben: great", "Ann: see you"]
    assert speakers(window) == {"Ann": 2, "Ben": 1}  # "Note" starts one line inside Ann's turn
    assert speakers(["Ann: a\nNote: x\nNote: y", "Ben: b"])["Note"] == 2  # a name on two lines still counts


def test_tool_output_in_a_coding_session_is_no_speaker() -> None:
    from crossmodalrag.memory.extract import speakers

    window = ["user: start the server", "tool: $ mix phx.server\n[info] Running", "assistant: it runs", "tool: ok"]
    assert speakers(window) == {"user": 1, "assistant": 1}
    assert speakers(["tool: $ ls", "tool: README.md"]) == {}  # only output: one flat list, no person


def test_a_talkative_speaker_must_give_more_events_within_the_cap() -> None:
    two = event_schema(20, {"Ann": 10, "Ben": 9})["properties"]
    assert (two["Ann"]["minItems"], two["Ben"]["minItems"]) == (3, 3)  # one per three turns, at most 3
    four = event_schema(40, {"A": 10, "B": 10, "C": 10, "D": 10})["properties"]
    assert all(lists["minItems"] == lists["maxItems"] == 2 for lists in four.values())  # never above the cap


def test_an_event_of_both_speakers_goes_to_the_one_it_is_listed_under() -> None:
    from crossmodalrag.memory.extract import Extracted, attributed

    people = {"Ann": 2, "Ben": 1}
    both = attributed(Extracted("fact", "Ann and Ben were on a road trip.", ["Ann", "Ben"], [0]), people)
    assert (both.statement, both.people) == ("Ann was on a road trip.", ["Ann"])
    assert both.written == "Ann and Ben were on a road trip."  # the model's sentence, kept
    kept = [
        Extracted("fact", "Ann and Ben have met before.", ["Cy"], [0]),  # listed under neither of them
        Extracted("fact", "Ann drove to the Grand Canyon with Ben.", ["Ann", "Ben"], [0]),  # one subject
    ]
    assert [attributed(e, people) for e in kept] == kept


def test_reported_questions_and_shared_photos_are_dropped_and_a_corrected_subject_keeps_the_models_sentence(
    store, db_path
) -> None:
    add_chat(store)
    llm = ScriptedExtractor(
        {
            "Maria": [event("Maria asked John if he had any pets.", [2], "fact"),
                      event("Maria shared a photo of her puppy with John.", [1], "fact"),
                      event("Maria and John adopted a puppy named Coco.", [1], "change")],
            "John": [event("John ran a 5K for the veterans on Saturday.", [2], "fact")],
        }
    )  # fmt: skip
    build(store, db_path, llm=llm, levels=("event",))
    found = {e["statement"]: e["people"] for e in list_events(store)}
    assert found == {
        "Maria adopted a puppy named Coco.": ["Maria"],
        "John ran a 5K for the veterans on Saturday.": ["John"],
    }
    written = [json.loads(row[0]).get("written") for row in store.conn.execute("SELECT metadata FROM memory_nodes")]
    assert sorted(filter(None, written)) == ["Maria and John adopted a puppy named Coco."]


@pytest.mark.parametrize(
    ("statement", "reported"),
    [
        ("user asked if mix phx.server does not start.", True),
        ("user asks if mix phx.server doesn't seem to start.", True),
        ("Ann asks Ben whether he moved.", True),
        ("Ann is asking Ben about the venue.", True),
        ("Ben wondered if the build was cached.", True),
        ("Ann asked Bob to review the parser PR.", False),  # a task: nothing asked about
        ("Ann will ask the landlord about the lease.", False),  # a plan
        ("Ben asked for a raise and got it.", False),
    ],
)
def test_a_question_reported_in_any_tense_is_no_event(statement: str, reported: bool) -> None:
    from crossmodalrag.memory.extract import no_event

    assert no_event(statement) is reported


def test_a_source_a_little_over_one_window_is_cut_in_two_halves() -> None:
    from crossmodalrag.memory.sources import ChunkRow, windows

    turns = [ChunkRow(i, f"title\n{'x' * 99}", 100 * i, 100 * i + 99) for i in range(47)]  # 4,653 characters
    assert [len(group) for group in windows(turns, 4500)] == [23, 24]  # not 45 + 2
    assert [len(group) for group in windows(turns, 5000)] == [47]  # one window when it fits
    assert [len(group) for group in windows(turns, 1000)] == [9, 10, 9, 10, 9]  # as few as fit, none above the limit


def test_a_shared_photos_caption_stays_in_its_chunk_and_out_of_the_prompt(store, db_path) -> None:
    from pathlib import Path

    from crossmodalrag.connectors.chats import Session, Turn, session_document

    caption = " [shares a photo: a puppy on a couch]"  # as ingest-chat appends it to a LoCoMo turn
    turns = [Turn("Maria", "Meet Coco, I adopted her last week!" + caption, "D1:1"), Turn("John", "So cute!", "D1:2")]
    add_docs(store, session_document(Path("/chats/c.json"), Session("s1", "Maria & John", "locomo", turns)))
    llm = ScriptedExtractor({"Maria": [event("Maria adopted a puppy named Coco.", [1], "change")], "John": []})
    build(store, db_path, llm=llm, levels=("event",))
    prompt = llm.calls[0][-1]["content"]
    assert "Meet Coco, I adopted her last week!" in prompt and "shares a photo" not in prompt
    assert store.conn.execute("SELECT count(*) FROM chunks WHERE text LIKE '%shares a photo: a puppy%'").fetchone()[0]
    assert [e["statement"] for e in list_events(store)] == ["Maria adopted a puppy named Coco."]


def test_one_event_given_to_both_speakers_goes_to_the_one_whose_turn_says_it_even_when_both_cite_their_own(
    store, db_path
) -> None:
    add_chat(store)
    llm = ScriptedExtractor(
        {  # each copy cites a turn of its own person: Maria's listed first, John's turn says it
            "Maria": [event("Maria ran a 5K for the veterans on Saturday.", [1, 2], "fact")],
            "John": [event("John ran a 5K for the veterans on Saturday.", [1, 2], "fact")],
        }
    )
    build(store, db_path, llm=llm, levels=("event",))
    assert [e["statement"] for e in list_events(store)] == ["John ran a 5K for the veterans on Saturday."]


def add_talk(store) -> None:
    from pathlib import Path

    from crossmodalrag.connectors.chats import Session, Turn, session_document

    said = [
        ("Ann", "I finally moved to Lisbon with the kids last month."),
        ("Ben", "Lisbon, wow! I started pottery classes downtown on Mondays."),
        ("Ann", "Pottery sounds fun. Lisbon is lovely and the school is great."),
        ("Ben", "My first bowl came out lopsided but I love it."),
        ("Ann", "Ha, keep going with it!"),
        ("Ben", "I will, the teacher says I improve fast."),
    ]
    turns = [Turn(name, text, f"D1:{i}") for i, (name, text) in enumerate(said, 1)]
    add_docs(store, session_document(Path("/chats/talk.json"), Session("s1", "Ann & Ben", "locomo", turns)))


def test_a_speaker_left_without_an_event_costs_no_second_call(store, db_path) -> None:
    # One call per window (issue 11): a second call on the silent speaker's own turns was measured in
    # session 8 (docs/benchmarks.md) and gained nothing on the held-out trial sessions.
    add_talk(store)
    llm = ScriptedExtractor(
        {  # the model lists Ann's move under Ben too: the copy is dropped and Ben has no event left
            "Ann": [event("Ann moved to Lisbon with the kids last month.", [1], "change")],
            "Ben": [event("Ben moved to Lisbon with the kids last month.", [1], "change")],
        },
        {"Ben": [event("Ben started pottery classes downtown on Mondays.", [1], "decision")]},
    )
    report = build(store, db_path, llm=llm, levels=("event",))
    assert report.levels["event"]["llm_calls"] == 1 and len(llm.calls) == 1
    assert [e["statement"] for e in list_events(store)] == ["Ann moved to Lisbon with the kids last month."]


def test_no_second_call_when_every_speaker_kept_an_event(store, db_path) -> None:
    add_talk(store)
    llm = ScriptedExtractor(
        {
            "Ann": [event("Ann moved to Lisbon with the kids last month.", [1], "change")],
            "Ben": [event("Ben started pottery classes downtown on Mondays.", [2], "decision")],
        }
    )
    assert build(store, db_path, llm=llm, levels=("event",)).levels["event"]["llm_calls"] == 1


def test_a_journal_notes_events_are_dated_by_their_entrys_heading_not_the_file(store, db_path) -> None:
    """One note kept as a journal (## 2024-03-05, ## March 7, 2024): every event was dated by the file,
    so a month of entries fell on one day in the timeline and in `mem events`."""
    journal = note(
        "journal",
        "# Journal\n\n## 2024-03-05\nWe decided to move the billing job to Tuesdays.\n\n"
        "## March 7, 2024\nAna fixed the flaky login test.\n",
    )
    add_docs(store, journal)
    said = [row[0] for row in store.conn.execute("SELECT said_at FROM chunks ORDER BY chunk_index")]
    assert said == [1_709_596_800.0, 1_709_769_600.0]  # 2024-03-05 and 2024-03-07, UTC midnight
    llm = ScriptedExtractor(
        events_output(
            event("We decided to move the billing job to Tuesdays.", [1]),
            event("Ana fixed the flaky login test.", [2], kind="change"),
        )
    )
    build(store, db_path, llm=llm, levels=("event",))
    times = dict(store.conn.execute("SELECT statement, first_time FROM memory_nodes WHERE level = 'event'"))
    assert times == {
        "We decided to move the billing job to Tuesdays.": 1_709_596_800.0,
        "Ana fixed the flaky login test.": 1_709_769_600.0,
    }
    assert "(2024-03-05)" in llm.calls[0][0]["content"] + llm.calls[0][-1]["content"]  # the window's own day


def test_a_statement_the_grammar_cut_at_its_length_cap_ends_at_a_whole_word() -> None:
    """The grammar forces an end mark at MAX_STATEMENT characters: "... which still only happens with Weasy."."""
    from crossmodalrag.memory.extract import MAX_STATEMENT

    long = "After that I spent most of the morning reviewing pull requests for the exporter and answering questions"
    long += " in the support channel about the broken footnote rendering, which still only happens with WeasyPrint"
    cut = long[: MAX_STATEMENT - 1] + "."
    assert cut.endswith("with Weasy.")
    (parsed,) = parse_events(json.dumps(events_output(event(cut))), 1)
    assert parsed.statement == long[: long.rindex(" with ")] + " with …"
    whole = "We decided to replace the regex parser with a tokenizer."
    assert parse_events(json.dumps(events_output(event(whole))), 1)[0].statement == whole


def test_a_cut_statement_holding_a_mark_inside_a_word_still_ends_at_a_whole_word() -> None:
    """The grammar counts "?f" as one unit, so its cut statement is 201 characters: "/alerts" became "/alert."."""
    from crossmodalrag.memory.extract import MAX_STATEMENT

    long = "The public read API plan is outlined for July 15 with FastAPI service in front of DuckDB, rate limited"
    long += " to 60 requests per minute per key, endpoints /stations, /stations/{id}/readings?from=&to=, /alerts."
    cut = long[:MAX_STATEMENT] + "."
    assert len(cut) == MAX_STATEMENT + 1 and cut.endswith(" /alert.")
    (parsed,) = parse_events(json.dumps(events_output(event(cut))), 1)
    assert parsed.statement.endswith("/readings?from=&to= …")


def test_events_are_embedded_in_small_batches_each_committed(store, db_path, monkeypatch) -> None:
    """4,000 commits' events were embedded in one model call padded into one tensor: 3.5 GB peak."""
    from crossmodalrag.memory import events as events_module
    from crossmodalrag.types import Document
    from tests.fakes import HashingEmbedder

    monkeypatch.setattr(events_module, "EVENTS_PER_COMMIT", 5)
    commits = [
        Document(
            f"/repo@{n:03x}", "commit", f"Fix bug {n}", f"Fix bug {n}\n\nbody", "diff", "code", 1e9 + n, f"r@{n}", {}
        )
        for n in range(12)
    ]
    add_docs(store, *commits)
    embedder = HashingEmbedder()
    semantic = semantic_for(store, db_path, embedder)
    monkeypatch.setattr(events_module, "EVENT_EMBED_BATCH", 4)
    before = len(embedder.calls)
    report = build(store, db_path, llm=None, semantic=semantic)
    assert report.levels["event"]["embedded"] == 12
    assert embedder.calls[before:] == [4, 1, 4, 1, 2]  # 12 events: 5 + 5 + 2 per commit, 4 a call
    assert not store.conn.execute("SELECT COUNT(*) FROM memory_nodes WHERE vector IS NULL").fetchone()[0]
