"""Opt-in: the local language model picks which sessions lead an episodic or fusion answer.

The fused ranking often puts a right session 6th to 8th; MiniLM and BM25 in every form tried do not
tell the sessions apart (bench/agent_recall_ablation.py). The model does, as a judge, not as a
ranker: for the best turn of each of the first `sessions` sessions among the evidence found, it
gives the yes-minus-no logit margin of "does this excerpt help answer the question?" (the technique
of answer/verify.py), and the five with the highest margins lead. It reorders the evidence, never
changes which evidence is shown, so it has something to do only when more than five sessions are
shown (`--top-k 10`, as the benchmark asks; `mem ask`'s default top_k is 5). Each judgement reads
~200 tokens (~2.5 CPU seconds here), so it is off unless `CMRAG_RECALL_JUDGE_SESSIONS` is set, runs
only where `mem ask`/`mem chat` already use a model, and never in the MCP tools, whose calls must
answer within seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from crossmodalrag.answer.llm.base import LLMError
from crossmodalrag.errors import CMRAGError

if TYPE_CHECKING:
    from crossmodalrag.answer.llm import LLM
    from crossmodalrag.config import Settings
    from crossmodalrag.types import Hit

LEAD = 5  # the sessions whose order the judge decides (session recall@5's window)
EXCERPT_CHARS = 700  # a turn with its breadcrumb and the turn it replies to
QUESTION = "Does the excerpt contain information that helps answer the question? Answer yes or no."


@dataclass
class SessionJudge:
    """The model that judges, and how many of the first sessions it reads."""

    llm: "LLM"
    sessions: int = 8
    notices: list[str] = field(default_factory=list)  # where a failed judgement is reported

    def lead(self, question: str, hits: list["Hit"], session: Callable[["Hit"], Any]) -> list["Hit"]:
        """The hits with the LEAD sessions the model judges most relevant first (each by its best
        hit, as ranked), then every other hit in its order. A model error keeps the order."""
        firsts: dict[Any, Hit] = {}
        for hit in hits:
            if len(firsts) >= self.sessions:
                break
            firsts.setdefault(session(hit), hit)
        candidates = list(firsts.values())
        if len(candidates) <= LEAD:
            return hits  # nothing to choose between
        from crossmodalrag.answer.verify import judge  # only when judging: `mem ask --no-llm` never loads it

        try:
            margins = judge(self.llm, [prompt(question, hit) for hit in candidates])
        except LLMError as error:
            self.notices.append(f"sessions not judged: {error}")
            return hits
        ranked = sorted(range(len(candidates)), key=lambda i: (-margins[i], i))
        leading = [candidates[i] for i in ranked[:LEAD]]
        chosen = {id(hit) for hit in leading}
        return leading + [hit for hit in hits if id(hit) not in chosen]


def prompt(question: str, hit: "Hit") -> list[dict[str, str]]:
    """The question comes first, so every candidate's prompt shares it (llama.cpp reuses that prefix)."""
    from crossmodalrag.answer.prompt import JUDGE_SYSTEM

    user = f"Question: {question.strip()}\n\nExcerpt from a conversation:\n{hit.text[:EXCERPT_CHARS]}\n\n{QUESTION}"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def session_judge(settings: "Settings", notices: list[str]) -> SessionJudge | None:
    """The configured judge, or None when it is off (`recall_judge_sessions` 0) or no model loads
    (then `notices` says why, and the fused order stands)."""
    if not settings.recall_judge_sessions:
        return None
    from crossmodalrag.answer.llm import load_llm

    try:
        return SessionJudge(load_llm(settings), settings.recall_judge_sessions, notices)
    except CMRAGError as error:
        notices.append(f"sessions not judged: {error}")
        return None
