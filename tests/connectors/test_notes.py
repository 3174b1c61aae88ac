"""The notes connector: finding notes in a vault and parsing one into a Document."""

from __future__ import annotations

import os
import threading
import unicodedata
from datetime import datetime, timezone
from pathlib import Path

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors.notes import find_notes, read_note
from crossmodalrag.errors import ConnectorError
from tests.conftest import write_note
from tests.connectors.conftest import read


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=timezone.utc).timestamp()


def found(vault: Path, include: list[str] | None = None, exclude: list[str] | None = None) -> list[str]:
    return [p.relative_to(vault).as_posix() for p in find_notes(vault, include or [], exclude or [])]


# --- the Document ---------------------------------------------------------------------------


def test_document_fields(vault: Path) -> None:
    doc = read(vault, "projects/alpha.md", "# Alpha\nbody\n")
    assert doc.uri == str(vault / "projects/alpha.md")
    assert (doc.source_type, doc.format, doc.modality) == ("note", "markdown", "text")
    assert doc.locator == "projects/alpha.md"
    assert doc.text == "# Alpha\nbody\n"
    assert doc.metadata["vault"] == str(vault) and doc.metadata["path"] == "projects/alpha.md"


def test_a_byte_order_mark_is_dropped(vault: Path) -> None:
    doc = read(vault, "bom.md", "\ufeff---\ntitle: With BOM\n---\ntext\n".encode())
    assert doc.title == "With BOM" and not doc.text.startswith("\ufeff")


# --- title ----------------------------------------------------------------------------------


def test_title_from_frontmatter_wins_over_h1(vault: Path) -> None:
    assert read(vault, "n.md", "---\ntitle: Front Title\n---\n# Heading Title\nx\n").title == "Front Title"


def test_title_from_first_h1(vault: Path) -> None:
    assert read(vault, "n.md", "intro\n## Second level\n# First H1 #\n# Later H1\n").title == "First H1"


def test_title_ignores_an_h1_inside_code(vault: Path) -> None:
    doc = read(vault, "stem-name.md", "```bash\n# a shell comment\n```\nNo heading here.\n")
    assert doc.title == "stem-name"


def test_title_falls_back_to_the_file_stem(vault: Path) -> None:
    assert read(vault, "folder/My Note.md", "just text, #tag not a heading\n").title == "My Note"


# --- timestamp ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "expected"),
    [
        ("date: 2024-03-05", utc(2024, 3, 5)),
        ("date: 2024-03-05T10:30:00", utc(2024, 3, 5, 10, 30)),
        ("date: 2024-03-05T10:30:00+02:00", utc(2024, 3, 5, 8, 30)),
        ("date: '2024-03-05 10:30'", utc(2024, 3, 5, 10, 30)),
        ("date: 2024-03-05\ncreated: 2020-01-01", utc(2024, 3, 5)),
        ("created: 2020-01-01", utc(2020, 1, 1)),
        ("date: someday\ncreated: 2020-01-01", utc(2020, 1, 1)),
    ],
    ids=[
        "date",
        "datetime",
        "datetime-tz",
        "datetime-string",
        "date-beats-created",
        "created",
        "bad-date-then-created",
    ],
)
def test_timestamp_from_frontmatter(vault: Path, frontmatter: str, expected: float) -> None:
    doc = read(vault, "n.md", f"---\n{frontmatter}\n---\nDate: 1999-09-09\nbody\n")
    assert doc.timestamp == expected


def test_timestamp_from_a_leading_date_line(vault: Path) -> None:
    assert read(vault, "n.md", "Date: 2023-07-14\n\nWhat happened.\n").timestamp == utc(2023, 7, 14)


@pytest.mark.parametrize("written", ["2023-07-14", "14.07.2023", "2023年7月14日", "14 de julio de 2023"])
def test_a_date_line_under_the_title_dates_the_note(vault: Path, written: str) -> None:
    # The meeting-note layout `# Title` / `Date: …` was dated by its file, silently.
    note = read(vault, "n.md", f"# Projektübergabe\n\nDate: {written}\n\nFrau Schröder übergibt.\n")
    assert note.timestamp == utc(2023, 7, 14) and "notice" not in note.metadata
    assert (
        read(vault, "u.md", "# Title\nDate: 07/06/2023\n\nx\n")
        .metadata["notice"]
        .endswith("u.md: `Date: 07/06/2023` is not a date mem reads (write YYYY-MM-DD), so another date is used")
    )
    path = write_note(vault, "late.md", "# Title\n\nWhat happened.\n\nDate: 2023-07-14\n")  # not under the title
    os.utime(path, (1_600_000_000, 1_600_000_000))
    assert read_note(vault, path).timestamp == 1_600_000_000


