"""`mem build-memory`: run the levels in order, each skipped with one line when what it needs is missing.

Order: events (LLM; git without) -> episodes -> concepts (embeddings) -> graph -> drift -> distill.
A level that cannot run says why and what to run; the others still run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.memory.events import Extraction, Progress, build_events
from crossmodalrag.store import Store
from crossmodalrag.wording import counted

LEVELS = ("event", "episode", "concept", "graph", "drift", "distill")


@dataclass
class BuildReport:
    levels: dict[str, dict[str, Any]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ran(self) -> bool:
        return any("skipped" not in result for result in self.levels.values())

    def to_dict(self) -> dict[str, Any]:
        return {"levels": self.levels, "notices": self.notices, "seconds": round(self.seconds, 3)}


def require_numpy() -> None:
    from importlib.util import find_spec

    if find_spec("numpy") is None:
        raise MissingExtraError("the memory hierarchy needs numpy", 'pip install -e ".[memory]"')


def extraction_llm(settings: Settings, model: str | None = None):
    """(the model that extracts events, or None, why not, and what to do): CMRAG_EXTRACT_MODEL / --model,
    else the LLM."""
    from crossmodalrag.answer.llm import load_llm

    try:
        _choose_extraction_model(settings, model)
        return load_llm(settings), "", ""
    except CMRAGError as error:
        return None, error.message, error.hint


def _choose_extraction_model(settings: Settings, model: str | None) -> None:
    """Point the settings at the model chosen for extraction. A GGUF path names a file; anything else
    is a server's model name, which the llamacpp backend ignores: it extracted with
    CMRAG_LLM_MODEL_PATH instead. Raises LLMUnavailable for either mistake."""
    from crossmodalrag.answer.llm import LLMUnavailable, choose_provider

    chosen = model or settings.extract_model
    if not chosen:
        return
    named_by = "--model" if model else settings.origin("extract_model")
    path = Path(chosen).expanduser()
    if path.is_file():
        settings.llm_model_path = str(path.resolve())
    elif chosen.lower().endswith(".gguf"):
        raise LLMUnavailable(
            f"no GGUF model at {chosen} (from {named_by}): no such file", f"check the path {named_by} gives"
        )
    else:
        settings.llm_model = chosen
        if choose_provider(settings)[0] == "llamacpp":
            raise LLMUnavailable(
                f"{chosen} (from {named_by}) is no file, and the llamacpp backend loads a GGUF file"
                " (a model name is for an ollama or openai server)",
                f"give {named_by} the path of a GGUF file",
            )


def semantic_index(store: Store, settings: Settings):
    from crossmodalrag.retrieval.semantic import open_semantic

    status = open_semantic(store, settings)
    return status.index, status.notice


def build_memory(
    store: Store,
    settings: Settings,
    levels: tuple[str, ...] = LEVELS,
    limit: int | None = None,
    max_minutes: float | None = None,
    model: str | None = None,
    progress: Progress | None = None,
    llm=None,
    semantic=None,
) -> BuildReport:
    """Build the requested levels. `llm` / `semantic` override what settings would load (tests, benches)."""
    require_numpy()
    started, report = time.monotonic(), BuildReport()
    if semantic is None:
        semantic, notice = semantic_index(store, settings)
        if notice:
            report.notices.append(notice)
    why = hint = ""
    if llm is None and ("event" in levels or "concept" in levels):  # concepts are named by the model too
        llm, why, hint = extraction_llm(settings, model)
        if llm is None and model:  # asked for by name: not silently built without it
            raise CMRAGError(
                f"the model {model} cannot be used: {why}", hint or "check the path or name given to --model"
            )
    if "event" in levels:
        how = Extraction(llm, semantic, settings.extract_window_chars, settings.event_support_min_cosine)
        events = build_events(store, how, limit, max_minutes, progress)
        report.levels["event"] = events.to_dict()
        if events.unreachable:
            if model:  # asked for by name: not silently built without it (as when it cannot be loaded)
                raise CMRAGError(
                    f"the model {model} cannot be used: {events.unreachable}",
                    events.unreachable_hint or "start its server",
                )
            llm, why = None, f"the model server is unreachable: {events.unreachable}"  # concepts get word names
        if events.waiting:
            report.notices.append(_waiting_notice(events, why, hint))
    if llm is not None and max_minutes is not None and time.monotonic() - started > max_minutes * 60:
        llm = None  # the levels above take no model call past the budget: concepts get their word names
        report.notices.append("the time budget is spent: new concepts are named by their words, not by the model")
    _run_upper_levels(store, settings, levels, llm, semantic, report)
    report.seconds = time.monotonic() - started
    return report


def _waiting_notice(events, why: str, hint: str = "") -> str:
    """`hint`: what the failed model load said to do (fix the setting that names no file, say)."""
    if events.unreachable:
        hint = events.unreachable_hint or "start the model server, or set CMRAG_LLM_BASE_URL; `mem doctor` checks it"
    hint = hint or "`mem models install --llm`, or set CMRAG_EXTRACT_MODEL"
    # load_llm's own message is "no language model (none is configured)": its reason alone, unnested
    why = why.removeprefix("no language model (").removesuffix(")") if why.startswith("no language model (") else why
    return (
        f"{counted(events.waiting, 'source')} {'waits' if events.waiting == 1 else 'wait'} for a language model ({why})"
        + (
            f"; {counted(events.events_waiting, 'event')} of edited ones out of retrieval until it reads them again"
            if events.events_waiting
            else ""
        )
        + ("; git commits became events without one" if events.from_git else "")
        + f" (hint: {hint})"
    )


def _run_upper_levels(store: Store, settings: Settings, levels, llm, semantic, report: BuildReport) -> None:
    from crossmodalrag.memory import concepts, distill, drift, episodes, graph

    has_events = store.conn.execute("SELECT 1 FROM memory_nodes WHERE level = 'event' LIMIT 1").fetchone()
    why = "run `mem build-memory --level event` (needs a language model for notes)"
    if "event" in report.levels:  # it just ran: its line (and a waiting notice) says why it made none
        why = "the event level made none from the sources there are"
    no_events = {"skipped": f"no events yet: {why}"}
    events = episodes.load_events(store.conn) if has_events else []
    model = semantic.embedder.identity.name if semantic is not None else None  # the events' vectors' scale
    steps = {
        "episode": lambda: episodes.build_episodes(store, settings.episode_gap_hours, events),
        "concept": lambda: concepts.build_concepts(store, settings.concept_sim_threshold, llm, events, model),
        "graph": lambda: graph.build_graph(store),
        "drift": lambda: drift.build_drift(store, settings.drift_window_days),
        "distill": lambda: distill.build_distill(store, settings.distill_compression_ratio),
    }
    for level, step in steps.items():
        if level in levels:
            report.levels[level] = step() if has_events else dict(no_events)
