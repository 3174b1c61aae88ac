"""The memory-hierarchy views (timeline, concepts, drift, forgetting, recall, distill, usage, stats).

The hierarchy itself (events, episodes, concepts: issue 11) does not exist in this version, so every
view says so, the same way on the CLI side (once its commands exist), in the API and in the console,
instead of showing an empty list that would read as "you have no concepts".
"""

from __future__ import annotations

from typing import Any, NoReturn

from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store

# view name -> (the command that will print it, what it shows)
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

NOT_BUILT = "the memory hierarchy is not built yet (issue 11)"


class MemoryNotBuilt(CMRAGError):
    """A memory-hierarchy view was asked for, but this version cannot build the hierarchy."""


def memory_view(store: Store, view: str) -> NoReturn | dict[str, Any]:
    """The payload of a memory-hierarchy view. Raises MemoryNotBuilt (always, in this version) or
    KeyError for an unknown view."""
    command, _ = MEMORY_VIEWS[view]
    raise MemoryNotBuilt(
        f"{NOT_BUILT}: `{command}` and `mem build-memory` do not exist in this version",
        "Ask, Sources and Stats work now; this view fills in once `mem build-memory` exists and has run",
    )
