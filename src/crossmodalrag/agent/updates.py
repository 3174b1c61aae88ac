"""Knowledge updates without a model: does a new memory restate an old one's fact with another value?

"The staging key rotates weekly" after "Deploys need the VPN; the staging key rotates monthly":
a clause of each says the same thing about the same subject except for one slot. In content words,
old = P A S and new = P B S: the same start P (the subject, its first word, and usually the
attribute), the same end S, and one contiguous run replaced (A -> B, one to three words each: the
old and the new value), with P and S together at least two words and at least half of either
clause. A clause that only adds words ("... rotates monthly, at noon") is an addition, not an
update; a clause that differs only by a negation ("does not support") is one. Two words swapped in
different places are a different sentence, not a changed value, except two that changed places after
the subject: "I prefer spaces over tabs" turns "I prefer tabs over spaces" around. A short fact shares
fewer than two words ("our office is in Berlin" -> "Munich"): it is an update when its value is a name
or number at its end and the words before it hold one value at a time (see _short_fact_update).

Only a state has a value to replace. The changed run must lie after the clause's verb: before it, it
names another subject ("Ticket 4521 is assigned to Ada" and "Ticket 4522 ...", "the log level in
production is debug" and "... in staging ..."). And two clauses in the past tense are two events, both
true ("I went to the gym on Monday", "... on Tuesday"; "Fixed the login bug", "Fixed the logout bug"):
a happening is not replaced by another happening. "The meeting moved to Thursdays" is still updated by
"The meeting is on Fridays", a state.

The value must also stay a value of the same thing. A change on both sides of a kept "for" or "of"
changes what the value is for ("Use port 5432 for Postgres", "Use port 6379 for Redis": two ports of
two services). A verb that holds many values at once (MANY_VALUED: "Alice owns the billing service",
"... the search service") gains one, it does not swap one. Two values of two kinds, phrases whose
last words differ ("Maria prefers dark mode in the editor", "... vim keybindings ..."), are two
settings, not one changed.

The new memory must also be about that fact: the clause holds at least half of its content words.
A long message that contains one sentence shaped like an older one ("Thanks, Mel." after
"Thanks, Melanie.", inside chat turns stored one by one) states no update.
Stemming is crude on purpose (rotates/rotated, monthly/month); the figures are in
docs/benchmarks.md (bench/agent_updates.py, and bench/agent_mcp.py for chat turns stored one by one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from crossmodalrag.retrieval.stopwords import ENGLISH

NEGATIONS = frozenset({"not", "no", "never", "dont", "doesnt", "isnt", "wont", "cannot", "nor"})
STOP = ENGLISH - NEGATIONS | {"now", "currently", "instead", "actually", "anymore", "still"}
SENTENCES = re.compile(r"(?:[^.;!?\n]|[.](?=\S))+[.;!?]*")  # "3.10" stays whole
CLAUSES = re.compile(r",\s+(?:and|but|so)\s+|\s+but\s+")
WORDS = re.compile(r"[a-z0-9][a-z0-9_'-]*")
CASED_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'-]*")  # WORDS before lowercasing
SUFFIXES = ("ingly", "edly", "ing", "ly", "ed", "es", "s")
MAX_CHANGED = 3
LABEL = re.compile(r"\s*([A-Z][\w'-]*(?: [A-Z][\w'-]*)?):\s+")
MIN_SHARE_OF_NEW = 0.5  # the updating clause's share of the new memory's content words
ASIDES = re.compile(r"\[[^\[\]\n]*\]")

# Verbs a clause's subject ends at. Auxiliaries and modals are certain; another verb is guessed from
# its ending (VERB_ENDING) within the first words, after a word that is no function word: "the staging
# key rotates", not "for the caches".
PRESENT_AUXILIARIES = frozenset(
    "is are am isn't aren't has have hasn't haven't does do doesn't don't can can't cannot will won't shall"
    " must should shouldn't may might would wouldn't could couldn't".split()
)
PAST_AUXILIARIES = frozenset("was were wasn't weren't had hadn't did didn't".split())
PRONOUNS = frozenset("i we you they he she it".split())  # the subject, whole: "we use Redis"
CONTRACTED = re.compile(r"^(?:i|we|you|they|he|she|it|that|there|what|who|here)'(?:s|re|m|ve|ll|d)$")
# Common irregular past tenses (regular ones end in -ed).
IRREGULAR_PAST = frozenset(
    "went came got made took saw met bought found gave left told said ran wrote ate drank built sent spent"
    " brought thought felt kept lost paid sold won began broke chose drove flew forgot grew knew led rode"
    " sang sat slept spoke stood swam taught threw woke wore caught fought heard held became".split()
)
PARTICIPLES = IRREGULAR_PAST | frozenset("gone done seen taken given eaten written known flown grown".split())
NOT_PAST = frozenset("need speed feed seed bed red shed bred hundred sacred naked wicked".split())
VERB_ENDING = re.compile(r"[a-z]{2,}(?:[^su']s|ed)$")
MAX_GUESSED_SUBJECT = 4  # words before a verb guessed from its ending
SINGLE_VALUED = frozenset("live reside prefer".split())  # stems: one lives in one place at a time
# Verbs whose subject holds many objects at once: one owns several services, loves several cities.
MANY_VALUED_FORMS = (
    "own owns maintain maintains like likes love loves enjoy enjoys know knows speak speaks visit visits"
)
# Relations that tie a value to what it belongs to: "port 5432 for Postgres", "version 3 of the SDK".
OWNER_RELATIONS = frozenset({"for", "of"})


@dataclass(frozen=True)
class Clause:
    """A statement's content words, how many of the first ones are its subject (0: no verb found, the
    subject unknown, or a pronoun), and whether it tells of the past (an event, not a current state)."""

    words: list[str]
    subject: int = 0
    past: bool = False
    verb: bool = False  # a verb was found: the clause states something of its subject
    named: frozenset[str] = frozenset()  # its names and numbers (capitalised after its first word, digits)
    framed: tuple[str, ...] = ()  # its content words with OWNER_RELATIONS kept in place


def stem(word: str) -> str:
    word = word.replace("'", "")
    for suffix in SUFFIXES:
        if len(word) - len(suffix) >= 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(clause: str, keep: frozenset[str] = frozenset()) -> list[str]:
    """The clause's words that carry its fact, stemmed, in order (and the stop words in `keep`)."""
    return [stem(w) for w in WORDS.findall(clause.lower()) if w in keep or w.replace("'", "") not in STOP]


