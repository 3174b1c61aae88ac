"""The git connector against the real git binary on small throwaway repositories."""

from __future__ import annotations

import io
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors import git_log
from crossmodalrag.connectors.git import read_commits, repository_root
from crossmodalrag.errors import ConnectorError
from tests.conftest import commit_files, git

pytestmark = pytest.mark.integration

BOB = "Bob Builder <bob@example.org>"
CAROL = "Carol Chen <carol@example.net>"


def commits(repo: Path, **options):
    return list(read_commits(repository_root(repo), **options))


def test_a_commit_becomes_a_document(repo: Path) -> None:
    sha = commit_files(
        repo,
        {"src/app.py": "print('hi')\n", "README.md": "# App\n"},
        "Add the app\n\nWith a readme.",
        date="2024-05-06T07:08:09+00:00",
    )
    [doc] = commits(repo)
    assert doc.uri == f"{repo.resolve()}@{sha}"
    assert Path(doc.uri.rsplit("@", 1)[0]).is_absolute()
    assert doc.title == "Add the app"
    assert doc.timestamp == datetime.fromisoformat("2024-05-06T07:08:09+00:00").timestamp()
    assert (doc.source_type, doc.format, doc.modality) == ("commit", "diff", "code")
    assert doc.locator == f"repo@{sha[:7]}"
    assert doc.metadata["author"] == "Ada Lovelace"
    assert doc.metadata["email"] == "ada@example.com"
    assert doc.metadata["sha"] == sha
    assert sorted(doc.metadata["files"]) == ["README.md", "src/app.py"]
    assert doc.text.startswith("Add the app\n\nWith a readme.\n\ndiff --git")
    assert "+print('hi')" in doc.text


def test_timestamp_is_the_author_time_not_the_commit_time(repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    # --date sets the author date only; the committer date comes from the environment
    git(
        repo,
        "commit",
        "-q",
        "-m",
        "rebased later",
        "--date=2020-01-01T00:00:00+00:00",
        date="2024-01-01T00:00:00+00:00",
    )
    [doc] = commits(repo)
    assert doc.timestamp == datetime.fromisoformat("2020-01-01T00:00:00+00:00").timestamp()


def test_commits_come_newest_first_and_chunk_with_file_paths(repo: Path) -> None:
    first = commit_files(repo, {"a.txt": "one\n"}, "first", date="2024-01-01T00:00:00+00:00")
    second = commit_files(repo, {"a.txt": "two\n"}, "second", date="2024-02-01T00:00:00+00:00")
    docs = commits(repo)
    assert [d.metadata["sha"] for d in docs] == [second, first]
    chunks = chunk_document(docs[0])
    assert [c.locator for c in chunks] == [f"repo@{second[:7]}", f"repo@{second[:7]} a.txt"]
    assert "-one\n+two" in chunks[1].text


def test_commits_of_every_author_and_the_author_filter(repo: Path) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "by ada")
    commit_files(repo, {"b.txt": "b\n"}, "by bob", author=BOB)
    commit_files(repo, {"c.txt": "c\n"}, "by carol", author=CAROL)
    assert sorted(d.metadata["author"] for d in commits(repo)) == ["Ada Lovelace", "Bob Builder", "Carol Chen"]
    assert [d.title for d in commits(repo, author="Bob")] == ["by bob"]
    assert [d.title for d in commits(repo, author="carol@example.net")] == ["by carol"]
    assert commits(repo, author="Nobody") == []


def test_max_commits_keeps_the_newest(repo: Path) -> None:
    for n in range(5):
        commit_files(repo, {"a.txt": f"{n}\n"}, f"commit {n}", date=f"2024-01-0{n + 1}T00:00:00+00:00")
    assert [d.title for d in commits(repo, max_commits=2)] == ["commit 4", "commit 3"]
    assert len(commits(repo)) == 5


def test_include_and_exclude_globs_filter_diff_paths(repo: Path) -> None:
    commit_files(
        repo,
        {
            "src/core.py": "core_marker = 1\n",
            "src/gen/table.py": "generated_marker = 1\n",
            "docs/guide.md": "doc_marker\n",
        },
        "mixed change",
    )
    [doc] = commits(repo, include=["src/**"], exclude=["**/gen/**"])
    assert doc.metadata["files"] == ["src/core.py"]
    assert "core_marker" in doc.text
    assert "generated_marker" not in doc.text and "doc_marker" not in doc.text
    [unfiltered] = commits(repo)
    assert "generated_marker" in unfiltered.text and "doc_marker" in unfiltered.text


