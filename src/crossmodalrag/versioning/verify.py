"""`mem verify`: the chain is unbroken, and the live rows are exactly what the log says they are.

Recomputing the chain proves no record was rewritten, removed or inserted in the log (given a head
hash noted elsewhere: rewriting the whole chain gives a different head). Recomputing every live
row's content hash and comparing it with its latest record catches what the chain alone cannot: a
direct SQL edit, insert or delete of the tables themselves.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crossmodalrag.errors import CMRAGError
from crossmodalrag.store.writers import retried_transaction
from crossmodalrag.versioning.log import GENESIS_HASH, KINDS, chain_hash, changed, enabled, has_log

if TYPE_CHECKING:
    from crossmodalrag.store import Store

GONE_OPS = ("delete", "forget")


@dataclass
class Problem:
    problem: str  # chain_broken | edited_outside | inserted_outside | deleted_outside | version_altered
    kind: str
    target: str
    seq: int | None  # the record in question (the last one for the row), None when the log never saw it

    def to_dict(self) -> dict[str, Any]:
        return {"problem": self.problem, "kind": self.kind, "target": self.target, "seq": self.seq}

    def describe(self) -> str:
        where = f" (last logged at seq {self.seq})" if self.seq else ""
        return {
            "chain_broken": f"the chain breaks at seq {self.seq}: a log record was changed, removed or inserted",
            "edited_outside": f"{self.kind} {self.target} was changed outside mem{where}",
            "inserted_outside": f"{self.kind} {self.target} was inserted outside mem (never logged)",
            "deleted_outside": f"{self.kind} {self.target} was deleted outside mem{where}",
            "version_altered": f"a stored version of {self.kind} {self.target}{where} was changed outside mem",
        }[self.problem]


@dataclass
class VerifyReport:
    versioning: bool
    records: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    rows_checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "versioning": self.versioning,
            "records": self.records,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            "rows_checked": self.rows_checked,
            "problems": [p.to_dict() for p in self.problems],
            "seconds": round(self.seconds, 3),
        }


def verify(conn: sqlite3.Connection, max_problems: int = 1000) -> VerifyReport:
    """Check the chain, then every versioned row against its latest record."""
    started = time.perf_counter()
    report = VerifyReport(versioning=enabled(conn))
    if not has_log(conn):
        return report
    _check_chain(conn, report)
    _check_rows(conn, report, max_problems)
    _check_versions(conn, report, max_problems)
    report.seconds = time.perf_counter() - started
    return report


def _check_chain(conn: sqlite3.Connection, report: VerifyReport) -> None:
    prev, expected_seq = GENESIS_HASH, 1
    rows = conn.execute(
        "SELECT seq, at, op, kind, target, actor, content_hash, reason, hash FROM change_log ORDER BY seq"
    )
    for *record, stored in rows:
        if record[0] != expected_seq or chain_hash(prev, tuple(record)) != stored:
            report.problems.append(Problem("chain_broken", record[3], record[4], record[0]))
            break  # the head is the last record the chain proves
        prev, expected_seq = stored, expected_seq + 1
        report.records += 1
    report.head_seq, report.head_hash = expected_seq - 1, prev


def _check_versions(conn: sqlite3.Connection, report: VerifyReport, max_problems: int) -> None:
    """Every stored past version against the content hash it is stored under: `mem ask --as-of` and
    `mem rollback` read them, so one changed in the file would be served as history."""
    rows = conn.execute(
        "SELECT s.content_hash, s.state, l.kind, l.target, l.seq FROM change_states s JOIN change_log l"
        " ON l.seq = (SELECT MAX(seq) FROM change_log WHERE content_hash = s.content_hash)"
    )
    for digest, blob, kind_name, target, seq in rows:
        kind = KINDS.get(kind_name)
        try:
            altered = kind is not None and kind.hash(json.loads(zlib.decompress(blob))) != digest
        except (zlib.error, ValueError):  # not even readable
            altered = True
        if altered:
            report.problems.append(Problem("version_altered", kind_name, target, seq))
            if len(report.problems) > max_problems:
                return


def _check_rows(conn: sqlite3.Connection, report: VerifyReport, max_problems: int) -> None:
    for kind in KINDS.values():
        logged = _latest_records(conn, kind.name)
        for target, state in kind.read_all(conn):
            report.rows_checked += 1
            seq, op, digest = logged.pop(target, (None, None, None))
            if seq is None or op in GONE_OPS:
                report.problems.append(Problem("inserted_outside", kind.name, target, seq))
            elif kind.hash(state) != digest:
                report.problems.append(Problem("edited_outside", kind.name, target, seq))
        for target, (seq, op, _) in logged.items():
            if op not in GONE_OPS:
                report.problems.append(Problem("deleted_outside", kind.name, target, seq))
        if len(report.problems) > max_problems:
            del report.problems[max_problems:]
            return


def _latest_records(conn: sqlite3.Connection, kind: str) -> dict[str, tuple[int, str, str | None]]:
    """target → (seq, op, content hash) of its newest record."""
    rows = conn.execute(
        "SELECT target, seq, op, content_hash FROM change_log WHERE seq IN"
        " (SELECT MAX(seq) FROM change_log WHERE kind = ? GROUP BY target)",
        (kind,),
    )
    return {target: (seq, op, digest) for target, seq, op, digest in rows}


# What accept can record: the live row as it is now becomes the newest version. A stored past version that
# was changed (version_altered) cannot be put right that way: its original text is gone from the file.
ACCEPTABLE = ("edited_outside", "inserted_outside", "deleted_outside")


@dataclass
class Accepted:
    """What `accept` recorded, and the problems it cannot accept (left for verify to report)."""

    recorded: int
    refused: list[Problem] = field(default_factory=list)

    def refusal(self) -> str | None:
        """One line saying what was not accepted and what to do instead, or None."""
        altered = [p for p in self.refused if p.problem == "version_altered"]
        if not altered:
            return None
        targets = sorted({p.target for p in altered})
        named = ", ".join(targets[:3]) + (f" and {len(targets) - 3} more" if len(targets) > 3 else "")
        return (
            f"cannot accept {len(altered)} stored past version(s) changed outside mem ({named}): the text they held"
            " is gone from the file (hint: restore a backup made before the change with `mem restore FILE --force`,"
            " or erase that source's stored versions with `mem forget SOURCE`; a file still on disk comes back at"
            " the next ingest)"
        )


def what_works(problems: list[Problem], live: bool = False) -> str:
    """What puts these problems right, for a hint: `mem verify --accept` only records rows changed outside
    mem; it refuses a broken chain and cannot restore an altered past version. `live`: the problems are
    the memory in use's (`mem verify`), where a backup made before the change is the other way back;
    else a backup's, found while restoring it."""
    broken = [p for p in problems if p.problem == "chain_broken"]
    if broken:
        return (
            f"the change log itself was altered at seq {broken[0].seq}, which `mem verify --accept` cannot accept:"
            f" restore a backup whose chain head you trust{' (`mem restore FILE --force`)' if live else ''}"
        )
    steps = []
    if any(p.problem in ACCEPTABLE for p in problems):
        steps.append(
            "if you changed those rows (with SQL, or with CMRAG_VERSIONING=off), `mem verify --accept` records them as"
            " new versions; if not, restore a backup made before the change (`mem restore FILE --force`)"
            if live
            else "`mem verify --accept` records the rows changed outside mem as new versions"
        )
    if any(p.problem == "version_altered" for p in problems):
        steps.append(
            "an altered stored past version cannot be accepted: restore a backup made before the change,"
            " or erase that source's stored versions with `mem forget SOURCE`"
            if live
            else "an altered stored past version cannot be accepted: `mem forget SOURCE` erases its versions"
        )
    return "; ".join(steps) or ("" if live else "`mem verify` lists the problems")


