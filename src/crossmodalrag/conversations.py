"""`mem ingest-chat`: chat transcripts into memory, one source per session, incrementally.

A session read again is compared turn by turn (each chunk records its turn's digest): the turns
that are unchanged keep their chunks and vectors, and only what follows them is written. A
transcript that grows (an agent session being appended to) thus costs only its new turns; one
that lost its last turns (a cut-off copy) keeps them. Sessions that left a file (a conversation
deleted from an export) leave the memory with it; those of a file deleted from disk stay, said in a
notice (tools delete old transcripts; `mem forget --path FILE` erases them).

A file whose size and mtime (or, touched, bytes) are those of its last clean read is not read again:
an unchanged 40 MB export took 20 s to parse and mask on every `mem sync`. Each session keeps the
stamp of the file it was stored from, with the file's session count; a read that left a notice, or
found some of its sessions stored from another file, stamps nothing: such a file is read (and its
notices said) each time, as before. A file with a secret masked or a `<private>` span cut keeps no
hash of its bytes (file_moves.py `hash_to_keep`): touched, it is read again.

A file that is read again (one conversation of a 45 MB export changed) is parsed whole, but a session
read exactly as it was stored is not cleaned again: masking secrets in every turn took 90% of the
time. Each session keeps the digest of its text as read (`raw_sha256`), only when nothing was cut out
of it: the text hashed is then the text stored, so the digest confirms no masked key or private span.

A session is one source whatever file it is read from. While two files holding it are both on disk
(the same export downloaded twice), the copy with more turns is kept. When the file it was stored
from is gone (a newer export unpacked into a new folder, the old one deleted), the session moves to
the file that holds it now, keeping its id; and that old export's conversations the new one lacks
were deleted by the user, so they leave too.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from crossmodalrag.chunking import CHUNKER_VERSION
from crossmodalrag.chunking.turns import TURNS_VERSION, chunk_turns, turn_digest
from crossmodalrag.connectors.chats import (
    READER_VERSION,
    UNZIP_FIRST,
    ChatRead,
    Session,
    blank_file,
    find_chat_files,
    is_zip,
    open_chat,
    session_document,
)
from crossmodalrag.connectors.chats.jsonio import lost_nothing
from crossmodalrag.connectors.files import check_name, confined
from crossmodalrag.errors import CMRAGError
from crossmodalrag.file_moves import file_sha256, hash_to_keep, known_files, regular_file_stat, unsettled
from crossmodalrag.ingest import IngestReport, Progress, remove_sources
from crossmodalrag.store import Store
from crossmodalrag.store.batch import WriteBatch
from crossmodalrag.store.documents import (
    extend_document,
    fingerprint,
    known_fingerprints,
    move_document,
    write_document,
)
from crossmodalrag.store.writers import retrying
from crossmodalrag.types import Document
from crossmodalrag.wording import counted

SOURCE_TYPE = "conversation"
EXPORT_NAME = "conversations.json"  # what ChatGPT and Claude.ai name their exports
# What besides a file's bytes decides what is stored of it, in its stamp.
READ_BY = f"chat-reader {READER_VERSION} turns {TURNS_VERSION} chunker {CHUNKER_VERSION}"


def ingest_conversations(
    store: Store, paths: list[Path], progress: Progress | None = None, confine: bool = False
) -> IngestReport:
    """Ingest chat files or folders of them. Unreadable files fail alone; within a file a malformed
    line or conversation is a notice (with its line number) and the rest ingests. `confine`: a file
    that links outside the folder given fails (connectors/files.py `confined`)."""
    report = IngestReport()
    elsewhere = stored_sessions(store)
    for given in paths:
        root = Path(given).expanduser().resolve()
        if not root.exists():
            report.failures.append(f"{root}: no such file or folder (hint: check the path; nothing was removed)")
            continue
        found = False
        for path in find_chat_files(root):
            found = True
            try:
                check_name(path)  # reported even in a folder: it may well be a chat
            except CMRAGError as error:
                report.failures.append(str(error))
                continue
            if blank_file(path):  # a session opened and abandoned before its first line: nothing said yet
                continue
            try:
                chat = confined(open_chat, root)(path) if confine else open_chat(path)
            except CMRAGError as error:
                if path == root:  # a file named on purpose; in a folder, other JSON files are not chats
                    report.failures.append(str(error))
                elif path.name == EXPORT_NAME or path.suffix == ".jsonl":  # named as chats are: worth a word
                    report.notices.append(f"skipped {error.message}")
                continue
            _ingest_file(store, chat, report, progress, elsewhere)
        if not found and (archives := _zip_archives(root)):
            report.notices.append(f"{root}: no chat file in it, only {archives[0].name} (hint: {UNZIP_FIRST})")
        if gone := _session_files_gone(store, root):
            report.notices.append(
                f"{root}: {counted(len(gone), 'session file')} gone from disk, kept in memory (e.g. {gone[0]}; "
                "hint: `mem forget --path FILE` erases the sessions stored from one)"
            )
    return report


def _zip_archives(folder: Path) -> list[Path]:
    """The zip archives right in a folder (an export downloaded and not unpacked yet)."""
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if path.suffix.lower() == ".zip" and is_zip(path))


def _session_files_gone(store: Store, root: Path) -> list[str]:
    """The files under root that stored sessions were read from and that are gone from disk. Their
    sessions stay (Claude Code and Codex delete old transcripts; what was said stays remembered):
    said, since a folder's other kinds of files gone leave the memory."""
    prefix = f"{root}/" if root.is_dir() else f"{root}@"
    rows = store.conn.execute(
        "SELECT uri, json_extract(metadata, '$.session') FROM sources WHERE uri >= ? AND uri < ? AND source_type = ?",
        (prefix, prefix + "\U0010ffff", SOURCE_TYPE),
    )
    files = {uri[: -len(str(key)) - 1] for uri, key in rows if key is not None and uri.endswith(f"@{key}")}
    return sorted(file for file in files if not os.path.lexists(file))


