"""Text in many scripts, made findable by one FTS5 tokenizer (`porter unicode61 remove_diacritics 2`).

FTS5's unicode61 splits on spaces and punctuation, which Chinese and Japanese do not use: a whole
clause becomes one token and a question finds nothing (nDCG@10 0.17 zh / 0.25 ja on the dev sets).
Every run of CJK characters (Han, kana, Hangul) is therefore rewritten as overlapping character
bigrams before FTS5 sees it, in documents and queries alike: 解析器 → 解析 析器. Measured on CMRC
2018 and JSQuAD this matches jieba on Chinese (0.98) and beats trigram on both (bench/multilingual.py).

Folding (`remove_diacritics 2`) lets `cafe` find `café` and unaccented Vietnamese find accented
text, but it also merges distinct Vietnamese words (bàn "table", bán "sell"). So in Vietnamese text
each accented word is indexed a second time as an "exact form" token, a spelling FTS5 cannot fold or
stem (the word's UTF-8 bytes written in 16 consonants). A query typed with accents asks for those
tokens too, and BM25 ranks the exact spelling first (XQuAD vi nDCG@10 0.921 -> 0.934); a query typed
without accents has none and is unaffected. Only Vietnamese notes carry them (a note is Vietnamese
when it uses ơ ư đ ă or a stacked letter): in German and Spanish an accent seldom tells two words
apart, and exact forms there cost 0.01 nDCG@10 on both dev sets.

unicode61 folds Latin letters only: `Αθηνα` did not find `Αθήνα`, nor `Алена` `Алёна`. In Greek,
Cyrillic, Hebrew and Arabic each word whose marks (tonos, ё's diaeresis, niqqud, harakat) fold away
is therefore indexed a second time folded, and a query word with marks asks for its folded form too:
typed with or without them, a word finds the note written either way. The Cyrillic breve stays (й and
ў are letters of their own). Beside the original, not instead of it: a memory indexed before keeps
matching its words as typed until it is re-tokenized. Harakat and niqqud are marks of their own, never
composed into a letter, and FTS5 splits a word at each: a vocalised Arabic or Hebrew word is whole in
the index only folded, so a query word typed with them is read folded (MARKED_WORD keeps a word whole).

unicode61 keeps ß as it is, and Swiss German always writes ss: `Strassenbahn` did not find `Straßenbahn`.
A word with ß is therefore also indexed with ss, and a query word with ß is read with ss (index/fts.py;
asking for both spellings counted the word twice: MLQA de nDCG@10 0.7052, read with ss 0.7086, before
0.7078). A German question already met the ss form through its Snowball stem, a lone word not.

Thai (and Lao) have no spaces either, and unicode61 splits at their vowel signs and tone marks above and
below a letter: `ดอยสุเทพ` inside a sentence was found by no query. Their runs are therefore read as
bigrams of their letters, the marks dropped, at index and query time alike (segment_spaceless). The
Indic scripts have spaces, but unicode61 splits a word at each vowel sign and virama (दिल्ली → द ल ल),
where दिल "heart" and दाल "lentils" are both द ल: a query word is kept whole with its marks (its
fragments still match as a phrase), and such a word is also indexed whole as an unfoldable token,
which a query word asks for too, so the note with the word's own vowels ranks first.

A Vietnamese word is often several syllables, each written apart (quy trình, bàn giao), so a query's
syllables match everywhere one by one. Vietnamese text is therefore also indexed as "syllable pair"
tokens, one per two adjacent syllables (folded, đ as d), and a Vietnamese query asks for its own
pairs as well: BM25 then ranks the note where the words stand together first (XQuAD vi nDCG@10
0.934 -> 0.952 accented, 0.914 -> 0.949 typed without accents). Word pairs cost Spanish and German
0.01-0.02 in plain FTS5, so only Vietnamese gets them.

Text typed with a Chinese or Japanese input method often has full-width Latin (ＰｏｓｔｇｒｅＳＱＬ) or
half-width katakana (ﾃﾞｰﾀﾍﾞｰｽ), which unicode61 keeps as they are: neither found its usual spelling,
nor the other way round. A word that compatibility normalisation (NFKC) changes is therefore also
indexed in its NFKC form (CJK as bigrams), and a query is read in NFKC (index/fts.py): typed either
way, it finds the note written either way. Beside the original, as folded forms are.
"""

from __future__ import annotations

import re
import unicodedata