def accept(store: "Store", reason: str = "accepted: changed outside mem") -> Accepted:
    """Record the live rows that verify finds changed, inserted or deleted outside mem as new versions
    (after CMRAG_VERSIONING was off, or an edit made on purpose). Raises CMRAGError when versioning is
    off or the chain itself is broken (a rewritten log is not accepted); an altered stored past version is
    not accepted either, and is returned in `refused`."""
    if not enabled(store.conn):
        raise CMRAGError("versioning is off, so nothing can be recorded", "unset CMRAG_VERSIONING (or set it on)")

    def record_changes(conn) -> Accepted:
        report = verify(conn, max_problems=10**9)
        broken = [p for p in report.problems if p.problem == "chain_broken"]
        if broken:
            raise CMRAGError(
                f"the change log itself was altered at seq {broken[0].seq}; that cannot be accepted",
                "restore a backup (mem restore) whose chain head you trust",
            )
        before = _last_seq(conn)
        for problem in report.problems:
            if problem.problem in ACCEPTABLE:
                changed(conn, problem.kind, problem.target, reason=reason)
        refused = [p for p in report.problems if p.problem not in ACCEPTABLE]
        return Accepted(_last_seq(conn) - before, refused)  # what was appended, not what was found

    return retried_transaction(store, record_changes)


def _last_seq(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT COALESCE(MAX(seq), 0) FROM change_log").fetchone()[0]