def test_a_path_inside_the_repository_resolves_to_its_root(repo: Path) -> None:
    commit_files(repo, {"deep/er/file.txt": "x\n"}, "nested")
    assert repository_root(repo / "deep" / "er") == repo.resolve()


def test_a_folder_that_is_not_a_repository_raises(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ConnectorError, match="not a git repository") as caught:
        repository_root(plain)
    assert caught.value.hint


def test_a_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="no such folder") as caught:
        repository_root(tmp_path / "nope")
    assert caught.value.hint


def test_a_file_path_raises(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(ConnectorError, match="a file, not a repository folder"):
        repository_root(file)


def test_an_empty_repository_yields_nothing(repo: Path) -> None:
    assert commits(repo) == []


def test_an_empty_repository_yields_nothing_under_a_translated_git(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    probe = subprocess.run(["git", "-C", str(repo), "log"], capture_output=True, text=True, check=False)
    if "does not have any commits" in probe.stderr:
        pytest.skip("this git has no German messages installed")
    assert commits(repo) == []


def test_non_utf8_bytes_in_a_diff_do_not_crash(repo: Path) -> None:
    (repo / "latin1.txt").write_bytes(b"caf\xe9 cr\xe8me br\xfbl\xe9e\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "latin-1 file")
    [doc] = commits(repo)
    assert doc.title == "latin-1 file"
    assert "caf\ufffd cr\ufffdme" in doc.text
    assert any("latin1.txt" in c.locator for c in chunk_document(doc))


def test_a_file_holding_the_record_separator_is_read_as_one_commit(repo: Path) -> None:
    commit_files(repo, {"fields.txt": "a\x1eb\x1fc\n"}, "ASCII separators in a data file")
    commit_files(repo, {"fields.txt": "d\x1ee\n"}, "again")
    assert [doc.title for doc in commits(repo)] == ["again", "ASCII separators in a data file"]


def test_gits_output_is_read_a_block_at_a_time_whatever_the_blocks_cut(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_files(repo, {"a.txt": "one\n", "b.md": "# B\n"}, "first")
    commit_files(repo, {"a.txt": "two\n", "c.txt": "é\x1e\n" * 50}, "second\n\nwith a body")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    whole = [(doc.uri, doc.text, doc.metadata) for doc in commits(repo)]
    for block in (1, 2, 11, 12, 13, 100):  # around the length of "\ndiff --git "
        monkeypatch.setattr(git_log, "LOG_BLOCK", block)
        assert [(doc.uri, doc.text, doc.metadata) for doc in commits(repo)] == whole


def test_an_oversized_file_diff_is_cut_as_it_is_read_and_left_out(repo: Path) -> None:
    huge = "".join(f"line {n} {'x' * 60}\n" for n in range(20_000))  # 1.4 MB
    commit_files(repo, {"huge.txt": huge, "small.txt": "kept\n"}, "add generated data")
    output = subprocess.run(
        ["git", "-C", str(repo), *git_log.LOG_ARGS], input=b"HEAD\n", capture_output=True, check=True
    ).stdout
    [record] = list(git_log._records(io.BytesIO(output)))
    assert len(record) < git_log.MAX_FILE_DIFF_BYTES + 1_000 < len(output)
    [doc] = commits(repo)
    assert doc.metadata["skipped_files"] == ["huge.txt"] and "+kept" in doc.text


def test_an_oversized_file_keeps_a_chunk_naming_it(repo: Path, monkeypatch) -> None:
    """Its name was kept in the metadata alone, which no search reads: "when did lock.json change?"
    found nothing, though a binary file's header chunk is found by name."""
    from crossmodalrag.connectors import git as git_connector

    monkeypatch.setattr(git_connector, "MAX_FILE_DIFF_CHARS", 200)
    commit_files(repo, {"small.txt": "a line\n", "lock.json": "x" * 500 + "\n"}, "add a lockfile")
    [doc] = commits(repo)
    chunk = next(c for c in chunk_document(doc) if c.metadata.get("path") == "lock.json")
    assert chunk.locator.endswith(" lock.json") and "+++ b/lock.json" in chunk.text
    assert chunk.text.endswith("Diff left out: over 200 characters (a generated file, a lockfile?)")
    assert "x" * 100 not in doc.text


def test_a_commit_message_with_unicode_and_a_multiline_body(repo: Path) -> None:
    commit_files(repo, {"a.txt": "x\n"}, "Résumé: naïve café ☕\n\nLine two.\nLine three.")
    [doc] = commits(repo)
    assert doc.title == "Résumé: naïve café ☕"
    assert doc.text.startswith("Résumé: naïve café ☕\n\nLine two.\nLine three.")


@pytest.mark.parametrize("encoding", ["ISO-8859-1", "cp932"])
def test_a_log_output_encoding_setting_does_not_garble_messages_or_names(repo: Path, encoding: str) -> None:
    commit_files(repo, {"a.txt": "x\n"}, "Fix the café menu", author="José Núñez <j@example.com>")
    git(repo, "config", "i18n.logOutputEncoding", encoding)  # a Windows user's ~/.gitconfig often sets cp932
    [doc] = commits(repo)
    assert (doc.title, doc.metadata["author"]) == ("Fix the café menu", "José Núñez")


# --- private spans (a vault kept in git) -------------------------------------------------------


def test_private_spans_leave_commit_messages_and_hunks(repo: Path) -> None:
    commit_files(
        repo, {"note.md": "# Keys\n\n<private>\nline one\nline two\nline three\nline four\n</private>\nopen\n"}, "init"
    )
    commit_files(
        repo,
        {"note.md": "# Keys\n\n<private>\nline one\nline two\nhunter2 here\nline four\n</private>\nopen\n"},
        "rotate <private>the vault pin 4711</private> key",
    )
    commit_files(repo, {"code.py": "x = 1  # <private>tok-secret</private>\n"}, "code")
    texts = "\n".join(doc.text for doc in commits(repo))
    for secret in ("hunter2", "4711", "line three", "tok-secret", "<private>", "</private>"):
        assert secret not in texts
    assert "rotate" in texts and "key" in texts and "+open" in texts and "x = 1" in texts


def test_a_hunk_inside_a_private_span_shows_neither_tag_and_still_hides_it(repo: Path) -> None:
    body = "\n".join(f"filler {i}" for i in range(20))
    commit_files(repo, {"n.md": f"<private>\n{body}\nsecret-a\n{body}\n</private>\n"}, "one")
    commit_files(repo, {"n.md": f"<private>\n{body}\nsecret-b\n{body}\n</private>\n"}, "two")
    newest = commits(repo)[0]
    assert "secret-a" not in newest.text and "secret-b" not in newest.text and "filler" not in newest.text
    assert "@@" in newest.text, "the hunk itself is kept, only its private lines are blank"


def test_a_private_span_in_the_subject_leaves_the_title_and_every_chunk(repo: Path) -> None:
    # the title opens every chunk's breadcrumb line: stripping only the body left the secret searchable
    message = "Deploy <private>hunter2PWD</private> done\n\nbody <private >pin 4711</private >"
    commit_files(repo, {"a.py": "x = 1\n"}, message)
    (commit,) = commits(repo)
    assert commit.title == "Deploy done"
    stored = [commit.title, commit.text, *(chunk.text for chunk in chunk_document(commit))]
    for secret in ("hunter2PWD", "4711", "private"):
        assert not any(secret in text for text in stored)


def test_a_wholly_private_subject_is_no_title(repo: Path) -> None:
    commit_files(repo, {"a.py": "x = 1\n"}, "<private>hunter2PWD</private>")
    assert commits(repo)[0].title == "(no message)"


def chunk_paths(doc) -> list[str]:
    return [chunk.metadata["path"] for chunk in chunk_document(doc) if "path" in chunk.metadata]


def test_paths_with_spaces_quotes_and_tabs_are_read_as_git_wrote_them(repo: Path) -> None:
    names = ["My Note.md", "a b/c d.txt", 'q"x.txt', "we\tird.txt", "Plan b.md"]
    commit_files(repo, {name: f"text of {name}\n" for name in names}, "init")
    (repo / 'q"x.png').write_bytes(b"\x89PNG\x00\x01")  # binary: only its `diff --git` line names it
    (repo / "bin b.png").write_bytes(b"\x89PNG\x00\x02")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "images")
    git(repo, "mv", "Plan b.md", "Plan c b.md")
    git(repo, "commit", "-q", "-m", "move")
    moved, images, first = commits(repo)
    assert sorted(first.metadata["files"]) == sorted(chunk_paths(first)) == sorted(names)
    assert sorted(images.metadata["files"]) == sorted(chunk_paths(images)) == ["bin b.png", 'q"x.png']
    assert moved.metadata["files"] == ["Plan c b.md"] and chunk_paths(moved) == ["Plan c b.md"]


def test_a_private_span_stays_out_when_the_note_path_holds_a_space_and_b(repo: Path) -> None:
    lines = "\n".join(f"line {i}" for i in range(8))
    commit_files(repo, {"Plan b/diary.md": f"intro\n<private>\n{lines}\n</private>\nend\n"}, "init")
    commit_files(
        repo, {"Plan b/diary.md": f"intro\n<private>\n{lines.replace('line 4', 'hunter9')}\n</private>\nend\n"}, "edit"
    )
    texts = "\n".join(doc.text for doc in commits(repo))
    assert "hunter9" not in texts and "line 3" not in texts and "+end" in texts


def test_a_message_quoting_a_diff_stays_the_message(repo: Path) -> None:
    message = "explain the patch\n\ndiff --git a/fake.md b/fake.md\n+quoted line in message"
    commit_files(repo, {"real.txt": "x\n"}, message)
    (doc,) = commits(repo)
    assert doc.metadata["files"] == ["real.txt"] and chunk_paths(doc) == ["real.txt"]
    assert "+quoted line in message" in chunk_document(doc)[0].text


def test_a_bare_repository_is_read_from_its_git_folder(repo: Path, tmp_path: Path) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "first")
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(tmp_path / "bare.git")], check=True)
    root = repository_root(tmp_path / "bare.git")
    assert root == tmp_path / "bare.git"
    assert [doc.title for doc in read_commits(root)] == ["first"]


