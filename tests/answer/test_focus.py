"""What the prompt shows of a long excerpt: whole sentences around the one about the question."""

from __future__ import annotations

from crossmodalrag.answer.focus import clip, focus_words, focused

WORDS = focus_words("Why did the parser backtrack on an unclosed bracket?")
SECTION = (
    "The original parser split the document into blocks on blank lines. "
    "It was about fifty lines and pleasant to read. "
    "For the first month that was enough. "
    "Then an unclosed bracket made the link pattern backtrack for minutes. "
    "The number of ways to cut the run grows as two to the n. "
    "Emphasis had the same disease. "
    "I tried possessive quantifiers first."
)


def test_clip_cuts_at_a_word_boundary() -> None:
    assert clip("alpha beta gamma", 100) == "alpha beta gamma"
    assert clip("alpha beta gamma delta", 12) == "alpha beta …"


def test_an_excerpt_that_fits_is_shown_whole() -> None:
    assert focused("  one\n two  three ", WORDS, 100) == "one two three"


def test_a_long_excerpt_shows_whole_sentences_around_the_one_about_the_question() -> None:
    shown = focused(SECTION, WORDS, 150)
    assert shown.startswith("… ") and shown.endswith(" …")
    assert "Then an unclosed bracket made the link pattern backtrack for minutes." in shown
    assert "The original parser" not in shown  # the opening a plain cut would have shown
    assert len(shown) <= 150 + 4  # the two marks


def test_words_match_by_their_first_letters_and_each_counts_once() -> None:
    # "backtracking" matches "backtrack"; the sentence repeating "parser" three times holds one word.
    text = "The parser, the parser, the parser. " * 3 + "Backtracking on an unclosed bracket. " + "Other. " * 30
    assert focused(text, WORDS, 60).startswith("… Backtracking on an unclosed bracket.")


def test_without_a_shared_word_it_reads_from_the_start() -> None:
    assert focused(SECTION, focus_words("What colour is the sky?"), 80) == clip(SECTION, 80)


def test_a_larger_window_holds_every_smaller_one() -> None:
    """The claim check's window (500 characters) holds what the answer was written from (its share)."""
    for small, large in [(80, 160), (120, 200), (150, 400)]:
        inner = focused(SECTION, WORDS, small).strip("… ")
        assert inner in focused(SECTION, WORDS, large)


def test_table_rows_are_units_of_their_own() -> None:
    page = "Consolidated Statement of Income\n" + "Other line 1\n" * 40 + "Net sales\n$ 34,229\n" + "Other\n" * 40
    shown = focused(page, focus_words("What were net sales in 2022?"), 60)
    assert "Net sales $ 34,229" in shown
