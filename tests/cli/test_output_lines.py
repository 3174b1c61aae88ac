"""What long runs say on stderr when no terminal shows a live line, and how --explain reads a score."""

from __future__ import annotations

import io
from types import SimpleNamespace

from crossmodalrag.cli.progress import EmbedProgress


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


def test_on_a_terminal_the_embedding_line_says_about_how_long_is_left():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    EmbedProgress(out)(SimpleNamespace(chunks=512, seconds=160.0), 335_394)  # 3.2 chunks/s
    assert out.getvalue() == "\rembedding: 512/335394 chunks (3.2/s, about 29 h 04 min left)\033[K"


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
