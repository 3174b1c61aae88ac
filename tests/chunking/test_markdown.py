"""Header-aware markdown chunking: breadcrumbs, frontmatter, fences, offsets, oversized sections."""

from __future__ import annotations

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.chunking.markdown import chunk_markdown
from crossmodalrag.chunking.text import MAX_CHUNK_CHARS
from crossmodalrag.types import Chunk, Document


def note(text: str, title: str = "Trip notes", locator: str = "travel/trip.md") -> Document:
    return Document(
        uri=f"/vault/{locator}", source_type="note", title=title, text=text, format="markdown", locator=locator
    )


def crumb_of(chunk: Chunk) -> str:
    return chunk.text.split("\n", 1)[0]


def body_of(chunk: Chunk) -> str:
    return chunk.text.split("\n", 1)[1]


def words(text: str) -> list[str]:
    return text.split()


NESTED = """# Trip notes

Intro about the trip.

## Plan
### Day one
Walk along the river.

### Day two
Visit the museum.

## Budget
Spend little.
"""


def test_every_chunk_starts_with_a_breadcrumb_of_title_and_headings() -> None:
    chunks = chunk_markdown(note(NESTED))
    assert [crumb_of(c) for c in chunks] == [
        "Trip notes",
        "Trip notes > Plan > Day one",
        "Trip notes > Plan > Day two",
        "Trip notes > Budget",
    ]
    assert [body_of(c) for c in chunks] == [
        "Intro about the trip.",
        "Walk along the river.",
        "Visit the museum.",
        "Spend little.",
    ]


def test_a_top_heading_different_from_the_title_stays_in_the_breadcrumb() -> None:
    chunks = chunk_markdown(note("# Packing list\nsocks\n## Shoes\nboots\n", title="trip"))
    assert [crumb_of(c) for c in chunks] == ["trip > Packing list", "trip > Packing list > Shoes"]


def test_the_title_h1_is_matched_case_insensitively_and_not_repeated() -> None:
    chunks = chunk_markdown(note("#  TRIP NOTES  \nhello there\n"))
    assert [c.text for c in chunks] == ["Trip notes\nhello there"]


def test_a_sibling_heading_pops_the_deeper_levels_from_the_breadcrumb() -> None:
    chunks = chunk_markdown(note("## A\n### A1\n#### A1x\ndeep\n## B\nshallow\n"))
    assert [crumb_of(c) for c in chunks] == ["Trip notes > A > A1 > A1x", "Trip notes > B"]


def test_frontmatter_is_never_a_chunk() -> None:
    text = "---\ntitle: Trip notes\nsecret_key: frontvalue\ntags: [alpha]\n---\nBody text only.\n"
    chunks = chunk_markdown(note(text))
    assert [body_of(c) for c in chunks] == ["Body text only."]
    assert not any("frontvalue" in c.text or "secret_key" in c.text for c in chunks)


def test_a_frontmatter_only_note_is_chunked_by_its_frontmatter() -> None:
    chunks = chunk_markdown(note("---\ntitle: x\ntags: [a]\n---\n"))
    assert [(c.text, c.locator) for c in chunks] == [("Trip notes\ntitle: x\ntags: [a]", "travel/trip.md")]
    assert chunk_markdown(note("---\n---\n")) == []


def test_a_horizontal_rule_later_in_the_note_is_not_frontmatter() -> None:
    text = "First part.\n\n---\n\nSecond part.\n"
    chunks = chunk_markdown(note(text))
    assert "First part." in chunks[0].text and "Second part." in chunks[-1].text


def test_a_leading_date_line_is_not_a_chunk() -> None:
    chunks = chunk_markdown(note("---\nk: v\n---\nDate: 2024-03-05\n\nWhat happened today.\n"))
    assert [body_of(c) for c in chunks] == ["What happened today."]


@pytest.mark.parametrize(
    "written", ["14.03.2024", "March 14, 2024", "2024年3月14日", "14. März 2024", "2024-03-14 (Thu)"]
)
def test_a_leading_date_line_in_any_form_frontmatter_reads_is_not_a_chunk(written: str) -> None:
    chunks = chunk_markdown(note(f"Date: {written}\n\n# Diary\n\nA walk in the park.\n"))
    assert [body_of(c) for c in chunks] == ["A walk in the park."]


def test_a_date_line_that_is_no_date_stays_content() -> None:
    chunks = chunk_markdown(note("Date: next Tuesday, probably\n\nWhat to bring.\n"))
    assert body_of(chunks[0]).startswith("Date: next Tuesday, probably")


def test_a_date_line_only_note_has_no_chunks() -> None:
    assert chunk_markdown(note("Date: 2024-03-05\n")) == []