def stored_sessions(store: Store) -> dict[tuple[str, str], tuple[str, int]]:
    """(chat format, session key) → (uri, turns) of every stored session: a conversation is one
    source whatever file it was read from (the same export downloaded twice, a copied session)."""
    rows = store.conn.execute(
        "SELECT uri, json_extract(metadata, '$.chat_format'), json_extract(metadata, '$.session'),"
        " json_extract(metadata, '$.turns') FROM sources WHERE source_type = ?",
        (SOURCE_TYPE,),
    )
    return {(chat_format, str(key)): (uri, int(turns or 0)) for uri, chat_format, key, turns in rows if key is not None}


def _ingest_file(
    store: Store,
    chat: ChatRead,
    report: IngestReport,
    progress: Progress | None,
    elsewhere: dict[tuple[str, str], tuple[str, int]],
) -> None:
    known = known_fingerprints(store, f"{chat.path}@", "conversation")
    stat = regular_file_stat(chat.path)
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}:{READ_BY}" if stat else None
    # Saved again within the mtime's granularity, a file may change under the same stamp: the one
    # recorded then never matches, and the hash decides (as for notes, file_moves.py `unsettled`).
    recorded = f"{stat.st_size}:unsettled:{READ_BY}" if stat and unsettled(stat) else stamp
    if stamp and known and _skipped_unchanged(store, chat.path, (stamp, recorded), len(known), report):
        if progress:
            progress(report)
        return
    # Taken before reading, as for PDFs: a file written during the read is read again next time.
    sha256 = file_sha256(chat.path) if stamp else None
    chat.stored_digests, chat.digest_salt = _stored_digests(store, chat.path), READ_BY
    notices = len(report.notices)
    seen: set[str] = set()
    written = report.added + report.updated
    kept_elsewhere, superseded, vanished = 0, [], set()
    with store.batched() as batch:
        for session in chat.sessions():
            if session.unchanged:  # as read when stored: its turns were not even cleaned
                seen.add(f"{chat.path}@{session.key}")
                report.unchanged += 1
                continue
            if not session.turns:
                continue
            doc = session_document(chat.path, session)
            seen.add(doc.uri)
            other_uri, other_turns = elsewhere.get((session.format, session.key), (doc.uri, 0))
            if other_uri != doc.uri:
                other_file = other_uri[: -len(session.key) - 1]  # the uri is `<file>@<session key>`
                if not Path(other_file).exists() and _takes_over(session, other_turns):
                    vanished.add(other_file)
                    seen.add(other_uri)
                    elsewhere[(session.format, session.key)] = (doc.uri, len(session.turns))
                    retrying(partial(_move_session, batch, other_uri, doc, report))
                    if progress:
                        progress(report)
                    continue
                # Stored from another file still there: the copy with more turns (a later export) is kept.
                if other_turns >= len(session.turns):
                    kept_elsewhere += 1
                    report.unchanged += 1
                    continue
                superseded.append(other_uri)
            elsewhere[(session.format, session.key)] = (doc.uri, len(session.turns))
            # PostgreSQL may abort a unit that collided with another writer: it is run again whole.
            stored_raw = chat.stored_digests.get(session.key)
            retrying(partial(_write_session, batch, doc, known.get(doc.uri), report, stored_raw))
            if progress:
                progress(report)
    if superseded:  # moved here from the other file: updated, not added
        remove_sources(store, superseded)
        report.added, report.updated = report.added - len(superseded), report.updated + len(superseded)
    if vanished and lost_nothing(chat.problems):
        report.removed += _retire(store, chat, vanished, seen, elsewhere)
    clean = not (chat.problems or kept_elsewhere or len(report.notices) > notices)
    if kept_elsewhere:
        report.notices.append(f"{chat.path}: {kept_elsewhere} sessions already stored from another file, kept once")
    report.notices.extend(chat.problems)
    if chat.secrets_masked and report.added + report.updated > written:  # said once, when they were stored
        report.notices.append(f"{chat.path}: {chat.secrets_masked} secrets (keys, tokens, passwords) masked")
    gone = [uri for uri in known if uri not in seen]
    if gone and lost_nothing(chat.problems):  # a file that broke off early keeps the sessions stored from it
        report.removed += remove_sources(store, gone)
    if clean:
        sha256 = hash_to_keep(chat.path, sha256, chat.withheld_text)
        retrying(partial(_stamp_sessions, store, chat.path, recorded, sha256))


