"""The memory-hierarchy views (timeline, concepts, drift, forgetting, recall, distill, usage, stats)
as one payload each: what `mem <view> --json`, the API's `/<view>` and the console show.

Views read only: recall cards not cached yet are shown as template cards without being stored (the
API's connections are read-only). Until `mem build-memory` has made a node, every view except the
stats and the usage log says so instead of showing empty lists that would read as "you have no concepts".
"""

from __future__ import annotations

from typing import Any, Callable

from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store

# view name -> (the command that prints it, what it shows)
MEMORY_VIEWS: dict[str, tuple[str, str]] = {
    "timeline": ("mem timeline", "episodes (sessions of related work), oldest first"),
    "concepts": ("mem concepts", "recurring topics ranked by centrality"),
    "drift": ("mem drift", "how each concept moved over time, one chart per concept"),
    "forgetting": ("mem forgetting", "important things you have not touched in a while"),
    "recall": ("mem recall", "study cards drawn from your own evidence"),
    "distill": ("mem distill", "the few chunks that stand for each episode or concept"),
    "usage": ("mem usage", "what you looked at (opt-in usage log)"),
    "memory-stats": ("mem memory-stats", "node and edge counts per level"),
}

NOT_BUILT = "the memory hierarchy is not built yet"


class MemoryNotBuilt(CMRAGError):
    """A memory-hierarchy view or level was asked for before `mem build-memory` made its nodes."""


# What each `mem <view>` shows without options (cli/memory.py): the API's defaults too.
DEFAULTS: dict[str, dict[str, Any]] = {
    "timeline": {"limit": 50, "project": None},
    "concepts": {"top": 20},
    "drift": {"top": 10, "min_support": 2},
    "distill": {"top": 20},
    "usage": {"top": 20},
    "forgetting": {"level": "concept", "top": 10, "min_support": 1},
    "recall": {"level": "all", "top": 10, "min_support": 1},
    "memory-stats": {},
}


def _payloads(settings: Settings, chosen: dict[str, Any]) -> dict[str, Callable[[Store], dict[str, Any]]]:
    from crossmodalrag.memory import concepts, distill, drift, episodes, forgetting, recall, stats, usage

    half_life = settings.usage_halflife_days
    return {
        "timeline": lambda store: {"episodes": episodes.timeline(store, chosen["limit"], chosen["project"])},
        "concepts": lambda store: {"concepts": concepts.list_concepts(store, chosen["top"])},
        "drift": lambda store: {"concepts": drift.drift_view(store, chosen["top"], chosen["min_support"])},
        "forgetting": lambda store: {
            "items": forgetting.forgetting(store, chosen["level"], chosen["top"], chosen["min_support"], half_life)
        },
        "recall": lambda store: {
            "cards": recall.recall_cards(
                store, chosen["level"], chosen["top"], chosen["min_support"], half_life, write=False
            )
        },
        "distill": lambda store: {"nodes": distill.distill_view(store, chosen["top"])},
        "usage": lambda store: usage.usage_view(store, chosen["top"]),
        "memory-stats": lambda store: stats.memory_stats(store),
    }


def memory_view(
    store: Store, view: str, settings: Settings | None = None, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The payload of a memory-hierarchy view; `options` are its CLI command's (limit, project, level,
    top, min_support: see DEFAULTS), the rest their CLI defaults. Raises MemoryNotBuilt before the
    first build, or KeyError for an unknown view."""
    command, _ = MEMORY_VIEWS[view]
    if view not in ("memory-stats", "usage") and not _built(store):
        raise MemoryNotBuilt(
            f"{NOT_BUILT}: `{command}` shows it once `mem build-memory` has run",
            "run `mem build-memory` (notes need a language model, git commits do not); Ask, Sources and Stats work now",
        )
    chosen = {**DEFAULTS[view], **(options or {})}
    return _payloads(settings or Settings(db_path=store.path), chosen)[view](store)


def _built(store: Store) -> bool:
    return store.conn.execute("SELECT 1 FROM memory_nodes LIMIT 1").fetchone() is not None