def test_a_date_line_in_the_middle_of_the_text_stays_content() -> None:
    chunks = chunk_markdown(note("Intro line.\nDate: 2024-03-05\nMore.\n"))
    assert body_of(chunks[0]) == "Intro line.\nDate: 2024-03-05\nMore."


def test_a_header_directly_followed_by_a_subheader_yields_no_empty_chunk() -> None:
    chunks = chunk_markdown(note("## Plan\n\n### Day one\nWalk.\n"))
    assert len(chunks) == 1
    assert chunks[0].text == "Trip notes > Plan > Day one\nWalk."
    assert all(body_of(c).strip() for c in chunks)


def test_tags_alone_above_subsections_are_no_chunk_but_a_note_of_tags_keeps_one() -> None:
    """Tags "#bug #ci" under the title said nothing, yet outranked the sections under it (the sample's
    timezone note): tags are the note's metadata (connectors/notes.py)."""
    chunks = chunk_markdown(note("# Trip notes\n#travel #spain/2025\n\n## Day one\nWalk.\n"))
    assert [c.text for c in chunks] == ["Trip notes > Day one\nWalk."]
    assert [c.text for c in chunk_markdown(note("# Trip notes\n#travel\n"))] == ["Trip notes\n#travel"]
    kept = chunk_markdown(note("# Trip notes\nPacked light. #travel\n## Day one\nWalk.\n"))
    assert [body_of(c) for c in kept] == ["Packed light. #travel", "Walk."]


def test_a_headings_only_note_keeps_its_heading_words() -> None:
    chunks = chunk_markdown(note("# Shopping\n## Milk\n## Eggs\n", title="Shopping"))
    text = "\n".join(c.text for c in chunks)
    assert "Milk" in text and "Eggs" in text


@pytest.mark.parametrize("fence", ["```", "~~~", "```python", "  ```"])
def test_headings_inside_fenced_code_are_not_headings(fence: str) -> None:
    closing = fence.strip()[:3]
    text = f"## Setup\nRun this:\n{fence}\n# not a heading\n## nor this\n{closing}\nDone.\n"
    chunks = chunk_markdown(note(text))
    assert len(chunks) == 1
    assert crumb_of(chunks[0]) == "Trip notes > Setup"
    assert "# not a heading" in body_of(chunks[0]) and "Done." in body_of(chunks[0])


def test_a_tilde_fence_is_not_closed_by_backticks() -> None:
    text = "## Doc\n~~~\n```\n# still code\n~~~\n## Real\nreal body\n"
    chunks = chunk_markdown(note(text))
    assert [crumb_of(c) for c in chunks] == ["Trip notes > Doc", "Trip notes > Real"]


def test_a_longer_fence_is_not_closed_by_a_shorter_one() -> None:
    text = "## How to write markdown\n````\n```\n# inside example\n```\n# still inside\n````\nafter\n"
    chunks = chunk_markdown(note(text))
    assert [crumb_of(c) for c in chunks] == ["Trip notes > How to write markdown"]


def test_setext_headings_are_headings() -> None:
    text = "Intro.\n\nSetup\n=====\nInstall it.\n\nUsage notes\n-----------\nRun it.\n"
    chunks = chunk_markdown(note(text))
    assert [crumb_of(c) for c in chunks] == ["Trip notes", "Trip notes > Setup", "Trip notes > Setup > Usage notes"]
    assert [body_of(c) for c in chunks] == ["Intro.", "Install it.", "Run it."]
    assert chunks[2].locator == "travel/trip.md#Setup > Usage notes"


@pytest.mark.parametrize(
    "above",
    ["", "- a list item", "> a quote", "| a | table |", "1. step", "    indented code", "## Heading"],
)
def test_a_dash_line_under_no_plain_text_line_is_a_rule_not_a_heading(above: str) -> None:
    text = f"Intro.\n\n{above}\n---\nafter the rule\n"
    chunks = chunk_markdown(note(text))
    assert all(" > " not in crumb_of(c) or c.metadata.get("headings") == ["Heading"] for c in chunks)
    assert "after the rule" in chunks[-1].text


def test_an_underline_inside_fenced_code_is_not_a_heading() -> None:
    chunks = chunk_markdown(note("```\nCode\n----\n```\n"))
    assert [crumb_of(c) for c in chunks] == ["Trip notes"]


def test_hash_words_without_a_space_are_not_headings() -> None:
    chunks = chunk_markdown(note("#tag at line start\n##NoSpace\nplain\n"))
    assert [crumb_of(c) for c in chunks] == ["Trip notes"]


def test_locator_is_relpath_hash_heading_path() -> None:
    chunks = chunk_markdown(note(NESTED))
    assert [c.locator for c in chunks] == [
        "travel/trip.md",
        "travel/trip.md#Plan > Day one",
        "travel/trip.md#Plan > Day two",
        "travel/trip.md#Budget",
    ]
    assert chunks[1].metadata == {"headings": ["Trip notes", "Plan", "Day one"]}