def _skipped_unchanged(store: Store, path: Path, stamps: tuple[str, str], stored: int, report: IngestReport) -> bool:
    """Whether the file is as its last clean read found it, by size and mtime or, touched or copied
    over, by its bytes; counted unchanged (and restamped, when touched) if so. All `stored` sessions
    of its uri must carry that read's stamp, which counted as many, or it is read again: a session
    written, moved or added since carries no stamp (a write replaces its metadata), one removed
    changes the count, so an older stamp never stands for what is stored now.
    `stamps`: the file's stamp now, and the one to record (see `_ingest_file`)."""
    stamped = known_files(store, f"{path}@", SOURCE_TYPE)
    kinds = set(stamped.values())
    if len(stamped) != stored or len(kinds) != 1:
        return False
    (known,) = kinds
    now, recorded = stamps
    if known.stamp != _counted_stamp(now, stored):
        same_size = _same_but_mtime(known.stamp, _counted_stamp(now, stored))
        if not (known.sha256 and same_size and file_sha256(path) == known.sha256):
            return False
        retrying(partial(_stamp_sessions, store, path, recorded, known.sha256))
    report.unchanged += stored
    return True


def _counted_stamp(stamp: str, sessions: int) -> str:
    return f"{stamp} of {sessions} sessions"


def _same_but_mtime(known: str, now: str) -> bool:
    """Same size, reader and session count (`size:mtime_ns:reader of n sessions`): the bytes may be the same."""
    old_size, _, old_rest = known.split(":", 2)
    new_size, _, new_rest = now.split(":", 2)
    return (old_size, old_rest) == (new_size, new_rest)


def _stamp_sessions(store: Store, path: Path, stamp: str | None, sha256: str | None) -> None:
    """Give every session stored from the file its stamp (None: no stamp, it is read again next time).
    Bookkeeping, as for PDFs: versioning leaves both keys out of a source's state."""
    prefix = f"{path}@"
    where = "uri >= ? AND uri < ? AND source_type = ?"
    bounds = (prefix, prefix + "\U0010ffff", SOURCE_TYPE)
    with store.batched() as batch, batch.unit() as conn:
        if stamp:
            stamp = _counted_stamp(
                stamp, conn.execute(f"SELECT COUNT(*) FROM sources WHERE {where}", bounds).fetchone()[0]
            )
        conn.execute(
            f"UPDATE sources SET metadata = json_set(metadata, '$.file_stamp', ?, '$.file_sha256', ?) WHERE {where}",
            (stamp, sha256, *bounds),
        )


EXPORT_FORMATS = ("chatgpt", "claude-ai")  # one file per account holding all its conversations


def _takes_over(session: Session, stored_turns: int) -> bool:
    """Whether a session stored from a file no longer on disk moves to this file. An export is
    downloaded anew into a new folder each time: the newest one holds the conversations as they now
    are (renamed, edited), whatever their length. A Claude Code or Codex session copied elsewhere
    moves only with all its turns: its tool deletes old transcripts, and the memory keeps them."""
    return session.format in EXPORT_FORMATS or len(session.turns) >= stored_turns


def _move_session(batch: WriteBatch, old_uri: str, doc: Document, report: IngestReport) -> None:
    """The stored session takes the new file's uri and content, and keeps its id (citations stay)."""
    count = move_document(batch, old_uri, doc, fingerprint(doc))
    if count is None:  # nothing to move after all (removed meanwhile): stored as new
        _write_session(batch, doc, None, report)
        return
    report.moved += 1
    report.chunks += count


