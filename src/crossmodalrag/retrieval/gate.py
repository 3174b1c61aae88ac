"""The abstention gate without a language model: is the retrieved evidence about the question at all?

Fitted by bench/calibrate_gate.py on dev data (SciFact train claims, LoCoMo dev, the zh/ja/de/es/vi
question sets) at one operating point for every language: keep at least 98% of the questions whose
answer is in memory, in each set, then refuse as many of the others as possible.

- Lexically, only evidence that shares (almost) nothing with the question is refused: the best
  covering hit must hold `min_coverage` of the question's idf weight. A stricter lexical rule cannot
  tell an answerable question from a same-topic one whose answer is missing (both share the topic's
  words; measured on the dev sets): judging those is the language model's job (answer/verify.py).
- A question (not a statement or a guess) naming something no chunk in memory holds at all
  ("AMCOR", "Kenvue") is refused whatever else matches, when its best evidence is a document:
  names are not paraphrased as other words are (names.py).
- With vectors, a question in another language than its closest evidence (languages.py) is also
  answered when its best cosine reaches the model's CROSS_LANGUAGE threshold: their shared words
  mean nothing, and cosines across languages run lower than within one.
- With vectors, the best cosine also counts, on the active model's own scale (MiniLM and
  multilingual-e5 cosines are not comparable): below the model's `floor` nothing retrieved is about
  the question, whatever words it shares, unless one passage holds every one of them (rare words
  mean little to the model: "What area was hit by a flood?" found "My old area was hit by a nasty
  flood" at MiniLM cosine 0.30); at or above its `close`, the evidence is close in meaning even when
  few words match. A model without fitted values is judged lexically.
- A question that asks only what happened in a time window ("What did I do in August 2024?", or
  "What did I do?" with --after/--before: dates.asked_window) has no topic words to cover, and
  its meaning is close to nothing: what is dated inside the window answers it, and only an empty
  window is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crossmodalrag.retrieval.search import SearchOptions, SearchResult


NEVER = 2.0  # a cosine threshold no pair of vectors reaches
# Every word of the question (by idf weight) in one passage: such evidence is never refused for its
# cosine. On the calibration sets (bench/calibrate_gate.py, MiniLM) it answers 1 more of 300 LoCoMo
# questions and passes no more of any unanswerable set: no off-topic question held all its words.
FULL_COVERAGE = 0.999


@dataclass(frozen=True)
class Cosines:
    """One embedding model's gate thresholds, on its own cosine scale."""

    floor: float  # best cosine below this: refused even when words match
    close: float  # best cosine at or above this: answered even when few words match


# bench/calibrate_gate.py, keep >= 98% of answerable questions per dev set (docs/benchmarks.md); MiniLM's
# floor refitted 0.36 -> 0.37 in session 20, after searches began shifting toward their best hits.
# MiniLM's floor binds on German (an English model), its close on Chinese, where it finds every
# paragraph alike; multilingual-e5 puts even unrelated text near 0.8.
MODEL_COSINES: dict[str, Cosines] = {
    "sentence-transformers/all-MiniLM-L6-v2": Cosines(floor=0.37, close=0.91),
    "multilingual-e5-small": Cosines(floor=0.80, close=0.93),
}
# A question in one language over evidence in another (languages.py) shares no words with it, so only
# `close` could pass it, and `close` was fitted on same-language pairs: the README's French question
# found its Vietnamese note first at 0.82 and was refused. bench/calibrate_crosslang.py fits this on
# XQuAD es<->vi (the same questions and paragraphs in both languages; memory = every other paragraph)
# at the gate's one operating point: keep >= 98% of the answerable questions in each direction (0.981
# es->vi, 0.984 vi->es). It refuses 35% / 31% of questions whose article is absent (0.80 would keep
# 81% / 79% and refuse 87% / 89%): across languages e5 separates on-topic from off-topic less than
# within one. Only ever an extra way to pass: a same-language question is judged as before.
CROSS_LANGUAGE: dict[str, float] = {"multilingual-e5-small": 0.78}


