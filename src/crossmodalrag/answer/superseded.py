"""An answer to a question about now that states what an older note said, where a newer one changes it.

"What is the current password rotation policy?" over a note of 2 April ("Passwords must be rotated
every 90 days") and one of 15 September ("Forced rotation every 90 days is dropped"): told which
note is newer (answer/prompt.py `newest_note`), the 1.5B model still answered "every 90 days", and
the judge passed it, once against both notes together (the older one carries it, +0.12), once
against the newer one alone, leaning no (-0.15) but within the claims' tolerance. A figure that
both the newest note on the question's subject and an older one state is what changed, or was
restated: a sentence stating it must be one the newest note supports, the judge leaning yes
(answer/verify.py). Whether the notes disagree is left to the judge; only figures are compared,
which a newer note repeats when it changes them ("moved from 16 November to 25 January").
"""

from __future__ import annotations

from crossmodalrag.answer.attribution import body_of, figures, flat_text
from crossmodalrag.answer.current import day, same_subject_by_date
from crossmodalrag.answer.prompt import claim_messages
from crossmodalrag.types import Evidence

NEWEST_MIN_MARGIN = 0.0  # the judge must lean yes: the claims' tolerance lets a "leans no" through
SUPERSEDED = "superseded"  # a Verdict.reason: asked about now, the newest note stating its figure does not say it


def newest_on_its_figures(claim: str, question: str, evidence: list[Evidence]) -> Evidence | None:
    """For a question about now (answer/current.py): the newest excerpt on its subject that states a
    figure of `claim` which an excerpt on the subject from an earlier day states too; else None."""
    dated = same_subject_by_date(question, evidence)  # newest first
    stated = figures(claim)
    if not dated or not stated:
        return None
    holds = [{figure for figure in stated if figure in flat_text(body_of(item))} for item in dated]
    newest = next((index for index, held in enumerate(holds) if held), None)
    if newest is None:
        return None
    older = [held for item, held in zip(dated, holds, strict=True) if day(item) < day(dated[newest])]
    return dated[newest] if holds[newest] & set().union(*older) else None


def newest_look(llm, question, evidence, checked, claims, judge) -> None:
    """For a question about now: judge a passed sentence stating a figure that an older note on the
    question's subject states too against the newest note stating it, alone (`newest_on_its_figures`);
    unless it leans yes there, it fails (`superseded`); passing, it cites that note (`attributed`).
    `checked` are answer/verify.py's Verdicts, `judge` its yes-minus-no margins."""
    retried, prompts = [], []
    for verdict, claim in zip(checked, claims, strict=True):
        newest = newest_on_its_figures(claim, question, evidence) if verdict.supported else None
        if newest is not None and verdict.judged != [newest.id]:
            retried.append((verdict, newest.id))
            prompts.append(claim_messages(question, evidence, claim, [newest.id], verdict.short))
        elif newest is not None:
            retried.append((verdict, None))
    margins = iter(judge(llm, prompts) if prompts else [])
    for verdict, newest in retried:
        if newest is not None:
            verdict.margin, verdict.judged, verdict.added, verdict.attributed = next(margins), [newest], [], newest
        if verdict.margin < NEWEST_MIN_MARGIN:
            verdict.supported, verdict.reason = False, SUPERSEDED