def _retire(
    store: Store,
    chat: ChatRead,
    vanished: set[str],
    seen: set[str],
    elsewhere: dict[tuple[str, str], tuple[str, int]],
) -> int:
    """An export replaced by a newer one (in another folder, the old file gone): its conversations the
    new export no longer holds were deleted by the user, and leave the memory as they would had the
    new export been saved over the old. Only exports: a vanished session transcript is kept. Returns
    how many went."""
    if chat.format not in EXPORT_FORMATS:
        return 0
    gone = [uri for old_file in vanished for uri in known_fingerprints(store, f"{old_file}@", SOURCE_TYPE)]
    gone = [uri for uri in gone if uri not in seen]
    for key, (uri, _) in list(elsewhere.items()):
        if uri in gone:
            del elsewhere[key]
    return remove_sources(store, gone) if gone else 0


def _write_session(
    batch: WriteBatch, doc: Document, stored_digest: str | None, report: IngestReport, stored_raw: str | None = None
) -> None:
    digest = fingerprint(doc)
    if stored_digest == digest:
        _keep_raw_digest(batch, doc, stored_raw)
        report.unchanged += 1
        return
    conn = batch.conn
    row = conn.execute("SELECT id FROM sources WHERE uri = ?", (doc.uri,)).fetchone()
    stored = stored_turns(conn, row[0]) if row else []
    new = [turn_digest(doc.text[start:end]) for start, end, *_ in doc.metadata["_turns"]]
    same = _common_prefix(stored, new)
    if same == len(new) < len(stored):
        # Transcripts only grow: one that lost its last turns is a cut-off copy (an interrupted sync or
        # download), not an edit. What was said stays remembered; an edited one differs inside instead.
        lost = len(stored) - len(new)
        report.notices.append(f"{doc.uri}: the file lacks the last {counted(lost, 'turn')} stored from it: kept")
        report.unchanged += 1
        return
    # Unchanged turns keep their chunks; a changed title changes every breadcrumb, so all are rewritten.
    if row and same and stored_digest and _same_title(batch, row[0], doc.title):
        keep = _chunks_before(batch, row[0], same)
        report.chunks += extend_document(batch, row[0], doc, digest, keep, chunk_turns(doc, first_turn=same))
        report.updated += 1
        return
    added, count = write_document(batch, doc, digest)
    report.chunks += count
    report.added += added
    report.updated += not added


def _keep_raw_digest(batch: WriteBatch, doc: Document, stored_raw: str | None) -> None:
    """Store the session's `raw_sha256` (null: something is withheld now) when the text stored is
    already current: a session stored before the digest existed gets it without being written again.
    Bookkeeping, as the file's stamp is (versioning leaves it out of a source's state)."""
    raw = doc.metadata.get("raw_sha256")
    if raw == stored_raw:
        return
    with batch.unit() as conn:
        conn.execute(
            "UPDATE sources SET metadata = json_set(metadata, '$.raw_sha256', ?) WHERE uri = ?", (raw, doc.uri)
        )


def _stored_digests(store: Store, path: Path) -> dict[str, str]:
    """Session key → the `raw_sha256` stored for each session read from the file."""
    prefix = f"{path}@"
    rows = store.conn.execute(
        "SELECT uri, json_extract(metadata, '$.raw_sha256') FROM sources"
        " WHERE uri >= ? AND uri < ? AND source_type = ?",
        (prefix, prefix + "\U0010ffff", SOURCE_TYPE),
    )
    return {uri[len(prefix) :]: digest for uri, digest in rows if digest}


def stored_turns(conn, source_id: int) -> list[str]:
    """The digests of a stored session's turns, in order."""
    rows = conn.execute(
        "SELECT json_extract(metadata, '$.turn'), json_extract(metadata, '$.digest') FROM chunks"
        " WHERE source_id = ? ORDER BY chunk_index",
        (source_id,),
    )
    turns: dict[int, str] = {}
    for turn, digest in rows:
        if turn is not None:
            turns.setdefault(int(turn), digest)
    return [turns[i] for i in sorted(turns)]


def _common_prefix(stored: list[str], new: list[str]) -> int:
    count = 0
    for old, fresh in zip(stored, new, strict=False):
        if old != fresh:
            break
        count += 1
    return count


def _same_title(batch: WriteBatch, source_id: int, title: str) -> bool:
    row = batch.conn.execute("SELECT title FROM sources WHERE id = ?", (source_id,)).fetchone()
    return row is not None and row[0] == title


def _chunks_before(batch: WriteBatch, source_id: int, turn: int) -> int:
    return batch.conn.execute(
        "SELECT COUNT(*) FROM chunks WHERE source_id = ? AND json_extract(metadata, '$.turn') < ?", (source_id, turn)
    ).fetchone()[0]
