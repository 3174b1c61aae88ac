"""Reading the log: recent changes, one row's versions, the state at a point, diffs, checkpoints, rollback.

A point in history is a seq, a checkpoint name, `now`, or an ISO time (the last change at or before
it). The state at a point is, per row, its newest record at or before that seq: nothing is copied.
Rollback appends new versions that restore the older states; the chain never rewinds.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store
from crossmodalrag.store.writers import lock_chain, retried_transaction
from crossmodalrag.versioning.log import KINDS, MOVED_FROM, append, changing, enabled, head, load_state
from crossmodalrag.versioning.sources import make_way

RECORD_COLUMNS = "seq, at, op, kind, target, actor, content_hash, reason"
GONE_OPS = ("delete", "forget")


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Change:
    seq: int
    at: float
    op: str
    kind: str
    target: str
    actor: str
    content_hash: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": iso(self.at),
            "op": self.op,
            "kind": self.kind,
            "target": self.target,
            "actor": self.actor,
            "content_hash": self.content_hash,
            "reason": self.reason,
        }


def recent_changes(conn: sqlite3.Connection, limit: int = 50, target: str | None = None) -> list[Change]:
    """Newest first; only one source's when given (named as `mem history` takes it). Raises CMRAGError
    when `target` names no source (known_source)."""
    where, params = ("WHERE target = ?", (known_source(conn, target),)) if target else ("", ())
    rows = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM change_log {where} ORDER BY seq DESC LIMIT ?", (*params, limit)
    ).fetchall()
    return [Change(*row) for row in rows]


MEM_URI = re.compile(r"mem://source/(\d+)")  # what `mem remember --json` and the MCP tools print
SHORT_SHA = re.compile(r"[0-9a-f]{4,40}")  # a commit label's sha (`repo@1e62948`) or a whole one


def resolve_source(conn: sqlite3.Connection, given: str) -> str:
    """The uri of the source `given` names, as `mem history` and `mem forget` take it: a uri, a path
    (relative or with ~), a source id, `mem://source/ID`, or a commit as its label prints it
    (`repo@1e62948`: a repository name or path and a sha prefix). Unresolved, `given` itself.
    Raises CMRAGError when a sha prefix names more than one commit."""
    given = MEM_URI.fullmatch(given).group(1) if MEM_URI.fullmatch(given) else given
    if given.isascii() and given.isdigit() and int(given) < 2**63:  # an id SQLite can hold ("²" is a digit too)
        row = conn.execute("SELECT uri FROM sources WHERE id = ?", (int(given),)).fetchone()
        if row:
            return row[0]
    candidates = [given, os.path.abspath(os.path.expanduser(given))]
    for uri in candidates:
        if _known_source(conn, uri):
            return uri
    return _commit_by_prefix(conn, given) or given


def known_source(conn: sqlite3.Connection, given: str) -> str:
    """resolve_source for a filter (`mem events --source`, `mem log --source`): a name that resolves to no
    source memory holds or the log recorded is a typo, not an empty result. Raises CMRAGError."""
    uri = resolve_source(conn, given)
    if not _known_source(conn, uri):
        raise CMRAGError(
            f"no source {given!r} in memory",
            "give a source's uri, path or id (see `mem sources`); a commit is <repo>@<sha>, or a unique sha prefix",
        )
    return uri


def _known_source(conn: sqlite3.Connection, uri: str) -> bool:
    """Is it a live source's uri or one the log recorded (a source gone from memory)?"""
    return (
        conn.execute("SELECT 1 FROM sources WHERE uri = ?", (uri,)).fetchone() is not None
        or conn.execute("SELECT 1 FROM change_log WHERE kind = 'source' AND target = ? LIMIT 1", (uri,)).fetchone()
        is not None
    )


