"""Include/exclude globs over vault- or repo-relative POSIX paths."""

from __future__ import annotations

import unicodedata

import pytest

from crossmodalrag.connectors.globs import matches, read_otherwise_before, selected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("work/**", "work/a.md", True),
        ("work/**", "work/deep/er/a.md", True),
        ("work/**", "work.md", False),
        ("work/**", "homework/a.md", False),
        ("work/**", "other/work/a.md", False),
        ("**/draft-*.md", "draft-1.md", True),
        ("**/draft-*.md", "a/b/draft-x.md", True),
        ("**/draft-*.md", "a/final-draft-x.md", False),
        ("**/draft-*.md", "a/draft-x.txt", False),
        ("*.tmp.md", "scratch.tmp.md", True),
        ("*.tmp.md", "a/b/c/scratch.tmp.md", True),
        ("*.tmp.md", "scratch.md", False),
        ("*.tmp.md", "dir.tmp.md/real.md", True),  # a folder so named: everything in it, as in .gitignore
        ("notes/*.md", "notes/a.md", True),
        ("notes/*.md", "notes/sub/a.md", False),
        ("?.md", "a.md", True),
        ("?.md", "ab.md", False),
        ("/top.md", "top.md", True),
        ("a+b(1).md", "a+b(1).md", True),
        ("a+b(1).md", "aab1.md", False),
        # sets and ranges, as in .gitignore: `[12]` matched only a literal "[12]" and selected nothing
        ("daily/2019-0[12]*", "daily/2019-02-05.md", True),
        ("daily/2019-0[12]*", "daily/2019-03-05.md", False),
        ("[!_]*.md", "a/_draft.md", False),
        ("[!_]*.md", "a/draft.md", True),
        ("a[/]b.md", "a/b.md", False),  # a set never crosses a folder
        ("[]]x.md", "]x.md", True),
        ("[z-a].md", "[z-a].md", True),  # no class can be backwards: the characters themselves
        ("[projects", "[projects", True),  # a `[` without its `]` too
        ("[projects", "projects/a.md", False),
    ],
)
def test_matches(pattern: str, path: str, expected: bool) -> None:
    assert matches(path, pattern) is expected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("private/", "private/diary.md", True),
        ("private/", "private/deep/diary.md", True),
        ("private/", "journal/private/diary.md", True),
        ("private/", "private.md", False),
        ("private/", "public/diary.md", False),
        ("journal/private/", "journal/private/x.md", True),
        ("journal/private/", "private/x.md", False),
    ],
)
def test_a_trailing_slash_pattern_matches_everything_in_that_folder(pattern: str, path: str, expected: bool) -> None:
    assert matches(path, pattern) is expected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("private", "private/diary.md", True),
        ("private", "journal/private/deep/diary.md", True),
        ("private", "private.md", False),
        ("private", "privateer/x.md", False),
        ("/private", "private/diary.md", True),
        ("/private", "journal/private/diary.md", False),
        ("work/old", "work/old/x.md", True),
        ("work/old", "a/work/old/x.md", False),
        ("work/*", "work/sub/x.md", True),
        ("/", "a.md", False),
    ],
)
def test_a_pattern_naming_a_folder_matches_everything_in_it_as_in_gitignore(
    pattern: str, path: str, expected: bool
) -> None:
    assert matches(path, pattern) is expected


def test_commits_selected_by_globs_whose_reading_changed_are_read_again() -> None:
    assert read_otherwise_before("private") and read_otherwise_before("/private") and read_otherwise_before("*.md")
    assert not read_otherwise_before("private/") and not read_otherwise_before("work/**")


def test_no_include_means_everything_not_excluded() -> None:
    assert selected("a/b.md", [], []) is True
    assert selected("a/b.tmp.md", [], ["*.tmp.md"]) is False


def test_include_and_exclude_together() -> None:
    include, exclude = ["work/**", "journal/**"], ["**/draft-*.md", "*.tmp.md"]
    kept = [
        path
        for path in ["work/plan.md", "work/draft-plan.md", "journal/2024/day.md", "journal/x.tmp.md", "home/todo.md"]
        if selected(path, include, exclude)
    ]
    assert kept == ["work/plan.md", "journal/2024/day.md"]


def test_excluding_a_folder_with_a_trailing_slash() -> None:
    assert selected("private/diary.md", [], ["private/"]) is False


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("Privé/**", _nfd("Privé/mot de passe.md")),
        (_nfd("Privé/**"), "Privé/mot de passe.md"),
        ("Über*", _nfd("Über das Gebäude.md")),
        ("Priv?/", _nfd("Privé/x.md")),
    ],
)
def test_composed_and_decomposed_names_match_alike(pattern: str, path: str) -> None:
    assert matches(path, pattern) is True


def test_a_decomposed_folder_on_disk_is_excluded_by_a_composed_glob(tmp_path) -> None:
    private = tmp_path / _nfd("Privé")
    private.mkdir()
    (private / "secret.md").write_text("# Secret\n\nThe code is 4711.\n", encoding="utf-8")
    (tmp_path / "work.md").write_text("# Work\n\nMeeting on Monday.\n", encoding="utf-8")
    on_disk = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md"))
    kept = [path for path in on_disk if selected(path, [], ["Privé/**"])]
    assert kept == ["work.md"]
