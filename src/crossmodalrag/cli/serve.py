"""`mem serve`, and the browsing commands whose JSON the API serves too: `mem sources`, `mem source`, `mem stats`."""

from __future__ import annotations

import argparse
import errno
import os
import socket
import stat
import sys
from pathlib import Path

from crossmodalrag.cli.render import print_json
from crossmodalrag.config import Settings, load_settings, read_environment
from crossmodalrag.errors import CMRAGError, ConfigError
from crossmodalrag.retrieval_mode import stats_report
from crossmodalrag.sources import list_sources, source_detail, stored_source_id
from crossmodalrag.store.readonly import open_configured_reader
from crossmodalrag.wording import one_line, terminal_safe

MIN_TOKEN_CHARS = 16
TOKEN_HINT = "e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > ~/.config/mem/token; chmod 600 it"


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings({"db_path": getattr(args, "db_path", None)})


def notice(message: str) -> None:
    sys.stderr.write(message + "\n")


def sources(args: argparse.Namespace) -> int:
    with open_configured_reader(_settings(args)) as store:
        listing = list_sources(
            store, args.kind, args.folder, args.since, args.until, args.limit, args.offset, relative_to=Path.cwd()
        ).to_dict()
    if args.json:
        print_json(listing)
        return 0
    for item in listing["sources"]:
        when = (item["timestamp"] or "")[:10] or "-"
        print(
            f"{item['id']:>6}  {when:<10}  {item['source_type']:<6}  "
            f"{one_line(item['title'] or item['locator'])}  ({one_line(item['locator'])})"
        )
    shown = len(listing["sources"])
    notice(f"{shown} of {listing['total']} sources" + (" (page with --offset)" if shown < listing["total"] else ""))
    if not listing["total"] and args.folder:  # a typo'd folder lists nothing, as an empty one does
        notice(f"nothing is in {args.folder!r}: `mem sources` without --folder shows each source's folder")
    if not listing["total"] and args.since and args.until and args.since[:10] > args.until[:10]:
        notice(f"--since {args.since} is after --until {args.until}: swap them")  # as the console says it
    return 0


def source(args: argparse.Namespace) -> int:
    with open_configured_reader(_settings(args)) as store:
        detail = source_detail(store, stored_source_id(store, args.source))
    if args.json:
        print_json(detail)
        return 0
    print(one_line(detail["title"] or detail["locator"]))
    print(f"{detail['source_type']} · {one_line(detail['uri'])} · {detail['timestamp']}")
    for chunk in detail["chunks"]:
        print(f"\n--- chunk {chunk['id']}: {one_line(chunk['locator'])}")
        print(terminal_safe(chunk["body"]))
    return 0


