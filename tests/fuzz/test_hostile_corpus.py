"""Hostile files through the real `mem` process: one `error:` line per bad item, exit 1, no
traceback or crash, the good notes beside them ingested, and nothing stored before lost."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crossmodalrag.store import open_store
from tests.conftest import commit_files, git, write_note

GOOD = {
    "good/one.md": "# One\nThe heron fishes at dawn.\n",
    "good/two.md": "---\ntags: [birds]\n---\n# Two\nThe kingfisher dives.\n",
}


def mem(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `mem` as its own process (a crash or a hang would show here, not take pytest down)."""
    return subprocess.run(
        [sys.executable, "-m", "crossmodalrag", *argv], capture_output=True, text=True, timeout=timeout
    )


def assert_clean(result: subprocess.CompletedProcess[str]) -> list[str]:
    """No traceback, no crash; every stderr line is an error, a note or the summary. Returns the errors."""
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert all(line.startswith(("error: ", "note: ", "ingest-", "[retrieval")) for line in lines), lines
    return [line for line in lines if line.startswith("error: ")]


def stored_uris(db_path: Path) -> set[str]:
    with open_store(db_path) as store:
        return {row[0] for row in store.conn.execute("SELECT uri FROM sources")}


def billion_laughs(levels: int = 10) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines)


def hostile_vault(vault: Path) -> tuple[list[str], list[str]]:
    """Write the hostile files; returns (files that must fail, files that must ingest)."""
    bad, fine = [], []

    def add(name: str, content: str | bytes, ok: bool) -> Path:
        path = write_note(vault, name, content)
        (fine if ok else bad).append(name)
        return path

    add("hostile/binary.md", bytes(range(256)) * 64, ok=False)
    add("hostile/nul.md", "# Text\nwith a \x00 inside\n", ok=False)
    add("hostile/latin1.md", "# Café\ncaf\xe9 au lait\n".encode("latin-1"), ok=True)  # read as cp1252
    add("hostile/damaged.md", "# Café\n".encode() + b"caf\xe9 au lait\n", ok=False)  # UTF-8 and not
    # Empty notes are skipped and counted, not errors (issue 14): neither stored nor reported.
    write_note(vault, "hostile/empty.md", b"")
    write_note(vault, "hostile/frontmatter-only.md", "---\ntitle: Nothing else\ntags: [x]\n---\n")
    add("hostile/bad\nname.md", b"\xff\xfe binary", ok=False)
    with open(vault / "hostile/huge.md", "wb") as handle:  # 50 MB on a single line
        handle.write(b"word " * (10 * 2**20))
    bad.append("hostile/huge.md")
    os.mkfifo(vault / "hostile/fifo.md")  # reading would block forever
    bad.append("hostile/fifo.md")
    (vault / "hostile/loop-a.md").symlink_to("loop-b.md")
    (vault / "hostile/loop-b.md").symlink_to("loop-a.md")
    (vault / "hostile/dangling.md").symlink_to("/nonexistent/target.md")
    bad += ["hostile/loop-a.md", "hostile/loop-b.md", "hostile/dangling.md"]
    (vault / "hostile/folder-loop").symlink_to(vault)  # a symlinked folder is not followed
    os.mkdir(vault / "hostile/folder.md")  # a folder named like a note is not a note
    locked = add("hostile/zero-permission.md", "# Locked\nno one may read this\n", ok=os.geteuid() == 0)
    locked.chmod(0)  # root reads it anyway: then it must simply ingest

    add("hostile/headers.md", "".join("#" * (i % 9 + 1) + f" level {i}\nbody {i}\n" for i in range(5000)), ok=True)
    add("hostile/hashes.md", "#" * 100_000 + " not a heading\n# " + "#" * 100_000 + "x\n", ok=True)
    add("hostile/spaces.md", "# a" + " " * 100_000 + "b\n" + "k" * 3 + "\n", ok=True)
    add("hostile/fences.md", "```a\n" * 20_000 + "text\n", ok=True)
    add("hostile/links.md", "[[" * 200_000 + "\n" + "[[a#" * 50_000 + "\n", ok=True)
    add("hostile/long-heading.md", "# " + "title " * 200_000 + "\n" + "body " * 200_000 + "\n", ok=True)
    add("hostile/long-line.md", "word " * 600_000, ok=True)  # 3 MB, under the size limit: ingested
    pwned = vault.parent / "pwned"
    add("hostile/python-tag.md", f"---\ntitle: !!python/object/apply:os.system ['touch {pwned}']\n---\nbody\n", ok=True)
    add("hostile/laughs.md", f"---\n{billion_laughs()}\n---\n# Laughs\nbody\n", ok=True)
    add("hostile/nested.md", "---\na: " + "[" * 100_000 + "]" * 100_000 + "\n---\nbody\n", ok=True)
    add("hostile/dashes.md", "---\n" + "- " * 100_000 + "x\n---\nbody\n", ok=True)
    add("hostile/self.md", "---\na: &a [*a]\n---\nbody\n", ok=True)
    add("hostile/tags-date.md", "---\ntags: 2024-01-31\ndate: 9999-12-31T23:59:59-12:00\n---\nbody\n", ok=True)
    add("hostile/surrogate.md", '---\ntitle: "\\ud800"\n---\nbody\n', ok=True)
    add("hostile/crlf.md", "---\r\ntitle: CRLF\r\n---\r\n# Head\r\n\r\ntext\r\n", ok=True)
    add("hostile/private-unclosed.md", "# Open\npublic <private>and the rest is hidden\n", ok=True)
    add("hostile/control.md", "# \x01\x02\x1b[31m\nbody \u202e reversed\n", ok=True)
    return bad, fine