def test_a_repositorys_git_folder_names_that_repository_wherever_mem_runs(
    repo: Path, tmp_path: Path, monkeypatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    monkeypatch.chdir(other)  # --show-toplevel prints nothing inside .git: read as ".", this was `other`
    assert repository_root(repo / ".git") == repo and repository_root(repo / ".git" / "refs") == repo


def test_an_empty_commit_and_a_mode_change_are_read(repo: Path) -> None:
    commit_files(repo, {"run.sh": "echo hi\n"}, "script")
    git(repo, "commit", "-q", "--allow-empty", "-m", "nothing changed")
    git(repo, "update-index", "--chmod=+x", "run.sh")
    git(repo, "commit", "-q", "-m", "make it executable")
    mode, empty, _ = commits(repo)
    assert empty.title == "nothing changed" and empty.metadata["files"] == [] and chunk_document(empty)
    assert mode.metadata["files"] == ["run.sh"] and chunk_paths(mode) == ["run.sh"]


def merge_with_a_conflict(repo: Path, path: str, base: str, ours: str, theirs: str, resolved: str) -> None:
    commit_files(repo, {path: base}, "base")
    git(repo, "checkout", "-q", "-b", "side")
    commit_files(repo, {path: theirs}, "side change")
    git(repo, "checkout", "-q", "-")
    commit_files(repo, {path: ours}, "main change")
    subprocess.run(["git", "-C", str(repo), "merge", "-q", "side"], capture_output=True, check=False)
    commit_files(repo, {path: resolved}, "Merge branch side")


def test_a_merges_conflict_resolution_is_stored_and_a_clean_merge_is_its_message(repo: Path) -> None:
    merge_with_a_conflict(repo, "conf.txt", "base\n", "retry once\n", "retry thrice\n", "retry twice, backoff\n")
    merge = commits(repo)[0]
    assert merge.metadata["files"] == ["conf.txt"]
    assert "++retry twice, backoff" in merge.text
    [chunk] = [c for c in chunk_document(merge) if c.locator.endswith("conf.txt")]
    assert "@@@ -1,1 -1,1 +1,1 @@@" in chunk.text and "++retry twice, backoff" in chunk.text
    git(repo, "checkout", "-q", "-b", "clean")
    commit_files(repo, {"other.txt": "x\n"}, "clean side")
    git(repo, "checkout", "-q", "-")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge clean", "clean")
    clean = commits(repo)[0]
    assert (clean.title, clean.text, clean.metadata["files"]) == ("Merge clean", "Merge clean", [])


def test_a_merges_resolution_inside_a_private_span_stays_out(repo: Path) -> None:
    note = "# Note\n<private>\nline one\n{}\nline three\n</private>\npublic\n"
    merge_with_a_conflict(
        repo, "n.md", note.format("base"), note.format("ours"), note.format("theirs"), note.format("resolvedsecret")
    )
    merge = commits(repo)[0]
    assert merge.metadata["files"] == ["n.md"] and "@@@" in merge.text
    assert "resolvedsecret" not in merge.text and "ours" not in merge.text and "theirs" not in merge.text