def stats(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with open_configured_reader(settings) as store:
        report = stats_report(store, settings)
    if args.json:
        print_json(report)
        return 0
    print(f"database: {report['database']} (schema v{report['schema_version']})")
    print("sources: " + (", ".join(f"{k} {v}" for k, v in report["sources"].items()) or "none"))
    print("chunks: " + (", ".join(f"{k} {v}" for k, v in report["chunks"].items()) or "none"))
    print("embedded: " + (", ".join(f"{k} {v}" for k, v in report["embedded_chunks"].items()) or "none"))
    print(f"retrieval: {retrieval_line(report['retrieval'])}")
    print(f"dated from {report['first'] or '-'} to {report['last'] or '-'}; {report['eval_queries']} eval queries")
    if report["per_month"]:  # the README's "sources per month", as --json and the console's chart show it
        print("per month: " + ", ".join(f"{row['month']} {row['sources']}" for row in report["per_month"]))
    return 0


def retrieval_line(retrieval: dict) -> str:
    """`hybrid with MODEL`, or the notice saying why it is lexical (it starts "lexical retrieval only")."""
    said = [f"hybrid with {retrieval['embedding_model']}"] if retrieval["mode"] == "hybrid" else []
    if retrieval["notice"]:
        said.append(retrieval["notice"])
    return "; ".join(said) or "lexical"


def read_token(args: argparse.Namespace) -> str | None:
    """The token from --token-file, else CMRAG_SERVE_TOKEN (environment or ./.env). Raises ConfigError."""
    if args.token_file:
        path = Path(args.token_file).expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
            mode = path.stat().st_mode
        except OSError as error:
            raise ConfigError(f"cannot read the token file {path}: {error.strerror}", TOKEN_HINT) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            notice(f"warning: {path} is readable by other users; chmod 600 it")
    else:
        token = read_environment(Path.cwd()).get("CMRAG_SERVE_TOKEN", "").strip() or None
        if token is None:
            return None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ConfigError(f"the token must be at least {MIN_TOKEN_CHARS} characters without spaces", TOKEN_HINT)
    return token


def _check_port(host: str, port: int) -> None:
    """Bind once to fail early and in one line: a port in use, or a host this machine does not have."""
    host = host.strip("[]")  # "[::1]", as an IPv6 address is written in a url
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except socket.gaierror as error:
            raise CMRAGError(
                f"cannot listen on {host}: {error.strerror}", "give --host an address of this machine"
            ) from None
        except OSError as error:
            in_use = error.errno == errno.EADDRINUSE
            hint = "pick another --port" if in_use else "give --host an address of this machine (127.0.0.1, ::1)"
            raise CMRAGError(f"cannot listen on {host}:{port}: {error.strerror}", hint) from None


def allowed_hosts(values: list[str] | None) -> set[str]:
    """The names --allow-host gave, as the Host check compares them. Raises ConfigError for one that
    names no host (an empty value, `user@box`): it could never match, and every request would get 421."""
    from crossmodalrag.api.security import allowed_name

    names = set()
    for value in values or []:
        name = allowed_name(value)
        if name is None:
            raise ConfigError(
                f"--allow-host {value!r} is not a host name",
                "give the name the browser uses, e.g. --allow-host mem.lan (a port or http:// is dropped)",
            )
        names.add(name)
    return names


def _mcp_app(args: argparse.Namespace, settings: Settings):
    if not getattr(args, "mcp", False):
        return None
    from crossmodalrag.mcp_server import require_mcp

    require_mcp()
    from crossmodalrag.mcp_server.http import mcp_http_app

    return mcp_http_app(settings)


def login_notice(url: str, token: str, token_file: str | None) -> str:
    """How to log in. The token itself only on a terminal, and never when it came from --token-file
    (its owner has it): stderr of a service goes to journald or a container log."""
    if token_file:
        shown = f"<the token in {token_file}>"
    else:
        shown = token if sys.stderr.isatty() else "<CMRAG_SERVE_TOKEN>"
    return f"login once in the browser with {url}?token={shown} (it sets a cookie and drops the token from the URL)"


def serve(args: argparse.Namespace) -> int:
    from crossmodalrag.api import require_ui

    require_ui()
    from crossmodalrag.api.security import is_loopback

    settings = _settings(args)
    token = read_token(args)
    allow = allowed_hosts(args.allow_host)  # before the store: a flag's mistake is named first
    loopback = is_loopback(args.host.strip("[]"))
    if not loopback and not token:
        raise CMRAGError(
            f"refusing to serve your memory on {args.host} without a token",
            f"pass --token-file FILE or set CMRAG_SERVE_TOKEN ({TOKEN_HINT})",
        )
    with open_configured_reader(settings) as store:  # fail now, with the store's hint, not on the first request
        where = store.location
    if not loopback and args.host not in ("0.0.0.0", "::"):
        allow.add(args.host.strip("[]").lower())
    _check_port(args.host, args.port)

    import uvicorn

    from crossmodalrag.api.app import create_app
    from crossmodalrag.api.security import MAX_HEAD_BYTES

    app = create_app(settings, token, frozenset(allow), mcp_app=_mcp_app(args, settings))
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host.strip("[]")
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{args.port}/"
    notice(f"mem console at {url} (API docs at {url}docs), serving {where} read-only; Ctrl-C stops")
    if token:
        notice(login_notice(url, token, args.token_file))
    if args.mcp:
        notice(f"MCP tools at {url}mcp (streamable HTTP; they can store and forget: same host and token rules)")
    if not loopback:
        notice("other machines reach it only through names given with --allow-host (the Host header is checked)")
    uvicorn.run(
        app,
        host=args.host.strip("[]"),
        port=args.port,
        log_level=os.environ.get("CMRAG_SERVE_LOG_LEVEL", "warning"),
        access_log=False,
        server_header=False,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=2,
    )
    return 0