# Where a question's names are not checked: chat turns and agent memories. LoCoMo dev asks of them with
# names spelled otherwise ("Lebron James" of "LeBron"), misspelled ("Tennesee") or capitalised common
# nouns ("What Console does Nate own?"): 7 of its 762 answerable questions named something the
# conversation never holds.
SHORT_KINDS = ("conversation", "memory")


def refused_names(result: "SearchResult") -> list[str]:
    """The question's names nothing in memory holds (names.py), when its best evidence is a document."""
    return result.unknown_names if result.hits and result.hits[0].source_type not in SHORT_KINDS else []


def model_cosines(options: "SearchOptions", model: str | None) -> Cosines | None:
    """The cosine thresholds in force: each one set in the settings wins over the model's fitted
    one; None when neither exists (a model nobody calibrated, no override: judged by words)."""
    fitted = MODEL_COSINES.get(model or "")
    floor, close = options.min_similarity_floor, options.min_similarity
    if fitted is None and floor is None and close is None:
        return None
    default = fitted or Cosines(floor=0.0, close=NEVER)
    return Cosines(default.floor if floor is None else floor, default.close if close is None else close)


def across_languages(result: "SearchResult") -> float | None:
    """The cross-language cosine threshold in force: the model's, when the question and its closest
    evidence are in different languages; None otherwise."""
    return CROSS_LANGUAGE.get(result.embed_model or "") if result.cross_language else None


def is_weak(result: "SearchResult", options: "SearchOptions") -> bool:
    """No hits; or the question names something nothing in memory holds (names.py); or (unless it
    asks only about a time window, whose hits are dated inside it), with
    vectors, nothing close enough in meaning; or too little of the question covered by words and
    not close in meaning either."""
    if not result.hits or refused_names(result):
        return True
    if result.window is not None:  # every hit is dated inside the window asked about
        return False
    cosines = model_cosines(options, result.embed_model) if result.similarity is not None else None
    if cosines is None:
        return result.coverage < options.min_coverage
    if (across := across_languages(result)) is not None and result.similarity >= across:
        return False
    if result.similarity < cosines.floor:
        return result.coverage < FULL_COVERAGE
    return result.coverage < options.min_coverage and result.similarity < cosines.close


def reason(result: "SearchResult", options: "SearchOptions") -> str:
    """Why the gate refused, in numbers a user can act on (the settings to change)."""
    if refused_names(result):
        return "nothing in memory mentions " + " or ".join(f'"{name}"' for name in result.unknown_names)
    covered = f"{result.coverage:.1%} of the question's terms (needs {options.min_coverage:.1%})"
    cosines = model_cosines(options, result.embed_model) if result.similarity is not None else None
    found = f"the best evidence covers {covered}"
    if cosines is None:
        return found
    if (across := across_languages(result)) is not None:
        apart = _apart(result.similarity, across)
        return "the best evidence is in another language and {} similar in meaning (needs {})".format(*apart)
    if result.similarity < cosines.floor:
        apart = "{} similar in meaning (needs {})".format(*_apart(result.similarity, cosines.floor))
        if shares_words(result, options):
            return f"the best evidence covers {result.coverage:.1%} of the question's terms but is only {apart}"
        return f"the best evidence is {apart}"
    return f"{found} and is " + "{} similar in meaning (needs {})".format(*_apart(result.similarity, cosines.close))


def shares_words(result: "SearchResult", options: "SearchOptions") -> bool:
    """Whether refused evidence still holds enough of the question's words for the lexical floor: it
    was refused for its meaning alone (a long two-step question is far in meaning from any one
    passage), so a refusal must not say that nothing matches."""
    return bool(result.hits) and not refused_names(result) and result.coverage >= options.min_coverage


def _apart(value: float, needed: float) -> tuple[str, str]:
    """Both numbers with two decimals, or three where two would print the same: "0.366" and "0.370"."""
    digits = 2 if f"{value:.2f}" != f"{needed:.2f}" else 3
    return f"{value:.{digits}f}", f"{needed:.{digits}f}"
