"""Snowball stems for Spanish, German and Russian text, beside the one Porter-stemmed FTS5 index.

The index's tokenizer (`porter unicode61 remove_diacritics 2`) stems every word by the English
Porter rules, which leave most Spanish and German forms apart (declaraciones/declaración,
publicaron/publicó; Gebäuden/Gebäude). A chunk whose function words say Spanish or German is
therefore also indexed as "stem tokens": each content word's Snowball stem (of the folded word, so
unaccented typing finds it), marked so that it never meets a real word. A query in that language
asks for each word or its stem token, so an exact form still counts twice. Measured on the dev sets
through `mem` (bench/multilingual.py): XQuAD es nDCG@10 0.946 -> 0.951, MLQA de 0.702 -> 0.707.
Other text gets no stems (a stemmer is applied to text of its own language only), so English is
unchanged. Russian declines every noun (гостиница, гостиницу, гостиницы), so a Cyrillic word,
wherever it stands, is also indexed and asked for by its Russian stem: it has no function-word list
here, and its script says enough (other Cyrillic languages get the Russian stemmer too, an extra
token beside the word, as in a note, so in a question).
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

from crossmodalrag.index.scripts import fold
from crossmodalrag.retrieval.stopwords import BY_LANGUAGE, guess_language

SNOWBALL = {"es": "spanish", "de": "german", "ru": "russian"}
CYRILLIC = re.compile("[\u0400-\u04ff]")
STEM_MARK = "zq"
LANGUAGE_SAMPLE_CHARS = 400
WORD = re.compile(r"\w+")


@lru_cache(maxsize=None)
def snowball(algorithm: str) -> "snowballstemmer.BaseStemmer":
    """The Snowball stemmer of an algorithm ("spanish", "english", ...), made once."""
    return snowballstemmer.stemmer(algorithm)


@lru_cache(maxsize=50_000)
def stem_token(word: str, language: str) -> str | None:
    """The marked Snowball stem of a lowercase word in a language with a stemmer (a Cyrillic word's:
    Russian, whatever the text's language); None otherwise (no stemmer, or not a word of letters)."""
    if CYRILLIC.search(word):
        # ё as е (what the stemmer expects), and й stays itself: fold() would make it и
        return STEM_MARK + snowball("russian").stemWord(word.replace("ё", "е")) if word.isalpha() else None
    if language not in SNOWBALL or not word.isalpha():
        return None
    return STEM_MARK + snowball(SNOWBALL[language]).stemWord(fold(word))


def stem_tokens(text: str) -> list[str]:
    """The stem tokens of a chunk's content words (every occurrence, as BM25 counts them), when
    the function words of its opening say it is Spanish or German; none otherwise."""
    # The opening decides: guessing from every word cost English ingest three times what the rest
    # of index_body costs; 400 characters classify every chunk of the dev sets and of SciFact as
    # the whole chunk does.
    language = guess_language(WORD.findall(text[:LANGUAGE_SAMPLE_CHARS].lower()))
    if language not in SNOWBALL and (text.isascii() or not CYRILLIC.search(text)):
        return []
    words = WORD.findall(text.lower())
    stopwords = BY_LANGUAGE.get(language, frozenset())
    return [token for token in (stem_token(w, language) for w in words if w not in stopwords) if token]