def clauses(text: str) -> list[Clause]:
    """Each statement in the text. A sentence ending in `?` or `!` states no fact (a question, a
    greeting, a cheer: "Hey Mel!" is no value of Mel to update), and neither does a bracketed aside,
    such as the caption of a shared photo ("[shares a photo: a bowl with ...]")."""
    found = []
    for sentence in SENTENCES.findall(ASIDES.sub(" ", text)):
        if sentence.rstrip().endswith(("?", "!")):
            continue
        found += [clause for part in CLAUSES.split(sentence) if len((clause := read_clause(part)).words) >= 2]
    return found


def read_clause(text: str) -> Clause:
    tokens = WORDS.findall(text.lower())
    verb = verb_position(tokens)
    subject = 0 if verb is None else len(content_words(" ".join(tokens[:verb])))
    framed = tuple(content_words(text, OWNER_RELATIONS))
    return Clause(content_words(text), subject, tells_of_the_past(tokens), verb is not None, named_words(text), framed)


def named_words(text: str) -> frozenset[str]:
    """The clause's words that name something (capitalised, after its first word) or give a number, stemmed."""
    words = CASED_WORDS.findall(text)
    return frozenset(
        stem(word.lower())
        for i, word in enumerate(words)
        if (i and word[0].isupper()) or any(c.isdigit() for c in word)
    )


def verb_position(tokens: list[str]) -> int | None:
    """Where the clause's first verb is (the subject is the words before it), or None if none is seen."""
    if tokens and tokens[0] in PRONOUNS:
        return 1
    for i, token in enumerate(tokens[1:], start=1):
        if token in PRESENT_AUXILIARIES or token in PAST_AUXILIARIES or CONTRACTED.match(token):
            return i
        guessed = token in IRREGULAR_PAST or (VERB_ENDING.match(token) and token not in NOT_PAST)
        if guessed and i <= MAX_GUESSED_SUBJECT and tokens[i - 1].replace("'", "") not in STOP:
            return i
    return None