def _commit_by_prefix(conn: sqlite3.Connection, given: str) -> str | None:
    """The one commit whose uri `<repo path>@<sha>` `given` abbreviates: `<repo name or path>@<sha prefix>`,
    or a sha prefix alone, as `git log --oneline` prints it, in whatever repository."""
    repo, _, prefix = given.rpartition("@")
    if not repo:
        return _commit_by_bare_sha(conn, given)
    if not SHORT_SHA.fullmatch(prefix.lower()):
        return None
    name = os.path.basename(repo.rstrip("/"))
    root = os.path.abspath(os.path.expanduser(repo))
    pattern = "%" + _like_escaped(f"{name}@{prefix.lower()}") + "%"
    rows = conn.execute(
        "SELECT uri FROM sources WHERE uri LIKE ? ESCAPE '\\'"
        " UNION SELECT target FROM change_log WHERE kind = 'source' AND target LIKE ? ESCAPE '\\'",
        (pattern, pattern),
    ).fetchall()
    matches = sorted(
        uri
        for (uri,) in rows
        if (parts := uri.rpartition("@"))[2].startswith(prefix.lower())
        and (parts[0] == root or "/" not in repo and os.path.basename(parts[0]) == name)
    )
    return _the_one_commit(given, matches)


BARE_SHA = re.compile(r"[0-9a-f]{7,40}")  # git's shortest abbreviation: a shorter hex word may be a name
WHOLE_SHA = re.compile(r"[0-9a-f]{40}")  # of a commit's uri, not a chat session's key (`<file>@<key>`)


def _commit_by_bare_sha(conn: sqlite3.Connection, given: str) -> str | None:
    """The one commit, stored or in the log, whose sha starts with `given` (7 to 40 hex digits)."""
    prefix = given.lower()
    if not BARE_SHA.fullmatch(prefix):
        return None
    pattern = f"%@{prefix}%"  # hex digits: nothing to escape
    rows = conn.execute(
        "SELECT uri FROM sources WHERE uri LIKE ? UNION SELECT target FROM change_log WHERE kind = 'source'"
        " AND target LIKE ?",
        (pattern, pattern),
    ).fetchall()
    sha_of = {uri: uri.rpartition("@")[2] for (uri,) in rows}
    return _the_one_commit(
        given, sorted(uri for uri, sha in sha_of.items() if WHOLE_SHA.fullmatch(sha) and sha.startswith(prefix))
    )


def _the_one_commit(given: str, matches: list[str]) -> str | None:
    """The commit `given` names, None if none; raises CMRAGError naming the candidates if several."""
    if len(matches) > 1:
        shown = ", ".join(matches[:3]) + (", …" if len(matches) > 3 else "")
        raise CMRAGError(
            f"{given!r} is ambiguous: {len(matches)} commits match ({shown})",
            "give more of the sha, or the whole uri <repo>@<sha> (see `mem sources --kind commit`)",
        )
    return matches[0] if matches else None


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def source_history(conn: sqlite3.Connection, uri_or_id: str) -> list[Change]:
    """Every recorded version of one source, newest first. Raises CMRAGError if the log never saw it."""
    uri = resolve_source(conn, uri_or_id)
    changes = {change.seq: change for change in _versions_across_moves(conn, uri, None)}
    if not changes:
        raise CMRAGError(
            f"no recorded history for {uri_or_id!r}",
            "give a source's uri, path or id (see `mem sources`); a commit is <repo>@<sha>, or a unique sha prefix",
        )
    return [changes[seq] for seq in sorted(changes, reverse=True)]


def _versions_across_moves(conn: sqlite3.Connection, uri: str, before: int | None) -> list[Change]:
    """The records of `uri` (those before seq `before`, when given) and, from each move into it (a
    record saying where it came from), those of its earlier path before the move: a renamed note's
    history started at the rename. Each step back is to an earlier seq, so a note moved back and
    forth is followed to its start and no further."""
    rows = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM change_log WHERE kind = 'source' AND target = ? AND seq < ? ORDER BY seq DESC",
        (uri, before if before is not None else 2**63 - 1),
    ).fetchall()
    changes = [Change(*row) for row in rows]
    for change in list(changes):
        if change.reason.startswith(MOVED_FROM):
            changes += _versions_across_moves(conn, change.reason.removeprefix(MOVED_FROM), change.seq)
    return changes


MAX_NAME = 100