def test_a_hostile_vault_fails_item_by_item_and_keeps_what_was_stored(tmp_path: Path, db_path: Path) -> None:
    vault = tmp_path / "vault"
    for name, text in GOOD.items():
        write_note(vault, name, text)
    assert_clean(first := mem("ingest-notes", str(vault)))
    assert first.returncode == 0
    bad, fine = hostile_vault(vault)

    started = time.perf_counter()
    result = mem("ingest-notes", str(vault))
    seconds = time.perf_counter() - started
    errors = assert_clean(result)
    assert result.returncode == 1
    assert len(errors) == len(bad), "\n".join(errors)
    for name in bad:
        shown = name.replace("\n", "\\n")
        assert sum(shown in line for line in errors) == 1, f"no single error line for {shown}"
    assert seconds < 60, f"the hostile vault took {seconds:.0f} s"

    uris = stored_uris(db_path)
    assert {str(vault / name) for name in GOOD} <= uris  # nothing stored before was lost
    assert {str(vault / name) for name in fine} <= uris
    assert not any(str(vault / name) in uris for name in bad)
    assert str(vault / "hostile/empty.md") not in uris
    assert str(vault / "hostile/frontmatter-only.md") in uris  # its title and tags are worth finding it by
    assert not (tmp_path / "pwned").exists()
    with open_store(db_path) as store:  # a 1 MB heading is not copied into every chunk under it
        longest = store.conn.execute(
            "SELECT MAX(LENGTH(text)), MAX(LENGTH(locator)), MAX(LENGTH(metadata)) FROM chunks"
        )
        assert max(longest.fetchone()) < 3000

    again = mem("ingest-notes", str(vault))  # a second run: the same failures, nothing removed
    assert assert_clean(again) == errors and stored_uris(db_path) == uris
    for query in ("heron kingfisher", "laughs body", '\udcff NEAR( " * AND', "level 4999"):
        answer = mem("ask", query, "--no-llm")
        assert answer.returncode == 0 and not assert_clean(answer)


def test_an_unlistable_folder_keeps_its_stored_notes(tmp_path: Path, db_path: Path, monkeypatch) -> None:
    """os.walk cannot list a folder (permissions, I/O error): its notes must not look deleted."""
    from crossmodalrag.ingest import ingest_notes

    vault = tmp_path / "vault"
    for name, text in GOOD.items():
        write_note(vault, name, text)
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        real_scandir = os.scandir

        def failing_scandir(path):
            if str(path).endswith("good"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", failing_scandir)
        report = ingest_notes(store, [vault])
    assert report.removed == 0 and len(report.failures) == 1 and str(vault / "good") in report.failures[0]
    assert {str(vault / name) for name in GOOD} <= stored_uris(db_path)


@pytest.mark.integration
def test_a_corrupt_repository_fails_alone_and_keeps_its_stored_commits(tmp_path: Path, db_path: Path) -> None:
    damaged, healthy, broken_ref = tmp_path / "damaged", tmp_path / "healthy", tmp_path / "broken-ref"
    for repo in (damaged, healthy, broken_ref):
        repo.mkdir()
        git(repo, "init", "-q")
        commit_files(repo, {"a.txt": "first version\n"}, "first")
    commit_files(damaged, {"a.txt": "second version\n"}, "second")
    assert mem("ingest-git", str(damaged)).returncode == 0
    before = stored_uris(db_path)
    assert len(before) == 2

    blob = git(damaged, "rev-parse", "HEAD:a.txt").strip()
    loose = damaged / ".git/objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not a zlib stream")
    # the new commit's diff needs the damaged blob (stored commits' diffs are not read again)
    commit_files(damaged, {"a.txt": "third version\n"}, "third")
    (broken_ref / ".git/refs/heads/main").write_text("garbage\n")

    result = mem("ingest-git", str(damaged), str(healthy), str(broken_ref))
    errors = assert_clean(result)
    assert result.returncode == 1 and len(errors) == 2
    assert str(damaged) in errors[0] and "git fsck" in errors[0]
    assert str(broken_ref) in errors[1] and "git fsck" in errors[1]
    uris = stored_uris(db_path)
    assert before <= uris and any(uri.startswith(f"{healthy}@") for uri in uris)


def test_hostile_eval_files_fail_with_one_line(tmp_path: Path, db_path: Path) -> None:
    for content in (b"[" * 100_000, b"[1" + b"0" * 5000 + b"]", b'[{"query_text": "\\ud800"}]', bytes(range(256))):
        path = tmp_path / "queries.json"
        path.write_bytes(content)
        result = mem("eval", "--load-queries", str(path))
        errors = assert_clean(result)
        assert result.returncode == 1 and len(errors) == 1 and str(path) in errors[0]