def tells_of_the_past(tokens: list[str]) -> bool:
    """Is the clause in the past tense ("fixed the login bug", "I went", "I have fixed", "was moved")?
    A present auxiliary makes it a state ("the docs are hosted on Netlify"), unless it forms a perfect
    ("has fixed")."""
    past = False
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in ("has", "have") or token.endswith("'ve"):
            if not _is_past_form(following, PARTICIPLES):
                return False  # "has three replicas": a state
            past = True
        elif token in PRESENT_AUXILIARIES or CONTRACTED.match(token):
            return False
        elif token in PAST_AUXILIARIES or _is_past_form(token, IRREGULAR_PAST):
            past = True
    return past


def _is_past_form(token: str, irregular: frozenset[str]) -> bool:
    return token in irregular or (len(token) >= 4 and token.endswith("ed") and token not in NOT_PAST)


def split_label(text: str) -> tuple[str, str]:
    """A leading "Name:" label (a transcript's speaker, a topic) and the text after it. The label says
    who spoke or what about, so it must match, but it is not the sentence's subject: "Jon: Thanks for
    the support" and "Jon: Thanks for having my back" share no subject."""
    match = LABEL.match(text)
    return (match.group(1).lower(), text[match.end() :]) if match else ("", text)


# Stop words that decide what a statement says ("deploy before the freeze" / "after the freeze", "over
# budget" / "under budget"): a near duplicate must have the same ones.
RELATIONS = frozenset("before after above below over under up down on off in out into from to than against".split())
STATEMENT_STOP = STOP - RELATIONS
SET_OFF = re.compile(r"[,;:!?\n]|[.](?!\S)|\s[-\u2013\u2014]\s")  # a comma, colon, dash, sentence end


def says_the_same(old: str, new: str) -> bool:
    """Does `new` say what `old` says, in other words? The same words in the same order, up to case,
    punctuation, inflection and stop words that carry no relation (RELATIONS). One word set off by
    punctuation ("Always: the build runs on 3.11", "the build runs on 3.11, always") may stand
    elsewhere. Anything else is another statement, however close its embedding: a word of one missing
    from the other (a name, a value: "alpha private fact 12" and "beta private fact 12") or words
    swapped ("tabs over spaces", "spaces over tabs"; "Ana is the owner and Ben the reviewer")."""
    old_words, new_words = _statement_words(old), _statement_words(new)
    if old_words == new_words:
        return True
    if sorted(old_words) != sorted(new_words):
        return False
    movable = _set_off_words(old) | _set_off_words(new)
    return any(len(rest := _without(old_words, word)) >= 2 and rest == _without(new_words, word) for word in movable)


def _statement_words(text: str) -> list[str]:
    return [stem(w) for w in WORDS.findall(text.lower()) if w.replace("'", "") not in STATEMENT_STOP]


def _set_off_words(text: str) -> set[str]:
    """Words that stand alone between punctuation marks: a sentence adverb ("Always:", ", nightly.")."""
    return {words[0] for part in SET_OFF.split(text) if len(words := _statement_words(part)) == 1}


def _without(words: list[str], word: str) -> list[str]:
    return [w for w in words if w != word]


def restates_with_new_value(old: str, new: str) -> bool:
    """Is `new` an update of a fact stated in `old` (same subject, changed value)?"""
    (old_label, old), (new_label, new) = split_label(old), split_label(new)
    if old_label and new_label and old_label != new_label:
        return False  # "Staging: ..." and "Production: ..." are about different things
    new_clauses = clauses(new)
    total = sum(len(clause.words) for clause in new_clauses)
    return any(
        _clause_update(o, n) for n in new_clauses if len(n.words) >= MIN_SHARE_OF_NEW * total for o in clauses(old)
    )


