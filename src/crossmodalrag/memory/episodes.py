"""L2 episodes: a project's events split where the time between two of them passes a gap.

A project is a repository, a conversation, or a folder (notes, PDFs and screenshots side by side
form one cross-modal episode). Titles and summaries are deterministic, so a rebuild of the same
events writes nothing.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import TYPE_CHECKING, Any

from crossmodalrag.memory.nodes import Link, Node, delete_nodes, node_ids, rows, stable_id, with_evidence, write_nodes
from crossmodalrag.memory.sources import AGENT_MEMORIES, project_name
from crossmodalrag.store import Store
from crossmodalrag.store.params import in_batches
from crossmodalrag.types import iso_time

if TYPE_CHECKING:
    import numpy as np

KIND_ORDER = {"decision": 0, "fix": 1, "change": 2, "learning": 3, "plan": 4, "task": 5, "fact": 6}


@dataclass
class EventRow:
    id: str
    project: str
    time: float | None
    statement: str
    kind: str
    source_type: str
    vector: "np.ndarray | None"
    chunks: dict[int, float] = field(default_factory=dict)  # supporting chunk -> best score
    source_title: str = ""


def load_events(conn: sqlite3.Connection) -> list[EventRow]:
    """Supported events, oldest first, with their vectors and supporting chunks (what the levels above use)."""
    import numpy as np

    events = {
        row[0]: EventRow(
            row[0],
            AGENT_MEMORIES if row[5] == "memory" else row[1],  # events extracted before it was their project
            row[2],
            row[3],
            row[4],
            row[5],
            np.frombuffer(row[6], dtype=np.float32) if row[6] else None,
            source_title=row[7],
        )
        for row in conn.execute(
            "SELECT n.id, n.project, n.first_time, n.statement, n.kind, COALESCE(s.source_type, ''), n.vector,"
            " COALESCE(s.title, '')"
            " FROM memory_nodes n LEFT JOIN sources s ON s.id = n.source_id"
            " WHERE n.level = 'event' AND n.supported = 1 ORDER BY n.first_time IS NULL, n.first_time, n.id"
        )
    }
    for node_id, chunk_id, score in conn.execute(
        "SELECT e.node_id, e.chunk_id, MAX(COALESCE(e.score, 0)) FROM memory_evidence e"
        " JOIN memory_nodes n ON n.id = e.node_id WHERE n.level = 'event' GROUP BY e.node_id, e.chunk_id"
    ):
        if node_id in events:
            events[node_id].chunks[chunk_id] = score
    return [event for event in events.values() if event.chunks]  # nothing left to cite: not built on


def split_episodes(events: list[EventRow], gap_hours: float) -> list[list[EventRow]]:
    """Events grouped by project, each group cut where consecutive events are more than gap_hours apart."""
    gap = gap_hours * 3600.0
    episodes = []
    by_project = sorted(events, key=lambda e: (e.project, e.time or 0.0, e.id))
    for _, group in groupby(by_project, key=lambda e: e.project):
        current: list[EventRow] = []
        for event in group:
            if current and (event.time or 0.0) - (current[-1].time or 0.0) > gap:
                episodes.append(current)
                current = []
            current.append(event)
        episodes.append(current)
    return episodes


def project_label(members: list[EventRow]) -> str:
    """What an episode is called: a conversation by its title (its project is the session id, which
    keeps two chats of the same title apart), anything else by its folder's or repository's name."""
    first = members[0]
    if first.source_type == "conversation" and first.source_title.strip():
        return first.source_title.strip()
    return project_name(first.project)


def episode_label(title: str) -> str:
    """The project label an episode's title starts with (before its ": <dates> (<n> events)")."""
    return title.rsplit(": ", 1)[0]


def episode_node(members: list[EventRow]) -> Node:
    project = members[0].project
    times = [e.time for e in members if e.time is not None]
    first, last = (min(times), max(times)) if times else (None, None)
    span = (iso_time(first) or "")[:10]
    if last is not None and (iso_time(last) or "")[:10] != span:
        span += f" to {(iso_time(last) or '')[:10]}"
    leading = sorted(members, key=lambda e: (KIND_ORDER.get(e.kind, 9), e.time or 0.0))[:3]
    return Node(
        id=stable_id("episode", project, members[0].id),
        level="episode",
        title=f"{project_label(members)}: {span or 'undated'} ({len(members)} event{'' if len(members) == 1 else 's'})",
        statement=" ".join(e.statement for e in leading)[:400],
        project=project,
        first_time=first,
        last_time=last,
        links=member_links(members),
        vector=centroid([e.vector for e in members]),
        metadata={"events": len(members), "kinds": sorted({e.source_type for e in members})},
    )


def centroid(vectors: list["np.ndarray | None"]) -> bytes | None:
    import numpy as np

    present = [v for v in vectors if v is not None]
    if not present:
        return None
    mean = np.mean(present, axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32).tobytes()


def build_episodes(store: Store, gap_hours: float, events: list[EventRow] | None = None) -> dict[str, int]:
    """Rebuild L2 from the current events; unchanged episodes are not rewritten. Returns counts."""
    events = load_events(store.conn) if events is None else events
    groups = split_episodes(events, gap_hours)
    nodes = [episode_node(members) for members in groups]
    ids = lasting_ids(store.conn, "episode", "in_episode", groups, [node.id for node in nodes])
    nodes = [replace(node, id=node_id) for node, node_id in zip(nodes, ids, strict=True)]
    changed, removed = replace_level(store, "episode", nodes, groups, "in_episode")
    return {"episodes": len(nodes), "changed": changed, "removed": removed}