def _time(text: str) -> datetime:
    """An ISO date or time, as points are written. Raises ValueError."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _is_time(text: str) -> bool:
    try:
        _time(text)
    except ValueError:
        return False
    return True


def resolve_point(conn: sqlite3.Connection, point: str) -> int:
    """A checkpoint name, `now`, a seq or an ISO time → a seq. Raises CMRAGError for anything else."""
    row = conn.execute("SELECT seq FROM checkpoints WHERE name = ?", (point,)).fetchone()
    if row:
        return row[0]
    if point == "now":
        return head(conn)[0]
    if point.isascii() and point.isdigit():
        if int(point) > head(conn)[0]:
            raise CMRAGError(f"seq {point} is not in the log yet", f"the newest is {head(conn)[0]} (see `mem log`)")
        return int(point)
    try:
        moment = _time(point)
    except ValueError:
        raise CMRAGError(
            f"{point!r} is not a checkpoint, a seq or a time",
            "give a checkpoint name (mem checkpoint NAME), `now`, a seq from `mem log`, or 2026-11-20T09:00",
        ) from None
    stamp = (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    row = conn.execute("SELECT MAX(seq) FROM change_log WHERE at <= ?", (stamp,)).fetchone()
    return row[0] or 0


def states_at(conn: sqlite3.Connection, seq: int) -> dict[tuple[str, str], str]:
    """(kind, target) → content hash of every row present at `seq`."""
    rows = conn.execute(
        "SELECT kind, target, op, content_hash FROM change_log WHERE seq IN (SELECT MAX(seq) FROM change_log"
        " WHERE seq <= ? AND op != 'checkpoint' GROUP BY kind, target)",
        (seq,),
    )
    return {(kind, target): digest for kind, target, op, digest in rows if op not in GONE_OPS}


@dataclass
class Diff:
    since: int
    until: int
    added: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    changed: list[tuple[str, str]]

    def to_dict(self) -> dict[str, Any]:
        def rows(keys: list[tuple[str, str]]) -> list[dict[str, str]]:
            return [{"kind": kind, "target": target} for kind, target in keys]

        return {
            "since": self.since,
            "until": self.until,
            "added": rows(self.added),
            "removed": rows(self.removed),
            "changed": rows(self.changed),
        }


def diff(conn: sqlite3.Connection, since: str, until: str = "now") -> Diff:
    """What was added, removed and changed between two points."""
    a, b = resolve_point(conn, since), resolve_point(conn, until)
    before, after = states_at(conn, a), states_at(conn, b)
    return Diff(
        a,
        b,
        sorted(after.keys() - before.keys()),
        sorted(before.keys() - after.keys()),
        sorted(key for key in before.keys() & after.keys() if before[key] != after[key]),
    )


def checkpoint(store: Store, name: str) -> int:
    """Name the log's current head; returns its seq. Raises CMRAGError if the name is taken or unusable."""
    if not name or name == "now" or name.isdigit() or _is_time(name) or len(name) > MAX_NAME or not name.isprintable():
        # A point is read as a checkpoint's name first: a name that is a seq or a time would hide that point.
        shown = name if len(name) <= MAX_NAME else name[:MAX_NAME] + "…"
        raise CMRAGError(f"{shown!r} cannot name a checkpoint", "use a word such as before-cleanup")
    if not enabled(store.conn):
        raise CMRAGError("versioning is off, so a checkpoint could not be rolled back to", "unset CMRAG_VERSIONING")

    def name_head(conn) -> int:
        if conn.execute("SELECT 1 FROM checkpoints WHERE name = ?", (name,)).fetchone():
            raise CMRAGError(f"a checkpoint named {name!r} exists", "choose another name (see `mem log`)")
        seq = append(conn, "checkpoint", "checkpoint", name, None)
        conn.execute("INSERT INTO checkpoints (name, seq, at) VALUES (?, ?, ?)", (name, seq, time.time()))
        return seq

    return retried_transaction(store, name_head)


@dataclass
class RollbackPlan:
    point: str
    seq: int
    restore: list[tuple[str, str]]  # rows whose content goes back to the checkpoint's
    remove: list[tuple[str, str]]  # rows added since
    dry_run: bool
    rebuild: list[str] = field(default_factory=list)  # derived kinds that differ: rebuilt, not rolled back
    applied_seq: int | None = None  # the log's head after rolling back
    # rows held then whose content `mem forget` erased since: left as they are now (gone, or re-ingested)
    skipped_forgotten: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point,
            "seq": self.seq,
            "dry_run": self.dry_run,
            "restore": [{"kind": k, "target": t} for k, t in self.restore],
            "remove": [{"kind": k, "target": t} for k, t in self.remove],
            "head_seq": self.applied_seq,
            "rebuild": self.rebuild,
            "skipped_forgotten": [{"kind": k, "target": t} for k, t in self.skipped_forgotten],
        }