def _clause_update(old_clause: Clause, new_clause: Clause) -> bool:
    old, new = old_clause.words, new_clause.words
    if _head(old) != _head(new):
        return False  # another subject: "Alice prefers tea" is no update of "Bob prefers tea"
    if old_clause.past and new_clause.past:
        return False  # two events, both true: "went to the gym on Monday", "... on Tuesday"
    if _swapped(old_clause, new_clause):
        return True  # "prefer spaces over tabs" after "prefer tabs over spaces": the preference turned
    changes = [op for op in SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(changes) != 1:
        return False  # the same, or changed in more than one place
    _, old_start, old_end, new_start, new_end = changes[0]
    if old_start < old_clause.subject or new_start < new_clause.subject:
        return False  # the change names another subject: "Ticket 4521 is ..." and "Ticket 4522 is ..."
    gone, added = old[old_start:old_end], new[new_start:new_end]
    shared = len(old) - len(gone)
    if shared < 2 or shared < 0.5 * max(len(old), len(new)):
        return _short_fact_update(old_clause, new_clause, changes[0])
    if set(gone) ^ set(added) and set(gone) ^ set(added) <= NEGATIONS:
        return True  # "supports" -> "does not support"
    if not _same_thing(old_clause, new_clause, gone, added):
        return False
    return 1 <= len(gone) <= MAX_CHANGED and 1 <= len(added) <= MAX_CHANGED


MANY_VALUED = frozenset(stem(form) for form in MANY_VALUED_FORMS.split())


def _same_thing(old_clause: Clause, new_clause: Clause, gone: list[str], added: list[str]) -> bool:
    """Is the changed run still a value of one and the same thing? Not when it spans a kept "for"/"of"
    (the value and what it is for both changed), when the verb holds many values at once, or when the
    two values are phrases of different kinds (their last words, what they are, differ)."""
    framed = SequenceMatcher(None, old_clause.framed, new_clause.framed, autojunk=False).get_opcodes()
    if sum(op[0] != "equal" for op in framed) > 1:
        return False  # "5432 for Postgres" -> "6379 for Redis": split only by a relation both keep
    verb = old_clause.words[old_clause.subject : old_clause.subject + 1] if old_clause.verb else []
    if verb and verb[0] in MANY_VALUED and new_clause.words[new_clause.subject : new_clause.subject + 1] == verb:
        return False  # "Alice owns the billing service" -> "... the search service": she owns both
    named = old_clause.named | new_clause.named
    kinds_differ = len(gone) >= 2 and len(added) >= 2 and gone[-1] != added[-1]
    return not (kinds_differ and not (set(gone) | set(added)) & named)


def _head(words: list[str]) -> str:
    """The clause's first content word, past a leading negation: "Do not deploy on Fridays" and "Do
    deploy on Fridays" (or "We deploy ..." and "We do not deploy ...") start alike."""
    return words[1] if words[0] in NEGATIONS and len(words) > 1 else words[0]


def _swapped(old_clause: Clause, new_clause: Clause) -> bool:
    """Are the clauses the same but for two words after the subject that changed places?"""
    old, new = old_clause.words, new_clause.words
    if len(old) != len(new):
        return False
    moved = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    if len(moved) != 2 or moved[0] < max(1, old_clause.subject, new_clause.subject):
        return False
    first, second = moved
    return old[first] == new[second] and old[second] == new[first]


def _short_fact_update(old_clause: Clause, new_clause: Clause, change: tuple[str, int, int, int, int]) -> bool:
    """A short fact shares too few words for the rule above: "our office is in Berlin" and "... in
    Munich" share one. It is an update when the change is the clause's last words, a name or number
    each side, and the words before it hold one value at a time: a subject and "is" ("my manager is
    Alice" -> "Bob") or a verb of one place or choice (SINGLE_VALUED: "I live in Paris" -> "London").
    Not "I visited Paris" (another verb), "my dentist is Alice" (another subject), "I love Paris" ->
    "London" (one loves both), nor "I like hiking" -> "swimming" (no name)."""
    _, old_start, old_end, new_start, new_end = change
    old, new = old_clause.words, new_clause.words
    if not (old_clause.verb and new_clause.verb and old_end == len(old) and new_end == len(new)):
        return False
    if not (1 <= old_end - old_start <= MAX_CHANGED and 1 <= new_end - new_start <= MAX_CHANGED):
        return False
    before = old[:old_start]  # == new[:new_start]: the one change runs to both ends
    one_value = old_start == old_clause.subject == new_clause.subject or before[-1] in SINGLE_VALUED
    return one_value and set(old[old_start:]) <= old_clause.named and set(new[new_start:]) <= new_clause.named