def replace_level(store: Store, level: str, nodes: list[Node], groups: list[list[EventRow]], edge: str) -> tuple:
    """Make `nodes` the whole level in one transaction: stale nodes go, changed ones are written, and
    the membership edges (event -> node) are rewritten. Returns (changed, removed)."""
    with store.transaction() as conn:
        stale = node_ids(conn, level) - {n.id for n in nodes}
        delete_nodes(conn, stale)
        changed = write_nodes(conn, nodes)
        conn.execute("DELETE FROM memory_edges WHERE kind = ?", (edge,))
        conn.executemany(
            "INSERT INTO memory_edges (src, dst, kind, weight) VALUES (?, ?, ?, 1.0)",
            [(event.id, node.id, edge) for node, members in zip(nodes, groups, strict=True) for event in members],
        )
    return changed, len(stale)


def lasting_ids(
    conn: sqlite3.Connection, level: str, edge: str, groups: list[list[EventRow]], fresh: list[str]
) -> list[str]:
    """Each group's node id: the id of the stored node it shares the most events with (each stored
    id goes to one group), else its `fresh` id. A note's events share its day, so an edit adding an
    event whose hash sorts first made it the node's "first" event, and its episode or concept got a
    new id (a concept renamed by a model call, its recall cards and usage left behind)."""
    before: dict[str, str] = dict(
        conn.execute(
            "SELECT e.src, e.dst FROM memory_edges e JOIN memory_nodes n ON n.id = e.dst"
            " WHERE e.kind = ? AND n.level = ?",
            (edge, level),
        ).fetchall()
    )
    overlaps = Counter((index, before[e.id]) for index, members in enumerate(groups) for e in members if e.id in before)
    ids: list[str | None] = [None] * len(groups)
    taken: set[str] = set()
    for (index, old), _ in sorted(overlaps.items(), key=lambda item: (-item[1], item[0][1], item[0][0])):
        if ids[index] is None and old not in taken:
            ids[index] = old
            taken.add(old)
    for index, members in enumerate(groups):
        if ids[index] is None:
            # A fresh id may be one a stored node kept (a node split in two): derive another.
            new = (
                fresh[index] if fresh[index] not in taken else stable_id(level, fresh[index], *[e.id for e in members])
            )
            ids[index] = new
            taken.add(new)
    return [node_id for node_id in ids if node_id is not None]


def member_links(members: list[EventRow]) -> list[Link]:
    """The union of the members' supporting chunks, each with its best score."""
    chunks: dict[int, float] = {}
    for event in members:
        for chunk, score in event.chunks.items():
            chunks[chunk] = max(score, chunks.get(chunk, 0.0))
    return [Link(chunk, "member", score) for chunk, score in sorted(chunks.items())]


# An episode of a repository committed to daily for years has thousands of events and chunks; a
# view lists the first of each and counts them all (a whole one was megabytes per MCP call).
EVENTS_SHOWN = 50
EVIDENCE_SHOWN = 10


def timeline(
    store: Store,
    limit: int = 50,
    project: str | None = None,
    start: float | None = None,
    end: float | None = None,
) -> list[dict[str, Any]]:
    """The latest `limit` episodes, oldest first, each with its first events' ids and its best
    supporting chunks, and how many of each it has (for `mem timeline`, the console and the MCP tool
    memory_timeline): a limit keeps the recent end of a long timeline, not its first weeks. `project`
    matches the folder/repo path or its name, or the label an episode's title starts with (a
    conversation's title). `start`/`end` keep the dated episodes overlapping [start, end)."""
    where, params = _episode_filter(project, start, end)
    found = rows(store.conn, where, params, "first_time IS NULL, first_time DESC, id DESC", limit)[::-1]
    out = with_evidence(store.conn, found, ("member",))
    members = members_of(store.conn, [row["id"] for row in found], "in_episode")
    for item in out:
        events = members.get(item["id"], [])
        item["events"], item["events_total"] = events[:EVENTS_SHOWN], len(events)
        item["evidence_total"] = len(item["evidence"])
        del item["evidence"][EVIDENCE_SHOWN:]
    return out


def _episode_filter(project: str | None, start: float | None, end: float | None) -> tuple[str, tuple]:
    where, params = "level = 'episode'", ()
    if project:
        where += " AND (project = ? OR project LIKE ? OR substr(title, 1, ?) = ?)"
        params = (project, f"%/{project}", len(project) + 2, f"{project}: ")
    # An episode spanning the window's edge belongs to it: years of daily commits are one episode
    # that a window inside those years must still show.
    if start is not None:
        where += " AND COALESCE(last_time, first_time) >= ?"
        params += (start,)
    if end is not None:
        where += " AND first_time < ?"
        params += (end,)
    return where, params


def members_of(conn: sqlite3.Connection, parents: list[str], kind: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for part in in_batches(parents):
        for src, dst in conn.execute(
            f"SELECT e.src, e.dst FROM memory_edges e JOIN memory_nodes n ON n.id = e.src WHERE e.kind = ?"
            f" AND e.dst IN ({','.join('?' * len(part))}) ORDER BY n.first_time, e.src",
            (kind, *part),
        ):
            found.setdefault(dst, []).append(src)
    return found