def rollback(store: Store, point: str, dry_run: bool = False) -> RollbackPlan:
    """Restore every versioned row to its state at `point`, as new versions, except those whose content
    `mem forget` erased since: they stay as they are now (`skipped_forgotten`), and no erased text comes
    back. Raises CMRAGError when some other content cannot come back (the log never kept it: changed with
    versioning off, or outside mem); then nothing changes."""
    if dry_run:
        return _plan(store.conn, point, dry_run)
    # Planned under the write lock, so no writer slips in between; planned again if PostgreSQL aborts
    # the transaction as colliding with another client's (what it would restore may have moved).
    plan = retried_transaction(store, lambda conn: _roll_back(conn, point))
    plan.applied_seq = head(store.conn)[0]
    return plan


def _roll_back(conn: sqlite3.Connection, point: str) -> RollbackPlan:
    lock_chain(conn)  # PostgreSQL, where writers run side by side: none appends to this chain now
    plan = _plan(conn, point, dry_run=False)
    then = states_at(conn, plan.seq)
    # Removals first: a source moved since `point` is removed at its new path and restored at its old
    # one, and it can take its id back there only once the removal has freed it.
    for kind, target in plan.remove:
        with changing(conn, kind, target, reason=f"rollback to {point}"):
            _restorer(kind)(conn, target, None)  # type: ignore[misc]
    for kind, target in plan.restore:
        if kind == "source":  # the source there now may be another one than the source there then
            make_way(conn, target, plan.seq, reason=f"rollback to {point}")
        with changing(conn, kind, target, reason=f"rollback to {point}"):
            _restorer(kind)(conn, target, load_state(conn, then[(kind, target)]))  # type: ignore[misc]
    return plan


def _plan(conn: sqlite3.Connection, point: str, dry_run: bool) -> RollbackPlan:
    """What a rollback to `point` restores and removes. Raises CMRAGError where content cannot come back."""
    seq = resolve_point(conn, point)
    then, now = states_at(conn, seq), states_at(conn, head(conn)[0])
    restore = sorted(key for key, digest in then.items() if now.get(key) != digest)
    plan = RollbackPlan(point, seq, restore, sorted(now.keys() - then.keys()), dry_run)
    skipped = {key[0] for key in plan.restore + plan.remove if _restorer(key[0]) is None}
    plan.restore = [key for key in plan.restore if key[0] not in skipped]
    plan.remove = [key for key in plan.remove if key[0] not in skipped]
    plan.rebuild = sorted(skipped)
    erased = [key for key in plan.restore if load_state(conn, then[key]) is None]
    plan.skipped_forgotten = [key for key in erased if forgotten_since(conn, *key, seq)]
    plan.restore = [key for key in plan.restore if key not in plan.skipped_forgotten]
    _check_restorable(conn, plan, [key for key in erased if key not in plan.skipped_forgotten])
    return plan


def forgotten_since(conn: sqlite3.Connection, kind: str, target: str, seq: int) -> bool:
    """Did `mem forget` erase the row after `seq`? Otherwise a state of then missing from the log was
    never kept: a change made with versioning off is not logged, so the version it replaced is not kept."""
    row = conn.execute(
        "SELECT 1 FROM change_log WHERE kind = ? AND target = ? AND op = 'forget' AND seq > ? LIMIT 1",
        (kind, target, seq),
    ).fetchone()
    return row is not None


def _restorer(kind: str):
    return KINDS[kind].restore if kind in KINDS else None


def _check_restorable(conn: sqlite3.Connection, plan: RollbackPlan, unkept: list[tuple[str, str]]) -> None:
    if unkept:
        targets = [target for _, target in unkept]
        shown = ", ".join(targets[:3]) + (f" and {len(targets) - 3} more" if len(targets) > 3 else "")
        raise CMRAGError(
            f"cannot roll back to {plan.point!r}: the log did not keep the content {shown} had then (changed with"
            " CMRAG_VERSIONING=off, or outside mem); nothing changed",
            "re-ingest the file to record it as it is, or roll back to a point after that change (see `mem history`)",
        )
