"""Commit chunking: the message alone, then per-file hunks that carry their file header."""

from __future__ import annotations

from crossmodalrag.chunking.diff import chunk_diff
from crossmodalrag.chunking.text import MAX_CHUNK_CHARS
from crossmodalrag.types import Chunk, Document

SHA7 = "abc1234"
LOCATOR = f"proj@{SHA7}"


def file_diff(path: str, hunks: list[str], new: bool = False) -> str:
    head = [f"diff --git a/{path} b/{path}"]
    if new:
        head += ["new file mode 100644", "index 0000000..1111111", "--- /dev/null", f"+++ b/{path}"]
    else:
        head += ["index 1111111..2222222 100644", f"--- a/{path}", f"+++ b/{path}"]
    return "\n".join(head + hunks)


def hunk(old_line: int, removed: str, added: str) -> str:
    return f"@@ -{old_line},3 +{old_line},3 @@ def f():\n context\n-{removed}\n+{added}\n context"


def commit(message: str, *diffs: str) -> Document:
    text = message + ("\n\n" + "\n".join(diffs) if diffs else "")
    return Document(
        uri=f"/repos/proj@{SHA7}deadbeef",
        source_type="commit",
        title=message.splitlines()[0],
        text=text,
        format="diff",
        modality="code",
        locator=LOCATOR,
    )


def file_chunks(chunks: list[Chunk], path: str) -> list[Chunk]:
    return [c for c in chunks if c.locator == f"{LOCATOR} {path}"]


def test_the_commit_message_is_its_own_chunk() -> None:
    doc = commit("Fix the parser\n\nIt dropped trailing commas.", file_diff("src/parser.py", [hunk(10, "old", "new")]))
    chunks = chunk_diff(doc)
    message = chunks[0]
    assert message.text == f"{LOCATOR}: Fix the parser\nFix the parser\n\nIt dropped trailing commas."
    assert message.locator == LOCATOR
    assert "diff --git" not in message.text and "+++" not in message.text
    assert doc.text[message.char_start : message.char_end] == "Fix the parser\n\nIt dropped trailing commas."


def test_a_commit_without_diff_is_only_its_message() -> None:
    chunks = chunk_diff(commit("Merge branch 'feature'"))
    assert [c.text for c in chunks] == [f"{LOCATOR}: Merge branch 'feature'\nMerge branch 'feature'"]


def test_each_hunk_chunk_carries_its_file_header_and_path() -> None:
    doc = commit(
        "Touch two files",
        file_diff("src/a.py", [hunk(1, "alpha_old", "alpha_new")]),
        file_diff("docs/b.md", [hunk(5, "beta_old", "beta_new")]),
    )
    chunks = chunk_diff(doc)
    assert [c.locator for c in chunks] == [LOCATOR, f"{LOCATOR} src/a.py", f"{LOCATOR} docs/b.md"]
    a_chunk, b_chunk = chunks[1], chunks[2]
    assert a_chunk.text.splitlines()[:3] == [
        f"{LOCATOR}: Touch two files (src/a.py)",
        "--- a/src/a.py",
        "+++ b/src/a.py",
    ]
    assert "+alpha_new" in a_chunk.text and "beta" not in a_chunk.text
    assert "--- a/docs/b.md" in b_chunk.text and "+beta_new" in b_chunk.text and "alpha" not in b_chunk.text
    assert a_chunk.metadata == {"path": "src/a.py"}
    assert "index 1111111" not in a_chunk.text, "noise header lines are dropped"


def test_a_new_file_keeps_its_dev_null_header() -> None:
    doc = commit("Add file", file_diff("new.txt", ["@@ -0,0 +1 @@\n+hello"], new=True))
    new_chunk = chunk_diff(doc)[1]
    assert new_chunk.text.splitlines()[1:4] == ["new file mode 100644", "--- /dev/null", "+++ b/new.txt"]


def test_small_hunks_of_one_file_are_grouped_into_one_chunk() -> None:
    hunks = [hunk(10 * i + 1, f"old{i}", f"new{i}") for i in range(4)]
    doc = commit("Small edits", file_diff("src/a.py", hunks))
    chunks = file_chunks(chunk_diff(doc), "src/a.py")
    assert len(chunks) == 1
    assert all(f"+new{i}" in chunks[0].text for i in range(4))
    assert chunks[0].text.count("@@ -") == 4