# Han (with extension A and the compatibility block), kana, Hangul syllables, halfwidth kana and the
# astral Han extensions B–G.
CJK_CLASS = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
CJK_CHAR = re.compile(f"[{CJK_CLASS}]")
HIRAGANA_ONLY = re.compile("[\u3040-\u309f]+")
HAN_CHAR = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
WORD = re.compile(r"\w+")


def _class_of(blocks: tuple[tuple[int, int], ...], categories: tuple[str, ...] = ("M",)) -> str:
    """A regex class body of the characters in these blocks whose Unicode category starts with one of
    `categories` (combining marks: Mn, Mc, Me), as ranges."""
    ranges: list[list[int]] = []
    for first, last in blocks:
        for code in range(first, last + 1):
            if not unicodedata.category(chr(code)).startswith(categories):
                continue
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


# Combining marks of the alphabets and abugidas (Latin to Mongolian, the extended combining blocks,
# Hebrew presentation forms, variation selectors): harakat, niqqud, Indic vowel signs and viramas,
# Thai vowels and tone marks. Python's \w does not match them, so WORD splits `الطَّالِبُ` at every mark.
# Read from unicodedata over these blocks only: the whole plane costs 50 ms at every start.
MARKS = _class_of(((0x0300, 0x1DFF), (0x20D0, 0x20FF), (0xA670, 0xABFF), (0xFB1E, 0xFB1E), (0xFE00, 0xFE2F)))
# A word with its combining marks, as a reader sees it (الطَّالِبُ, दिल्ली, דָּנִי); a stray mark before any
# letter is no word.
MARKED_WORD = re.compile(f"\\w[\\w{MARKS}]*")
# Thai and Lao: no spaces between words, and FTS5 splits a word at each vowel sign and tone mark
# written above or below a letter. Their letters' runs are read as bigrams, like CJK, the marks dropped.
SPACELESS_BLOCK = ((0x0E00, 0x0EFF),)
SPACELESS_RUN = re.compile(f"[{_class_of(SPACELESS_BLOCK, ('Lo', 'Lm'))}]+")
SPACELESS_MARK = re.compile(f"[{_class_of(SPACELESS_BLOCK)}]")
# The Indic scripts (Devanagari to Sinhala): spaces between words, and FTS5 splits a word at each
# vowel sign and virama, which tell words apart (कम "less", काम "work"): such a word is also
# indexed whole, as an unfoldable token.
INDIC_CHAR = re.compile("[\u0900-\u0dff]")
SENTENCE_END = re.compile(r"[.!?;:\n]")
VIETNAMESE_LETTER = re.compile("[\u1ea0-\u1ef9ăđơưĂĐƠƯ]")
# Letters that no Porter rule rewrites (no vowels, no s, l or y) and that unicode61 keeps as they are.
EXACT_ALPHABET = "bcdfghjkmnpqrtvw"
EXACT_MARK = "zx"
PAIR_MARK = "zv"  # syllable pairs; no real word starts with zv or zx in the languages we detect


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run; a lone character stays itself."""
    return [run] if len(run) == 1 else list(map(str.__add__, run, run[1:]))


def _spaced_bigrams(match: re.Match) -> str:
    run = match.group(0)
    return f" {run} " if len(run) == 1 else " " + " ".join(map(str.__add__, run, run[1:])) + " "


def _spaced_bigrams_and_last(match: re.Match) -> str:
    run = match.group(0)
    return _spaced_bigrams(match) if len(run) == 1 else _spaced_bigrams(match) + f"{run[-1]} "


def segment_cjk(text: str, last_alone: bool = False) -> str:
    """The text with every CJK run replaced by its space-separated bigrams (Thai and Lao runs too:
    segment_spaceless; other text unchanged).
    With `last_alone` (what is indexed), a run's last character is also a token of its own: every
    other character starts a bigram, so a one-character word searched as a prefix (猫*) finds it
    anywhere, also at the end of a run (看了猫). Not in queries, where it would break phrases."""
    if text.isascii():
        return text
    text = segment_spaceless(text)
    if not CJK_CHAR.search(text):
        return text
    return CJK_RUN.sub(_spaced_bigrams_and_last if last_alone else _spaced_bigrams, text)


def segment_spaceless(text: str) -> str:
    """The text with every Thai or Lao run replaced by the space-separated bigrams of its letters,
    without the vowel signs and tone marks that FTS5 would split it at (ดอยสุเทพ → ดอ อย ยส สเ เท ทพ).
    No lone last letter, as CJK has: a one-letter word is rare, and dropped from queries."""
    if not SPACELESS_RUN.search(text):
        return text
    return SPACELESS_RUN.sub(_spaced_bigrams, SPACELESS_MARK.sub("", text))


def lone_characters(text: str) -> list[str]:
    """The one-character Han words of a text's CJK runs: a Han character with no Han neighbour other
    than a particle or question word (猫 in 猫在哪里 and 猫はどこ, 雨 in 雨の日). Bigrams alone give
    such a word only as part of a pair with its particle (猫在, 猫は), which the note seldom holds."""
    found = []
    for match in CJK_RUN.finditer(text):
        run = match.group(0)
        for i, char in enumerate(run):
            if len(run) > 1 and _is_lone_word(run, i):
                found.append(char)
    return list(dict.fromkeys(found))


def _is_lone_word(run: str, i: int) -> bool:
    char = run[i]
    if not HAN_CHAR.match(char) or char in CJK_FUNCTION_CHARS:
        return False
    before, after = run[i - 1 : i + 1] if i else "", run[i : i + 2] if i + 1 < len(run) else ""
    return all(
        not pair or (_is_boundary(pair.replace(char, "", 1)) and pair not in CJK_FUNCTION_BIGRAMS)
        for pair in (before, after)
    )


def _is_boundary(char: str) -> bool:
    """Does a neighbouring character end a word: hiragana (particles, endings) or a function character?"""
    return bool(HIRAGANA_ONLY.fullmatch(char)) or char in CJK_FUNCTION_CHARS


def compatibility_forms(text: str) -> list[str]:
    """The NFKC forms of a text's words that NFKC changes (full-width Latin, half-width kana,
    ligatures), CJK as bigrams, each once; not those it only composes (decomposed text is read alike)."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return []
    found = []
    for word in WORD.findall(unicodedata.normalize("NFC", text)):
        if not word.isascii() and (form := unicodedata.normalize("NFKC", word)) != word:
            found.append(segment_cjk(form).strip())
    return list(dict.fromkeys(found))