def test_a_repeated_heading_is_numbered_from_its_second_time() -> None:
    text = "# Trip\n\n## Notes\n\nFerry at nine.\n\n## Day two\n\nWe walked.\n\n## Notes\n\nMuseum shut Mondays.\n"
    chunks = chunk_markdown(note(text, title="Trip"))
    assert [c.locator for c in chunks] == ["travel/trip.md#Notes", "travel/trip.md#Day two", "travel/trip.md#Notes (2)"]
    assert "Museum" in chunks[2].text


@pytest.mark.parametrize(
    "text",
    [
        NESTED,
        "---\ntitle: t\n---\nDate: 2024-01-02\n# H\n  indented body  \n\n## S\nmore\n",
        "---\r\ntitle: t\r\n---\r\nDate: 2024-01-02\r\n# H\r\nbody one\r\n## S\r\nbody two\r\n",
        "\ufeffno heading, just prose with ünïcödé and emoji 🎉.\n",
    ],
    ids=["nested", "frontmatter-date", "crlf", "unicode"],
)
def test_char_offsets_point_at_the_chunk_body_in_the_document(text: str) -> None:
    doc = note(text)
    chunks = chunk_markdown(doc)
    assert chunks
    for chunk in chunks:
        assert doc.text[chunk.char_start : chunk.char_end] == body_of(chunk)


def long_section_text(paragraphs: int = 12) -> str:
    sentences = [
        f"Sentence {p}-{s} talks about rivers, mountains and the quiet village of Alderbrook number {p}{s}."
        for p in range(paragraphs)
        for s in range(6)
    ]
    paras = [" ".join(sentences[p * 6 : p * 6 + 6]) for p in range(paragraphs)]
    return "\n\n".join(paras)


def assert_split_at_word_boundaries(doc: Document, chunks: list[Chunk], section: str) -> None:
    text = doc.text
    for chunk in chunks:
        body = body_of(chunk)
        assert len(body) <= MAX_CHUNK_CHARS
        assert body == body.strip(), "chunk body is not trimmed"
        s, e = chunk.char_start, chunk.char_end
        assert s == 0 or text[s - 1].isspace(), f"chunk starts mid-word: {text[s - 5 : s + 5]!r}"
        assert e == len(text) or text[e].isspace(), f"chunk ends mid-word: {text[e - 5 : e + 5]!r}"
    assert [w for c in chunks for w in words(body_of(c))] == words(section)


def test_an_oversized_section_splits_on_paragraphs_and_sentences_never_mid_word() -> None:
    section = long_section_text()
    doc = note(f"## Long\n{section}\n")
    chunks = chunk_markdown(doc)
    assert len(chunks) >= 3
    assert all(crumb_of(c) == "Trip notes > Long" and c.locator == "travel/trip.md#Long" for c in chunks)
    assert all(body_of(c).endswith(".") for c in chunks), "should cut at sentence or paragraph ends"
    assert_split_at_word_boundaries(doc, chunks, section)


def test_an_oversized_section_without_punctuation_splits_on_whitespace() -> None:
    section = " ".join(f"token{i}" for i in range(900))
    doc = note(f"## Wall of words\n{section}\n")
    chunks = chunk_markdown(doc)
    assert len(chunks) >= 4
    assert_split_at_word_boundaries(doc, chunks, section)


def test_chunk_document_dispatches_on_format() -> None:
    doc = note("# H\nbody\n")
    assert [c.text for c in chunk_document(doc)] == [c.text for c in chunk_markdown(doc)]
    doc.format = "unknown"
    with pytest.raises(KeyError):
        chunk_document(doc)


def test_a_section_under_a_dated_heading_carries_that_day():
    """A journal kept in one note: each entry's chunks are dated by the innermost heading naming a day
    (their said_at), other sections by the note; "2025 goals" or "v2.0.1" name no day."""
    text = (
        "# Journal\n\n## 2024-03-05 Tuesday\nMet Ana.\n\n### Lunch\nPizza with Ben.\n\n"
        "## 5. März 2024\nKickoff.\n\n## 2025 goals\nShip it.\n\n## v2.0.1\nReleased.\n"
    )
    times = {crumb_of(c): c.metadata.get("time") for c in chunk_markdown(note(text, title="Journal"))}
    assert times == {
        "Journal > 2024-03-05 Tuesday": 1_709_596_800.0,
        "Journal > 2024-03-05 Tuesday > Lunch": 1_709_596_800.0,
        "Journal > 5. März 2024": 1_709_596_800.0,
        "Journal > 2025 goals": None,
        "Journal > v2.0.1": None,
    }
