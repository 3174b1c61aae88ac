"""What long runs say on stderr when no terminal shows a live line, and how --explain reads a score."""

from __future__ import annotations

import io
from types import SimpleNamespace

from crossmodalrag.cli.progress import EmbedProgress, ExtractProgress, ProgressLine


def test_a_large_embedding_backlog_is_announced_once_without_a_terminal():
    out = io.StringIO()  # not a TTY: no live line
    progress = EmbedProgress(out)
    progress(SimpleNamespace(chunks=64, seconds=8.0), 22_000)
    progress(SimpleNamespace(chunks=128, seconds=16.0), 22_000)
    assert out.getvalue() == (
        "embedding 22,000 chunks that have no vector yet, about 46 min"
        " (stopping is safe: `mem reindex-embeddings` goes on from there)\n"
    )
    small = io.StringIO()
    EmbedProgress(small)(SimpleNamespace(chunks=5, seconds=1.0), 5)
    assert small.getvalue() == ""


def test_event_extraction_without_a_terminal_says_what_it_does_and_then_how_far_it_is(monkeypatch):
    """A 17-minute `mem build-memory` into a log left it empty: a pipe gets an opening line and a
    plain count every EVERY seconds (here every call), never a redraw."""
    out = io.StringIO()
    progress = ExtractProgress(out)
    monkeypatch.setattr(progress, "EVERY", 0.0)
    progress(0, 40, "first note", 0)
    progress(3, 40, "fourth note", 1)
    lines = out.getvalue().splitlines()
    assert lines[0] == "events: extracting from 40 sources (--max-minutes bounds the run; stopping keeps what is done)"
    assert lines[1].startswith("events: 3/40 sources, 1 failed, ETA ") and "\r" not in out.getvalue()
    quiet = io.StringIO()
    paced = ExtractProgress(quiet)  # the default pace: two calls in a row give the opening line only
    paced(0, 40, "a", 0)
    paced(1, 40, "b", 0)
    assert len(quiet.getvalue().splitlines()) == 1
    one = io.StringIO()
    ExtractProgress(one)(0, 1, "a", 0)  # `--limit 1`: it said "extracting from 1 sources"
    assert one.getvalue().startswith("events: extracting from 1 source (")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_embedding_line_says_about_how_long_is_left(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "120")
    out = Terminal()
    EmbedProgress(out)(SimpleNamespace(chunks=512, seconds=160.0), 335_394)  # 3.2 chunks/s
    assert out.getvalue() == "\r\033[Kembedding: 512/335394 chunks (3.2/s, about 29 h 04 min left)"


def test_a_live_line_fits_a_narrow_terminal_and_a_dumb_one_gets_none(monkeypatch):
    """A redraw wider than the terminal wraps, and `\r` then leaves its first row behind; TERM=dumb
    shows the erase sequence as text."""
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "20")
    out = Terminal()
    line = ProgressLine("ingest-notes", out)
    line(SimpleNamespace(added=218, updated=0, unchanged=0, failed=1))
    assert out.getvalue() == "\r\033[K" + "ingest-notes: 218 stored, 0 unchanged, 1 failed"[:19]
    monkeypatch.setenv("TERM", "dumb")
    dumb = Terminal()
    ProgressLine("ingest-notes", dumb)(SimpleNamespace(added=218, updated=0, unchanged=0, failed=1))
    assert dumb.getvalue() == ""


def test_an_ingest_error_starts_its_own_line_after_the_live_one(monkeypatch, tmp_path, capsys):
    from crossmodalrag.cli import ingest as cli_ingest

    monkeypatch.setenv("TERM", "xterm-256color")
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    line = ProgressLine("ingest-notes", err)
    report = SimpleNamespace(
        added=1,
        updated=0,
        unchanged=0,
        failed=1,
        failures=["bad.md: not valid UTF-8"],
        notices=[],
        removed=0,
        chunks=0,
        summary=lambda: "1 added, 1 failed",
    )
    line(report)
    monkeypatch.setattr(cli_ingest, "embedding_due", lambda store, new_chunks: False)  # no store here
    args = SimpleNamespace(json=False)
    assert cli_ingest._finish_ingest(args, report, line, store=None) == 1
    drawn, rest = err.getvalue().split("\r\033[K", 2)[1:]
    assert rest.startswith("error: bad.md")  # not "… 1 failederror: bad.md"


def test_explain_at_a_memory_level_shows_the_score_it_ranked_by():
    from crossmodalrag.cli.render import explain_line
    from crossmodalrag.types import Hit

    hit = Hit(1, "/v/a.md", "note", "text", "A", "a.md", "crumb\nbody", None, score=0.016,
              components={"bm25": 2.0, "lexical": 1.0, "recency": 0.5, "level": 0.016})  # fmt: skip
    line = explain_line(hit, {"lexical": 0.85, "recency": 0.15})
    assert "score = level 0.0160 (ranked through the memory level's nodes) → 0.016" in line and "×lexical" not in line


def test_control_characters_reach_the_terminal_escaped_and_json_as_they_are(tmp_path, capsys, monkeypatch):
    """A file name's newline broke `mem sources` into two lines; an escape sequence in a note
    (here: clear the screen) reached the terminal raw through `mem ask`."""
    import json

    from crossmodalrag.cli.main import main
    from tests.conftest import write_note

    monkeypatch.setenv("CMRAG_DB_PATH", str(tmp_path / "memory.db"))
    write_note(tmp_path / "vault", "weekly\nplan.md", "# Plan\x1b[2J\n\nThe okapi plan, \x1b[31mred\x1b[0m.\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    capsys.readouterr()
    assert main(["sources"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("note    Plan\\x1b[2J  (weekly\\nplan.md)")
    assert main(["ask", "okapi plan", "--no-llm"]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "[E1] Plan\\x1b[2J — weekly\\nplan.md" in shown and "\\x1b[31mred" in shown
    assert main(["ask", "okapi plan", "--no-llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evidence"][0]["title"] == "Plan\x1b[2J"


def test_explain_prints_weights_that_sum_to_one():
    """The default profile's 0.5225, 0.285, 0.1425, 0, 0.05 showed as 0.52 + 0.28 + 0.14 + 0.00 + 0.05 = 0.99."""
    import re

    from crossmodalrag.cli.render import explain_line
    from crossmodalrag.retrieval.search import SearchOptions
    from crossmodalrag.types import Hit

    hit = Hit(1, "/v/a.md", "note", "text", "A", "a.md", "crumb\nbody", None, score=0.5,
              components={"bm25": 2.0, "lexical": 1.0, "recency": 0.5, "vector": 0.5, "title": 0.0})  # fmt: skip
    for hybrid in (True, False):
        line = explain_line(hit, SearchOptions().weights(hybrid=hybrid))
        shown = [float(w) for w in re.findall(r"(\d\.\d\d)×", line)]
        assert len(shown) >= 3 and round(sum(shown), 2) == 1.0, line


def test_counts_of_one_read_as_one(tmp_path, capsys):
    """ "loaded 1 queries", and `usage --clear` told the user to opt in right after clearing the log."""
    import json

    from crossmodalrag.cli.main import main

    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"query_text": "[t] anything", "expected_source_uris": []}]))
    assert main(["init-db"]) == 0
    main(["eval", "--load-queries", str(queries), "--query-prefix", "[t]"])
    assert f"loaded 1 query from {queries}" in capsys.readouterr().err
    assert main(["usage", "--clear"]) == 0
    assert capsys.readouterr().err == "usage log cleared (0 events)\n"
