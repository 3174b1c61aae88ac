"""The short answer without the words that restate the question.

Asked for "only the answer", a small model still often writes a sentence: "When did Caroline apply
to adoption agencies?" gets "Caroline applied to adoption agencies on 22 October 2023". What the
question already says tells the user nothing, so the short answer keeps what is new: "22 October
2023". Only a restating opening (the question's own words, with the function words between them)
and a closing phrase that repeats it ("... his turtles for cheer and joy") are dropped; a no or not is
never dropped, and an answer that opens with yes or no, or would lose every content word, is kept whole.
"""

from __future__ import annotations

import re

from crossmodalrag.answer.forms import is_statement, offers_alternatives
from crossmodalrag.index.scripts import fold, is_function_bigram, segment_cjk
from crossmodalrag.index.stems import snowball
from crossmodalrag.retrieval.stopwords import BY_LANGUAGE, guess_language

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")  # "John's" is one word: its "s" never stands alone
_POSSESSIVE = re.compile(r"['\u2019]s$")
SNOWBALL = {"en": "english", "de": "german", "es": "spanish", "fr": "french"}
# Words that carry the answer even though they are function words (or look like the question's).
KEPT = frozenset("yes no not never none nothing nobody neither nor ja nein nicht kein keine sí si oui non".split())
# Function words that only link a restated opening to the answer ("... agencies on 22 October").
LINKS = frozenset(
    "on in at to by for of from as is was are were be been that because with about include includes".split()
)
# "... because it was bold": a pronoun and a copula after the restated opening say nothing either.
PRONOUN_COPULA = frozenset("it's he's she's that's they're".split())
PRONOUNS, COPULAS = frozenset("it he she they this that these those".split()), frozenset("is was are were".split())
_EDGES = " \t,;:-\u2013\u2014"
MIN_CLIPPED = 4  # "temp", "info", "repo": shorter clippings ("art", "pro") are words of their own
# Words that place the answer in time ("his turtles to the beach in Tampa yesterday"): to a question
# that does not ask when, they are no part of the answer, like a function word.
WHEN_WORDS = frozenset("yesterday today tonight recently lately".split())
# What opens a phrase belonging to the noun before it: cut as a restatement of the question ("in the
# third quarter of 2023" to a question naming 2023), it leaves that noun a fragment.
OF_PHRASE = frozenset("of de del du".split())
_ASKS_WHEN = re.compile(r"\b(?:when|how long|what (?:time|year|month|day|date)|which (?:year|month|week|day))\b", re.I)


# English past forms Snowball cannot bring back to their verb: an answer restates "Why did Nate
# choose ..." as "Nate chose ... because ...", "What did she make" as "She made ...".
_PAST = (
    "began begin begun begin bought buy brought bring built build came come caught catch chose choose "
    "chosen choose did do done do drew draw drawn draw drove drive driven drive ate eat eaten eat fell fall "
    "fallen fall felt feel found find flew fly flown fly forgot forget forgotten forget got get gotten get "
    "gave give given give went go gone go grew grow grown grow had have heard hear held hold kept keep "
    "knew know known know learnt learn left leave lost lose made make meant mean met meet paid pay ran run "
    "rode ride ridden ride said say saw see seen see sold sell sent send sang sing sung sing sat sit spoke "
    "speak spoken speak spent spend stood stand took take taken take taught teach told tell thought think "
    "threw throw thrown throw wore wear worn wear won win wrote write written write became become broke "
    "break broken break has have does do"
).split()
IRREGULAR = dict(zip(_PAST[::2], _PAST[1::2], strict=True))


def stem(word: str, language: str) -> str:
    folded = fold(_POSSESSIVE.sub("", word.lower()))
    if language == "en":
        folded = IRREGULAR.get(folded, folded)
    return snowball(SNOWBALL[language]).stemWord(folded) if language in SNOWBALL else folded