def test_hunks_beyond_the_chunk_size_start_a_new_group_with_the_header() -> None:
    filler = "\n".join(f" unchanged context line number {n} here" for n in range(12))
    hunks = [f"@@ -{100 * i},14 +{100 * i},14 @@\n{filler}\n-old{i}\n+new{i}" for i in range(6)]
    doc = commit("Many edits", file_diff("src/a.py", hunks))
    chunks = file_chunks(chunk_diff(doc), "src/a.py")
    assert len(chunks) > 1
    for chunk in chunks:
        assert "--- a/src/a.py\n+++ b/src/a.py" in chunk.text
        assert len(doc.text[chunk.char_start : chunk.char_end]) <= MAX_CHUNK_CHARS
        assert chunk.text.split("+++ b/src/a.py\n", 1)[1].startswith("@@ -")
    joined = "\n".join(chunks_body(doc, chunks))
    assert [f"+new{i}" in joined for i in range(6)] == [True] * 6


def chunks_body(doc: Document, chunks: list[Chunk]) -> list[str]:
    return [doc.text[c.char_start : c.char_end] for c in chunks]


def test_a_huge_hunk_is_split_and_every_piece_repeats_the_header() -> None:
    added = [f"+generated line {n} with several words in it" for n in range(150)]
    huge = "@@ -0,0 +1,150 @@\n" + "\n".join(added)
    doc = commit("Add generated table", file_diff("data/table.txt", [huge], new=True))
    chunks = file_chunks(chunk_diff(doc), "data/table.txt")
    assert len(chunks) >= 4
    for chunk in chunks:
        lines = chunk.text.splitlines()
        assert lines[0] == f"{LOCATOR}: Add generated table (data/table.txt)"
        assert lines[2:5] == ["--- /dev/null", "+++ b/data/table.txt", "@@ -0,0 +1,150 @@"]
        assert len(doc.text[chunk.char_start : chunk.char_end]) <= MAX_CHUNK_CHARS
    pieces = [line for c in chunks for line in c.text.splitlines()[5:]]
    assert pieces == added, "every added line appears exactly once, in order, and whole"


def test_a_binary_file_change_is_a_header_only_chunk() -> None:
    binary = "diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ"
    chunks = chunk_diff(commit("Update logo", binary))
    assert chunks[1].locator == f"{LOCATOR} img.png"
    assert chunks[1].text == f"{LOCATOR}: Update logo (img.png)\nBinary files a/img.png and b/img.png differ"


def test_a_newline_in_a_file_name_stays_inside_the_chunks_first_line() -> None:
    quoted = '"a/new\\nline.txt" "b/new\\nline.txt"'  # git C-quotes a name holding a newline
    diff = f'diff --git {quoted}\nnew file mode 100644\n--- /dev/null\n+++ "b/new\\nline.txt"\n@@ -0,0 +1 @@\n+a'
    [_, chunk] = chunk_diff(commit("add it", diff))
    assert chunk.metadata["path"] == "new\nline.txt"
    assert chunk.locator == f"{LOCATOR} new\\nline.txt"
    first, second = chunk.text.splitlines()[:2]
    assert (first, second) == (f"{LOCATOR}: add it (new\\nline.txt)", "new file mode 100644")


def test_a_diff_chunks_body_ends_with_its_span_as_the_json_contract_says() -> None:
    """docs/json-contract.md: a diff chunk's body is its file's header lines (and, for a later piece of
    a split hunk, the `@@` line) then its span; a file with no hunk spans its whole part of the diff."""
    added = [f"+generated line {n} with several words in it" for n in range(150)]
    binary = (
        "diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0..2\nBinary files /dev/null and b/img.png differ"
    )
    doc = commit(
        "Add files\n\nwith a body",
        file_diff("new.txt", ["@@ -0,0 +1 @@\n+hello"], new=True),
        file_diff("table.txt", ["@@ -0,0 +1,150 @@\n" + "\n".join(added)], new=True),
        binary,
    )
    message, *hunks, image = chunk_diff(doc)
    assert message.text.partition("\n")[2] == doc.text[message.char_start : message.char_end]
    assert len(hunks) > 2
    for chunk in hunks:
        body, span = chunk.text.partition("\n")[2], doc.text[chunk.char_start : chunk.char_end]
        assert span.startswith(("@@", "+generated")) and body.endswith("\n" + span)
        assert body.startswith("new file mode 100644\n--- /dev/null\n+++ b/")
    assert doc.text[image.char_start : image.char_end].strip() == binary
    assert image.text.partition("\n")[2] == "new file mode 100644\nBinary files /dev/null and b/img.png differ"