@pytest.mark.parametrize(
    ("name", "expected"),
    [("2024-01-15.md", utc(2024, 1, 15)), ("daily/2024-01-15 standup.md", utc(2024, 1, 15)), ("2024-13-45.md", None)],
)
def test_timestamp_from_a_date_the_file_name_starts_with(vault: Path, name: str, expected) -> None:
    path = write_note(vault, name, "What happened.\n")
    os.utime(path, (1_600_000_000, 1_600_000_000))
    assert read_note(vault, path).timestamp == (expected or 1_600_000_000)
    assert read(vault, "2024-01-15b.md", "---\ndate: 2023-07-14\n---\nx\n").timestamp == utc(2023, 7, 14)


@pytest.mark.parametrize(
    "written",
    ["2023/07/14", "2023-7-14", "20230714", "14.07.2023", "14/07/2023", "07/14/2023", "July 14, 2023",
     "14 Jul 2023", "Jul. 14th 2023", "'[[2023-07-14]]'"],
)  # fmt: skip
def test_a_frontmatter_date_in_the_ways_vaults_write_it(vault: Path, written: str) -> None:
    note = read(vault, "n.md", f"---\ndate: {written}\n---\nWhat happened.\n")
    assert note.timestamp == utc(2023, 7, 14) and "notice" not in note.metadata


@pytest.mark.parametrize(
    "written",
    ["2023年7月14日", "２０２３年７月１４日", "2023년 7월 14일", "14. Juli 2023", "14 de julio de 2023",
     "14 juillet 2023", "1er juillet 2023", "ngày 14 tháng 7 năm 2023", "14. Jul. 2023", "14 июля 2023"],
)  # fmt: skip
def test_a_date_written_in_another_language_is_read_in_frontmatter_and_a_date_line(vault: Path, written: str) -> None:
    expected = utc(2023, 7, 1) if written.startswith("1er") else utc(2023, 7, 14)
    note = read(vault, "n.md", f"---\ndate: {written}\n---\nWhat happened.\n")
    assert note.timestamp == expected and "notice" not in note.metadata
    assert read(vault, "d.md", f"Date: {written}\n\nWhat happened.\n").timestamp == expected


@pytest.mark.parametrize("written", ["07/06/2023", "2023-02-30", "Mayday 1, 2023", "soon"])
def test_a_frontmatter_date_not_read_says_so_and_keeps_the_other_fields(vault: Path, written: str) -> None:
    note = read(vault, "n.md", f"---\ndate: {written}\ncreated: 2022-06-01\ntags: [a]\n---\nWhat happened.\n")
    assert note.timestamp == utc(2022, 6, 1) and note.metadata["tags"] == ["a"]
    why = "is not a date mem reads (write YYYY-MM-DD)"
    if written == "2023-02-30":  # in the form asked for: the day is what is wrong
        why = "is a day that does not exist (check the month and day)"
    assert note.metadata["notice"].endswith(f"n.md: `date: {written}` {why}, so another date is used")
    line = read(vault, "l.md", f"Date: {written}\n\nWhat happened.\n")  # a leading Date: line says so too
    said = "" if written == "soon" else f"l.md: `Date: {written}` {why}"
    assert line.metadata.get("notice", "").split(", so")[0].endswith(said)  # no digits: no date meant
    broken = read(vault, "b.md", "---\ntags: [a\n---\nWhat happened.\n")
    assert broken.metadata["notice"].endswith(
        "b.md: its frontmatter is not valid YAML and was left out (tags, date, title)"
    )


def test_timestamp_falls_back_to_mtime(vault: Path) -> None:
    path = write_note(vault, "n.md", "Text that mentions Date: 2023-07-14 later.\n")
    os.utime(path, (1_600_000_000, 1_600_000_000))
    assert read_note(vault, path).timestamp == 1_600_000_000


# --- tags and links -------------------------------------------------------------------------


@pytest.mark.parametrize("tags", ["[alpha, beta]", "\n  - alpha\n  - beta", "alpha, beta", "'#alpha beta'"])
def test_tags_from_frontmatter_list_or_string_plus_inline(vault: Path, tags: str) -> None:
    doc = read(vault, "n.md", f"---\ntags: {tags}\n---\nSee #inline and #nested/tag-2 here.\n")
    assert doc.metadata["tags"] == ["alpha", "beta", "inline", "nested/tag-2"]


def test_inline_tags_in_any_script_and_a_line_of_them_is_metadata(vault: Path) -> None:
    doc = read(vault, "n.md", "# Trip\n#über #日本語タグ #Ωmega\n\n## Day one\n\nWe went to Kyoto. #2023 is no tag.\n")
    assert doc.metadata["tags"] == ["über", "Ωmega", "日本語タグ"]
    assert [chunk.text for chunk in chunk_document(doc)] == ["Trip > Day one\nWe went to Kyoto. #2023 is no tag."]


