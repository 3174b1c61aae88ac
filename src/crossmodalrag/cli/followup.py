"""A follow-up in `mem chat` ("And what version is it on now?") names nothing of its own to search
for: its topic is the previous question's. Without it the search found whatever else had a version
(a library's 1.0.0 for a question about Helios' Postgres).

The rule, narrow on purpose: a question is read as a follow-up when it has no topic words at all
("Why?", "And since when?"), or when it refers back with a pronoun (it, that, they, …) and its own
topic words all come from the previous question but one at most (a time it names aside: "What did
she do yesterday?", "And who proposed it?"). It is then asked with the previous question's other
topic words added after a dash, before its question mark (which tells a question from a claim:
answer/forms.py), and the answer says so in a notice. What it was asked with is the next question's
"previous question" (cli/chat.py), so a chain of follow-ups keeps the topic the conversation began
with. Not in brackets: a capitalised word after "(" reads as a sentence's first word, not a name, and
the answer's subject check (answer/subjects.py) then knew only some of the names the previous question
asked about.
"""

from __future__ import annotations

import re

from crossmodalrag.retrieval.dates import ASKING_WORDS, read_times
from crossmodalrag.retrieval.stopwords import ENGLISH

WORDS = re.compile(r"\w+")
REFERS_BACK = frozenset("it its they them their he him his she her there that this those these".split())


def with_previous_topic(question: str, previous: str | None) -> tuple[str, list[str]]:
    """(the question to ask, the previous question's topic words it was given; [] when it stands alone)."""
    if previous is None:
        return question, []
    words = [word.lower() for word in WORDS.findall(question)]
    own = {word for word in words if not _asks_only(word)}
    earlier = _topic_words(previous)
    carried = [word for word in earlier if word.lower() not in own]
    # Referring back, a time it names narrows when, not what ("What did she do yesterday?"); alone, a
    # time is the topic ("What did I do in August 2024?": what is dated then).
    untimed = {word.lower() for word in WORDS.findall(read_times(question)[1]) if not _asks_only(word.lower())}
    # One word of its own beside the pronoun is what it asks of the same topic ("And who proposed it?"):
    # read alone, its one word became the topic, and the next follow-up searched with "proposed" only.
    refers_back = any(word in REFERS_BACK for word in words) and len(untimed - {w.lower() for w in earlier}) <= 1
    follows = not own or refers_back
    if not follows or not carried:
        return question, []
    body = question.rstrip().rstrip("?!.\uff1f")
    return f"{body} \u2014 {' '.join(carried)}{question.rstrip()[len(body) :]}", carried


def _topic_words(question: str) -> list[str]:
    return list(dict.fromkeys(word for word in WORDS.findall(question) if not _asks_only(word.lower())))


def _asks_only(word: str) -> bool:
    """A function word, or one a question asks with and not about ("when did that happen?")."""
    return word in ENGLISH or word in ASKING_WORDS


def follow_up_notice(carried: list[str]) -> str:
    return f"read as a follow-up: searched with {' '.join(carried)} from the previous question"
