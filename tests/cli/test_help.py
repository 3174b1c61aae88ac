"""`--help`: every command says what it does and every argument what it takes."""

from __future__ import annotations

import argparse

from crossmodalrag.cli.main import build_parser


def _commands(parser: argparse.ArgumentParser, name: str = "mem"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, subparser in action.choices.items():
                yield f"{name} {command}", subparser
                yield from _commands(subparser, f"{name} {command}")


def test_every_command_has_a_description_and_every_argument_a_help_text():
    """`mem ask --help` never said what ask does; `mem recall --top`, `mem history SOURCE_URI_OR_ID`,
    `mem checkpoint name` and `mem models {list,install}` had no help text."""
    commands = list(_commands(build_parser()))
    assert len(commands) > 40
    assert [name for name, parser in commands if not parser.description] == []
    bare = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in commands
        for action in parser._actions
        if action.help is None
    ]
    assert bare == []


def test_the_glob_options_say_what_paths_they_match_and_how():
    parser = dict(_commands(build_parser()))["mem ingest-notes"]
    shown = " ".join(parser.format_help().split())  # as one line: argparse wraps to the terminal's width
    assert "relative to the vault or repository" in shown and "** across folders" in shown