def test_an_indented_or_underlined_first_heading_is_the_title(vault: Path) -> None:
    assert read(vault, "a.md", "   # Release plan\n\nShip it.\n").title == "Release plan"
    underlined = read(vault, "b.md", "Release plan\n============\n\n   ## Risks\n\nNone.\n")
    assert underlined.title == "Release plan"
    assert [c.text for c in chunk_document(underlined)] == ["Release plan > Risks\nNone."]


def test_headings_urls_and_code_are_not_tags(vault: Path) -> None:
    text = "# Heading\n## Sub\nhttp://x.org/page#anchor and C# and `#notatag`\n```\n#codetag\n```\n#real\n"
    assert read(vault, "n.md", text).metadata["tags"] == ["real"]


def test_tags_run_over_combining_marks(vault: Path) -> None:
    doc = read(vault, "n.md", "Notes on #ฐานข้อมูล and #हिन्दी, also #Café.\n")
    assert doc.metadata["tags"] == ["Café", "हिन्दी", "ฐานข้อมูล"]


def test_decomposed_tags_are_read_whole_and_composed(vault: Path) -> None:
    text = unicodedata.normalize("NFD", "---\ntags: [Übersicht]\n---\nText from macOS. #über #café\n")
    assert read(vault, "n.md", text).metadata["tags"] == ["café", "Übersicht", "über"]


def test_a_line_of_tags_in_a_script_with_marks_is_metadata(vault: Path) -> None:
    doc = read(vault, "n.md", "# Trip\n#ฐานข้อมูล #हिन्दी\n\n## Day one\n\nWe went to Kyoto.\n")
    assert [chunk.text for chunk in chunk_document(doc)] == ["Trip > Day one\nWe went to Kyoto."]


def test_wikilinks_are_metadata_but_not_inside_code(vault: Path) -> None:
    text = "Links: [[a]], [[b|alias]], [[c#heading]], [[ a ]].\n`[[inline-code]]`\n```\n[[fenced]]\n```\n"
    assert read(vault, "n.md", text).metadata["wikilinks"] == ["a", "b", "c"]
    assert read(vault, "p.md", "See [[<private>Dr Weiss</private>]] and [[b]].\n").metadata["wikilinks"] == ["b"]


# --- unreadable notes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "encoding", "word"),
    [
        (b"# Caf\xe9\n\nle h\xe9risson \x96 5\x80\n", "cp1252", "hérisson – 5€"),
        (b"# Caf\xe9\n\nbyte \x81 undefined in cp1252\n", "latin-1", "byte \x81 undefined"),
        ("\ufeff# Café\n\nNotepad's Unicode\n".encode("utf-16-le"), "UTF-16 (by its byte order mark)", "Notepad's"),
        ("# Café\n\nÜbergröße für Müller, à côté\n".encode("cp1252"), "cp1252", "Übergröße für Müller, à"),
    ],
)
def test_a_note_in_a_windows_encoding_is_read_with_a_notice(
    vault: Path, content: bytes, encoding: str, word: str
) -> None:
    doc = read(vault, "old.md", content)
    assert doc.title == "Café" and word in doc.text
    assert f"old.md: not UTF-8, read as {encoding}" in doc.metadata["notice"]


def test_a_russian_note_in_cp1251_is_read_as_cyrillic_not_as_cp1252_accents(vault: Path) -> None:
    # Read as cp1252 it was stored as "Çàêóïêà ñåðâåðîâ", found by no Russian question.
    text = "# Закупка серверов\n\nРешили закупить серверы у поставщика в Новосибирске (API v2).\n"
    doc = read(vault, "ru.md", text.encode("cp1251"))
    assert doc.title == "Закупка серверов" and "серверы у поставщика в Новосибирске" in doc.text
    assert "ru.md: not UTF-8, read as cp1251" in doc.metadata["notice"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"caf\xc3\xa9 in UTF-8, caf\xe9 damaged\n", "not valid UTF-8 (byte 19)"),
        (b"\xff\xfe odd!", "not valid UTF-16 (byte 6)"),
        (b"", "empty"),
        (b"  \n\t\n  ", "empty"),
        (b"---\ntags:\ntitle: ''\n---\n", "empty"),
        (b"---\ntags: []\n---\n\n   \n", "empty"),
        (b"SQLite format 3\x00\x10\x00\x01\x01", "binary"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "bad.md"),
    ],
    ids=[
        "bad-utf8",
        "bad-utf16",
        "empty",
        "whitespace",
        "blank-frontmatter",
        "blank-frontmatter-and-blank",
        "nul-bytes",
        "png",
    ],
)
def test_unreadable_notes_raise_connector_error_with_a_hint(vault: Path, content: bytes, message: str) -> None:
    path = write_note(vault, "bad.md", content)
    with pytest.raises(ConnectorError) as caught:
        read_note(vault, path)
    assert message in caught.value.message
    assert str(path) in caught.value.message
    assert caught.value.hint


