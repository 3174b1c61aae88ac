"""What form a query takes: a question, a question asking for an inference, or a statement to check.

The model's yes/no judge scores each form on its own scale whatever the evidence (answer/verify.py
gives each its own gate threshold), and a statement is put to the model as the question it implies.
"""

from __future__ import annotations

import re

from crossmodalrag.retrieval.query import split_comparison

# A query that opens like a question or a request (or ends in "?") asks; anything else of a few
# words or more states something, and the gate's margin for it is read against its own threshold.
_ASKING = frozenset(
    "what when where who whom whose which why how is are was were am do does did can could should would will "
    "shall may might must has have had tell show list find give name describe explain summarize summarise".split()
    # German, Spanish, French, Portuguese: a question or request opens with one of these (accents as typed)
    + "wer wen wem wessen was wann wo woher wohin wie warum wieso weshalb welche welcher welches welchen welchem "
    "wieviel wieviele wofür woran womit wovon worüber wozu wodurch woraus worin "
    "nenne nennen nennt beschreibe beschreiben erkläre erklären "
    "qué quién quiénes cuándo dónde adónde cómo cuál cuáles cuánto cuánta cuántos cuántas nombre nombra "
    "describa explique explica qui quoi quand où comment pourquoi quel quelle quels quelles combien "
    "quem quando onde como qual quais quanto quantos quantas "
    # Vietnamese questions may open with theirs ("Ai là ...", "Tại sao ...")
    "ai gì nào đâu sao tại".split()
)
_ASKING_LAST = frozenset("gì ai nào đâu không chưa sao nhiêu".split())  # Vietnamese puts them last
# A question mark in any script (full-width in Chinese and Japanese, Arabic), or Spanish's opening one.
_ASKS = re.compile(r"[?\uff1f\u061f][\s\"'\u201d\u300d\u300f)\uff09]*\Z|\A\s*\u00bf")
# Chinese, Japanese and Korean questions often end without a mark; their question words do not
# occur in claims (Japanese か ends a question as a mark would, and so does は: "... the one who said it は").
_CJK_ASKING = re.compile(
    r"什么|什麼|谁|誰|哪|几|幾|多少|为什么|為什麼|怎么|怎麼|怎样|怎樣|如何|何时|何時|吗|嗎|呢"
    r"|何|いつ|どこ|どの|どれ|どう|どんな|なぜ|いくつ|いくら|だれ|なに|なん|[かは][。\s]*\Z"
    r"|무엇|누구|언제|어디|어떻게|얼마|몇|까[.\s]*\Z"
)
MIN_STATEMENT_WORDS = 4
# What a statement's evidence answer opens with when the model gave no verdict (answer/synthesize.py).
UNDECIDED = "Not settled: the language model could not tell from this evidence whether the statement is true."


def is_statement(query: str) -> bool:
    """A claim ("Vitamin D lowers blood pressure.") rather than a question or a request: no question
    mark, no question word or request verb first, and more than a few keywords."""
    words = re.findall(r"\w+", query.lower())
    if _ASKS.search(query) or _CJK_ASKING.search(query) or len(words) < MIN_STATEMENT_WORDS:
        return False
    if split_comparison(query):  # "Marco Bellini vs Marta Bellucci" asks how they differ: not "is this true?"
        return False
    return words[0] not in _ASKING and words[-1] not in _ASKING_LAST


# A question that asks what someone would or might do, or likely did ("Would Melanie enjoy Vivaldi?",
# "What job might Maria pursue?", "Based on his collections, ..."), asks for an inference: no excerpt
# states the answer, and the gate's judge says no to "does this excerpt answer it?" whatever the
# evidence (LoCoMo dev: 5 of the generation benchmark's 15 such questions fell below the questions' threshold,
# against 3 of its 60 other answerable ones). English words only: elsewhere such a question is a question.
_CONJECTURE = re.compile(r"\b(?:would|might|likely|probably|possibly)\b|^\W*based on\b", re.IGNORECASE)


def query_form(query: str) -> str:
    """The query's form: "statement" (a claim: `is_statement`), "conjecture" (a question asking for
    an inference) or "question"."""
    if is_statement(query):
        return "statement"
    return "conjecture" if _CONJECTURE.search(query) else "question"


# A question shaped for yes or no that offers alternatives ("Would Melanie be more interested in a
# national park or a theme park?", "Does John live close to a beach or the mountains?") asks which
# one; told nothing, the model answered "Yes" (LoCoMo dev: 2 of its 3 such answerable questions, the
# third withheld; told, it named "the beach" and "C. S. Lewis"). "and/or", "or not" and "yes or no"
# still ask yes or no.
AUXILIARY = frozenset("is are was were am do does did can could should would will has have had".split())
_ALTERNATIVES = re.compile(r"\w,?\s+or\s+\w", re.IGNORECASE)
_STILL_YES_NO = re.compile(r"\b(?:and/or|or not|yes or no)\b", re.IGNORECASE)
CHOICE_HINT = "(It asks which one: answer with one of the alternatives, not yes or no.)"


def offers_alternatives(query: str) -> bool:
    """Whether the query offers "X or Y" to choose from (English), not "and/or", "or not", "yes or no"."""
    return bool(_ALTERNATIVES.search(query)) and not _STILL_YES_NO.search(query)


def is_choice(query: str) -> bool:
    """A question between alternatives: it opens like a yes/no question and offers "X or Y" (English)."""
    words = re.findall(r"\w+", query.lower())
    return bool(words) and words[0] in AUXILIARY and offers_alternatives(query)


def as_question(query: str) -> str:
    """What the model is asked: the query itself, or for a statement, whether it is true. Asked to
    answer a bare claim, the model often replied the "insufficient evidence" marker where the evidence
    contradicts it, or wrote something unrelated ("Answer: 2001") (SciFact train through `mem ask
    --json`: 12 of the first 40 claims withheld at ff24e2c, 9 by the gate or the marker); put as a
    question, "no" is an answer it can cite. A question between alternatives (`is_choice`) is told
    to name one."""
    query = query.strip()
    if is_choice(query):
        return f"{query} {CHOICE_HINT}"
    return f"Is this true: {query.rstrip('.!')}?" if is_statement(query) else query