def fold(word: str) -> str:
    """The word without combining marks (what `remove_diacritics 2` makes of it, before stemming)."""
    decomposed = unicodedata.normalize("NFD", word)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


# Greek (with its extended block), Cyrillic, Hebrew, Arabic.
MARKED_SCRIPT = re.compile("[\u0370-\u03ff\u1f00-\u1fff\u0400-\u04ff\u0590-\u05ff\u0600-\u06ff]")
KEPT_MARKS = frozenset("\u0306")  # the breve: й and ў are letters, not и and у with a mark
FOLDABLE = re.compile(f"{MARKED_SCRIPT.pattern}|[ßẞ]")  # what folded_form may change


def folded_form(word: str) -> str | None:
    """The lowercased word without its marks when it is written in a script unicode61 does not fold
    and has any, or with ß as ss (None otherwise)."""
    lowered = unicodedata.normalize("NFC", word.lower())
    if lowered.isascii():
        return None
    if "ß" in lowered:  # Swiss German always writes ss (Strasse): either spelling finds the other
        return lowered.replace("ß", "ss")
    if not MARKED_SCRIPT.search(lowered):
        return None
    kept = (c for c in unicodedata.normalize("NFD", lowered) if not unicodedata.combining(c) or c in KEPT_MARKS)
    folded = unicodedata.normalize("NFC", "".join(kept))
    return folded if folded != lowered else None


def folded_forms(text: str) -> list[str]:
    """The folded forms of a text's marked Greek, Cyrillic, Hebrew and Arabic words and its words
    with ß, each once.
    Words are read with their marks: \\w alone splits a vocalised Arabic or Hebrew word at each mark."""
    if text.isascii() or not FOLDABLE.search(text):
        return []
    found = (folded_form(word) for word in MARKED_WORD.findall(unicodedata.normalize("NFC", text)))
    return list(dict.fromkeys(form for form in found if form))


def split_by_marks(word: str) -> bool:
    """Does FTS5 (unicode61) split this word at a mark it holds, as in vocalised Arabic and Hebrew?
    Such a word as typed matches only its fragments; the index holds it whole only folded."""
    return bool(MARKED_SCRIPT.search(word)) and any(unicodedata.category(c) == "Mn" for c in word)


def exact_token(word: str) -> str | None:
    """The unfoldable token for an accented word (None for a word folding would not change)."""
    lowered = unicodedata.normalize("NFC", word.lower())
    if lowered.isascii() or CJK_CHAR.search(lowered) or fold(lowered) == lowered:
        return None
    return _unfoldable(lowered)