def without_echo(answer: str, question: str) -> str:
    """`answer` without a leading restatement of `question` and a trailing phrase repeating it."""
    words = list(_WORD.finditer(answer))
    language, asked, stopwords = _asked(question)
    if not _ASKS_WHEN.search(question):
        stopwords |= WHEN_WORDS
    kinds = [_kind(match.group(0).lower(), language, asked, stopwords) for match in words]
    if kinds and kinds[0] == "kept":
        return answer  # "No, she is not part of it": a yes or no with its reason is short already
    said = [stem(match.group(0), language) in asked for match in words]  # function words too
    start, end = _opening(kinds, words, said), _closing(kinds, words)
    kept = words[start:end]
    if not any(kind in ("new", "kept") for kind in kinds[start:end]) or not kept:
        return answer
    return answer[kept[0].start() if start else 0 : kept[-1].end() if end < len(words) else len(answer)].strip(_EDGES)


def restates_question(answer: str, question: str) -> bool:
    """Whether a short answer only repeats the question's own words ("What kind of painting does John
    have?" answered "painting"): it names nothing the question did not, so it answers nothing. Not
    for a question offering alternatives ("... a national park or a theme park?": naming one is the
    answer) nor a statement (restating a claim affirms it)."""
    if offers_alternatives(question) or is_statement(question):
        return False
    language, asked, stopwords = _asked(question)
    kinds = {_kind(word.lower(), language, asked, stopwords, clipped=True) for word in _words(answer)}
    return "echo" in kinds and not kinds & {"new", "kept"}


def _words(text: str) -> list[str]:
    """The words of `text`, a Chinese or Japanese run as its character bigrams, as the index reads
    it (index/scripts.py): `\\w+` takes 和王磊讨论了什么数据迁移方案 for one word, and the answer
    数据迁移方案 for another."""
    return _WORD.findall(segment_cjk(text))


def _asked(question: str) -> tuple[str, set[str], frozenset[str]]:
    """The question's language, its words stemmed (a CJK run whole and as its bigrams), and that
    language's function words."""
    words = list(dict.fromkeys(_WORD.findall(question) + _words(question)))
    language = guess_language([w.lower() for w in words])
    return language, {stem(word, language) for word in words}, BY_LANGUAGE.get(language, frozenset())


def _kind(word: str, language: str, asked: set[str], stopwords: frozenset[str], clipped: bool = False) -> str:
    """`clipped`: a word the question says in full also counts as said clipped ("a temp job" to "what
    temporary job ...?": LoCoMo's answer is that the conversation never says which)."""
    if word in KEPT:
        return "kept"
    if word in stopwords or is_function_bigram(word):  # 什么, です: a CJK question's grammar
        return "function"
    short = stem(word, language)
    if short in asked:
        return "echo"
    if clipped and len(short) >= MIN_CLIPPED and any(a.startswith(short) and len(a) > len(short) + 1 for a in asked):
        return "echo"
    return "new"


def _opening(kinds: list[str], words: list[re.Match], said: list[bool]) -> int:
    """How many leading words restate the question: up to its last word the question also says
    ("... the hair color he did"), plus the linking words right after it (so "his" in "Nate relies
    on his turtles" stays) and a pronoun with its copula ("because it was bold")."""
    run = 0
    while run < len(kinds) and kinds[run] in ("echo", "function"):
        run += 1
    echoed = [i for i in range(run) if kinds[i] == "echo" or said[i]]
    if not any(kinds[i] == "echo" for i in echoed):
        return 0  # only function words in common: nothing is restated
    cut = echoed[-1] + 1
    while cut < len(words) - 1 and words[cut].group(0).lower() in LINKS:
        cut += 1
    following = [match.group(0).lower() for match in words[cut : cut + 3]]  # something must be left after them
    if len(following) >= 2 and following[0] in PRONOUN_COPULA:
        return cut + 1
    if len(following) == 3 and following[0] in PRONOUNS and following[1] in COPULAS:
        return cut + 2
    return cut


def _closing(kinds: list[str], words: list[re.Match]) -> int:
    """Where a trailing phrase repeating the question starts (a function word opening a run of
    echoed and function words: "for cheer and joy"); the length of the answer when there is none,
    or when that phrase completes the noun before it (OF_PHRASE)."""
    start = len(kinds)
    while start > 0 and kinds[start - 1] in ("echo", "function"):
        start -= 1
    while start < len(kinds) and kinds[start] == "echo":
        start += 1  # "fantasy stories" for "what kind of stories": the head noun stays
    if start == len(kinds) or "echo" not in kinds[start:] or words[start].group(0).lower() in OF_PHRASE:
        return len(kinds)
    return start
