"""Which language a question or a passage is written in, as far as the gate needs to know: enough to
tell that a question and its evidence are in different languages, where shared words mean nothing.

The script decides first (kana: Japanese, Hangul: Korean, other Han: Chinese; Cyrillic, Greek,
Hebrew, Arabic, Thai; ơ ư đ ă or a stacked letter: Vietnamese), then, for other Latin text, the
function words (stopwords.py). Latin text with none of them is unknown (None), never guessed English:
"Sochi hotel?" says nothing about its language, and an unknown side is never called different.
"""

from __future__ import annotations

import re

from crossmodalrag.index.scripts import CJK_CHAR, has_vietnamese
from crossmodalrag.retrieval.stopwords import LANGUAGES_OF

SAMPLE_CHARS = 400  # a passage's opening decides, as at ingest (index/stems.py)
WORD = re.compile(r"\w+")
SCRIPTS = (
    ("ja", re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")),
    ("ko", re.compile("[\uac00-\ud7af]")),
    ("ru", re.compile("[\u0400-\u04ff]")),  # Cyrillic: Russian stands for them all
    ("el", re.compile("[\u0370-\u03ff\u1f00-\u1fff]")),
    ("he", re.compile("[\u0590-\u05ff]")),
    ("ar", re.compile("[\u0600-\u06ff]")),
    ("th", re.compile("[\u0e00-\u0e7f]")),
    ("zh", CJK_CHAR),  # every CJK character, kana included
)
NON_LATIN = frozenset(language for language, _ in SCRIPTS)
LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")


def text_language(text: str) -> str | None:
    """A language code for the text's script or function words; None when nothing tells."""
    sample = text[:SAMPLE_CHARS]
    if not sample.isascii():
        # The script of most letters: a name in another script ("the hotel in Сочи") is not the text's.
        latin = len(LATIN_LETTER.findall(sample))
        counts = {language: len(script.findall(sample)) for language, script in SCRIPTS}
        language = max(counts, key=counts.__getitem__)
        if counts[language] > latin:
            return "ja" if language == "zh" and counts["ja"] else language  # kana among the Han: Japanese
        if has_vietnamese(sample):
            return "vi"
    return _function_word_language(WORD.findall(sample.lower()))


def _function_word_language(words: list[str]) -> str | None:
    """The language whose function words the words hit most, None on none or a tie."""
    hits: dict[str, int] = {}
    for word in words:
        for language in LANGUAGES_OF.get(word, ()):
            hits[language] = hits.get(language, 0) + 1
    ranked = sorted(hits.values(), reverse=True)
    if not ranked or (len(ranked) > 1 and ranked[0] == ranked[1]):
        return None
    return max(hits, key=hits.__getitem__)


def different_languages(question: str, evidence: str) -> bool:
    """Are the question and the evidence known to be written in different languages (or scripts,
    when a Latin side has no function words to tell its language: "Sochi hotel" of Сочи)?"""
    asked, found = text_language(question), text_language(evidence)
    if asked is not None and found is not None:
        return asked != found
    asked_script, found_script = _script(question, asked), _script(evidence, found)
    return asked_script is not None and found_script is not None and asked_script != found_script


def different_scripts(question: str, evidence: str) -> bool:
    """Are the question and the evidence written in different scripts (Latin and Cyrillic, say)?"""
    asked, found = _script(question, text_language(question)), _script(evidence, text_language(evidence))
    return asked is not None and found is not None and asked != found


def _script(text: str, language: str | None) -> str | None:
    """The language code of a text in a script of its own, "latin" for Latin letters, None for no letters."""
    if language in NON_LATIN:
        return language
    return "latin" if LATIN_LETTER.search(text[:SAMPLE_CHARS]) else None


# English embedding models (MiniLM offline, bge-small-en from the hub) were not trained on Chinese or
# Japanese: their WordPiece vocabulary reads such text as single characters, and MiniLM puts unrelated
# Chinese paragraphs at cosines 0.98-1.0. Min-max spread over the pool, that noise took the vector
# side's 0.55 of the score and drowned the words that matched (docs/benchmarks.md, session 34).
ENGLISH_MODELS = frozenset({"sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-small-en-v1.5"})
UNREAD_BY_ENGLISH_MODELS = frozenset({"zh", "ja"})
# Chinese or Japanese words inside a question in another language ("Who handles the 回滚方案?"): the
# English words around them are function words as often as not, and the vectors refused that question
# (0.26 similar, needs 0.37) while its words found the note.
HAN_OR_KANA_WORD = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\U00020000-\U0003134f]{2,}")


def model_reads(model: str, question: str) -> bool:
    """Whether an embedding model's vectors mean anything for a question in this language: not an
    English model's for a question in Chinese or Japanese, or holding words of them (judged by its
    words alone then)."""
    if model not in ENGLISH_MODELS:
        return True
    return text_language(question) not in UNREAD_BY_ENGLISH_MODELS and not HAN_OR_KANA_WORD.search(question)