def _unfoldable(word: str) -> str:
    """The word's UTF-8 bytes written in letters FTS5 neither folds, stems nor splits."""
    letters = [EXACT_ALPHABET[b >> 4] + EXACT_ALPHABET[b & 15] for b in word.encode("utf-8")]
    return EXACT_MARK + "".join(letters)


def whole_word_token(word: str) -> str | None:
    """The unfoldable token of an Indic word with a vowel sign or virama, which FTS5 splits at each
    (दिल्ली → द ल ल); None for any other word. The same token as exact_token where both give one."""
    lowered = unicodedata.normalize("NFC", word.lower())
    if lowered.isascii() or not INDIC_CHAR.search(lowered):
        return None
    return _unfoldable(lowered) if any(unicodedata.category(c).startswith("M") for c in lowered) else None


def whole_word_tokens(text: str) -> list[str]:
    """The whole-word tokens of a text's Indic words with marks, each once, in order."""
    if text.isascii() or not INDIC_CHAR.search(text):
        return []
    found = (whole_word_token(word) for word in MARKED_WORD.findall(text))
    return list(dict.fromkeys(token for token in found if token))


def has_vietnamese(text: str) -> bool:
    """Does the text use letters only Vietnamese writes (ơ ư đ ă, or the stacked ạ ế ở ự …), composed
    or not (a note saved by macOS is decomposed)?"""
    return not text.isascii() and bool(VIETNAMESE_LETTER.search(unicodedata.normalize("NFC", text)))


def exact_tokens(text: str) -> list[str]:
    """Exact-form tokens of the accented words of a Vietnamese text, each once, in order."""
    if not has_vietnamese(text):
        return []
    found = (exact_token(word) for word in WORD.findall(text))
    return list(dict.fromkeys(token for token in found if token))


def syllable_pairs(text: str) -> list[str]:
    """One token per two adjacent words of the text within a sentence, folded and with đ as d, so
    that unaccented typing finds them too. (Ending pairs at commas and brackets as well measured
    0.003 lower: a question's comma seldom falls where the note's does.)"""
    lowered = text.lower()
    pairs, previous, previous_end = [], None, -1
    for match in WORD.finditer(lowered):
        word = None if CJK_CHAR.search(match.group()) else fold(match.group()).replace("đ", "d")
        gap = lowered[previous_end : match.start()]
        if previous and word and not SENTENCE_END.search(gap):
            pairs.append(PAIR_MARK + previous + word)
        previous, previous_end = word, match.end()
    return pairs


def vietnamese_pairs(text: str) -> list[str]:
    """Syllable pair tokens of a Vietnamese text; none for any other text."""
    return syllable_pairs(text) if has_vietnamese(text) else []


def is_cjk(token: str) -> bool:
    return bool(CJK_CHAR.search(token))


def is_function_bigram(token: str) -> bool:
    """A CJK bigram that carries grammar rather than content: a Chinese question word or
    particle pair, or Japanese kana-only inflection (です, ました, には)."""
    return token in CJK_FUNCTION_BIGRAMS or token in CJK_QUESTION_BIGRAMS or bool(HIRAGANA_ONLY.fullmatch(token))


# Question words and particles of Chinese questions: they occur in the question, seldom in the note
# that answers it, so counting them as "uncovered" would make the abstention gate refuse good answers.
CJK_FUNCTION_BIGRAMS = frozenset(
    """
什么 为什 么是 么样 哪个 哪些 哪里 哪一 哪位 哪年 哪种 多少 怎么 怎样 如何 是什 是哪 的是 谁是 是谁
几个 几年 有哪 有多 是否 了什 做什 叫什 在哪 什麼 為什 甚麼 是多 为何 何时 何处 何地 哪國
""".split()
)
# The other bigrams of question words (什么时候 "when" is 什么 么时 时候): a note that asks the same
# ("小白什么时候打疫苗？") covered 16% of "屋顶什么时候修好的？" by them, and the gate answered a roof
# question with a cat's vaccine. Kept apart from CJK_FUNCTION_BIGRAMS, which also shapes the index.
CJK_QUESTION_BIGRAMS = frozenset("么时 时候 麼時 時候 啥时 几时 多久 哪儿 哪兒 为啥 何時".split())
# Chinese particles and question words, one character each: next to one, a Han character may be a
# word of its own (lone_characters); they never are one worth searching.
CJK_FUNCTION_CHARS = frozenset("的了在是吗呢吧和与把被给也都就还着过得地由从对为于这那我你他她它们什么哪谁几何怎")