def test_a_note_of_frontmatter_only_is_kept_and_found_by_it(vault: Path) -> None:
    doc = read(vault, "todo.md", "---\ntitle: Call dentist\ndate: 2024-01-02\ntags: [health]\n---\n\n")
    assert (doc.title, doc.metadata["tags"]) == ("Call dentist", ["health"])
    (chunk,) = chunk_document(doc)
    assert chunk.text == "Call dentist\ntitle: Call dentist\ndate: 2024-01-02\ntags: [health]"
    assert doc.text[chunk.char_start : chunk.char_end] == chunk.text.split("\n", 1)[1]


def test_malformed_yaml_frontmatter_does_not_raise(vault: Path) -> None:
    doc = read(vault, "broken.md", "---\ntitle: [unclosed\n  : : bad\n---\n# Real Title\nbody\n")
    assert doc.title == "Real Title"
    assert "frontmatter" not in doc.metadata
    assert doc.metadata["tags"] == []


@pytest.mark.parametrize(
    "opening, words",
    [
        ("Meeting with Bob about the giraffe budget", "giraffe budget"),
        ("- call the hyena vet\n- buy milk", "hyena vet"),
        # a sentence with a colon is no property named by its first words
        ("Note to self: call the vet about the vaccine for Biscuit.", "vaccine for Biscuit"),
    ],
)
def test_prose_or_a_list_between_opening_rules_is_the_notes_text_not_frontmatter(
    vault: Path, opening: str, words: str
) -> None:
    doc = read(vault, "n.md", f"---\n{opening}\n---\nFollow-up items below.\n")
    assert "frontmatter" not in doc.metadata and "notice" not in doc.metadata
    assert any(words in chunk.text for chunk in chunk_document(doc))


# --- finding notes --------------------------------------------------------------------------


def test_find_notes_skips_noise_hidden_and_non_markdown(vault: Path) -> None:
    for relative in [
        "a.md",
        "sub/b.markdown",
        "sub/deeper/c.MD",
        ".obsidian/workspace.md",
        ".trash/old.md",
        ".git/x.md",
        ".hidden/secret.md",
        "sub/.cache/d.md",
        "node_modules/pkg/readme.md",
        ".note.md.tmp",
        "sub/.hidden.md",
        "image.png",
        "notes.txt",
        "x.md.bak",
    ]:
        write_note(vault, relative, "content")
    assert found(vault) == ["a.md", "sub/b.markdown", "sub/deeper/c.MD"]


def test_find_notes_order_is_stable_and_sorted(vault: Path) -> None:
    for relative in ["z.md", "b/y.md", "a.md", "b/a.md"]:
        write_note(vault, relative, "x")
    assert found(vault) == ["a.md", "z.md", "b/a.md", "b/y.md"]


def test_find_notes_applies_include_and_exclude(vault: Path) -> None:
    for relative in ["work/plan.md", "work/draft-plan.md", "home/list.md", "home/x.tmp.md"]:
        write_note(vault, relative, "x")
    assert found(vault, include=["work/**"]) == ["work/draft-plan.md", "work/plan.md"]
    assert found(vault, exclude=["**/draft-*.md", "*.tmp.md"]) == ["home/list.md", "work/plan.md"]


def test_a_symlink_loop_does_not_hang(vault: Path) -> None:
    write_note(vault, "sub/note.md", "x")
    os.symlink(vault, vault / "sub" / "loop")
    result: list[list[str]] = []
    walker = threading.Thread(target=lambda: result.append(found(vault)), daemon=True)
    walker.start()
    walker.join(timeout=5)
    assert not walker.is_alive(), "find_notes hung on a symlink loop"
    assert result == [["sub/note.md"]]


@pytest.mark.parametrize(
    "make, hint",
    [
        (lambda link: os.symlink(link.parent / "gone.md", link), "a link to a file that is gone"),
        (lambda link: os.symlink(link, link), "leads to itself"),
    ],
)
def test_a_note_that_cannot_be_read_gets_the_hint_for_why(vault: Path, make, hint: str) -> None:
    link = vault / "broken.md"
    make(link)
    with pytest.raises(ConnectorError) as caught:
        read_note(vault, link)
    assert hint in caught.value.hint and "permissions" not in caught.value.hint
