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


# What `mem forgetting` and `mem recall` show without options (cli/memory.py): the API's defaults too.
DEFAULTS = {
    "forgetting": {"level": "concept", "top": 10, "min_support": 1},
    "recall": {"level": "all", "top": 10, "min_support": 1},
}


def _payloads(settings: Settings, options: dict[str, Any]) -> dict[str, Callable[[Store], dict[str, Any]]]:
    from crossmodalrag.memory import concepts, distill, drift, episodes, forgetting, recall, stats, usage

    half_life = settings.usage_halflife_days
    forgets, recalls = ({**DEFAULTS[view], **options} for view in ("forgetting", "recall"))
    return {
        "timeline": lambda store: {"episodes": episodes.timeline(store)},
        "concepts": lambda store: {"concepts": concepts.list_concepts(store)},
        "drift": lambda store: {"concepts": drift.drift_view(store)},
        "forgetting": lambda store: {
            "items": forgetting.forgetting(store, forgets["level"], forgets["top"], forgets["min_support"], half_life)
        },
        "recall": lambda store: {
            "cards": recall.recall_cards(
                store, recalls["level"], recalls["top"], recalls["min_support"], half_life, write=False
            )
        },
        "distill": lambda store: {"nodes": distill.distill_view(store)},
        "usage": lambda store: usage.usage_view(store),
        "memory-stats": lambda store: stats.memory_stats(store),
    }


def memory_view(
    store: Store, view: str, settings: Settings | None = None, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The payload of a memory-hierarchy view; `options` (level, top, min_support) for forgetting and
    recall, else their CLI defaults. Raises MemoryNotBuilt before the first build, or KeyError for an
    unknown view."""
    command, _ = MEMORY_VIEWS[view]
    if view not in ("memory-stats", "usage") and not _built(store):
        raise MemoryNotBuilt(
            f"{NOT_BUILT}: `{command}` shows it once `mem build-memory` has run",
            "run `mem build-memory` (notes need a language model, git commits do not); Ask, Sources and Stats work now",
        )
    return _payloads(settings or Settings(db_path=store.path), options or {})[view](store)


def _built(store: Store) -> bool:
    return store.conn.execute("SELECT 1 FROM memory_nodes LIMIT 1").fetchone() is not None
