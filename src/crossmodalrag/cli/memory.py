"""The memory-hierarchy commands (`mem build-memory`, `events`, `timeline`, `concepts`, …): parse,
call one library function in memory/, render its payload (or print it with --json)."""

from __future__ import annotations

import argparse

from crossmodalrag.cli.arguments import minutes, positive
from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.progress import ExtractProgress
from crossmodalrag.cli.render import print_json
from crossmodalrag.memory.build import LEVELS
from crossmodalrag.memory.extract import EVENT_TYPES
from crossmodalrag.wording import counted

NODE_LEVELS = ("event", "episode", "concept")


def register(sub, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """Add the memory commands to `mem`'s subcommands (called once from cli/main.py)."""
    p = sub.add_parser("build-memory", parents=[common, as_json], help="build events, episodes, concepts, graph")
    p.add_argument("--level", choices=(*LEVELS, "all"), default="all", help="only this level (default: all)")
    p.add_argument("--limit", type=positive, metavar="N", help="extract events from at most N sources this run")
    p.add_argument("--max-minutes", type=minutes, metavar="M", help="stop extracting after M minutes")
    p.add_argument("--model", metavar="ID", help="extraction model: a GGUF file or a server's model name")
    p.set_defaults(run=build_memory)

    p = sub.add_parser("events", parents=[common, as_json], help="L1 events with their evidence")
    p.add_argument(
        "--source",
        metavar="SOURCE",
        help="only events of this source (its uri, path, id or repo@sha; a chat export file: all its sessions)",
    )
    p.add_argument("--type", choices=EVENT_TYPES, help="only events of this type")
    p.add_argument("--limit", type=positive, default=50, help="how many (default 50)")
    p.set_defaults(run=events)

    p = sub.add_parser("memory-stats", parents=[common, as_json], help="node and edge counts, integrity, sources")
    p.set_defaults(run=memory_stats)

    p = sub.add_parser("concepts", parents=[common, as_json], help="L3 concepts by centrality")
    p.add_argument("--top", type=positive, default=20, help="how many (default 20)")
    p.set_defaults(run=concepts)

    p = sub.add_parser("timeline", parents=[common, as_json], help="L2 episodes, oldest first")
    p.add_argument("--limit", type=positive, default=50, help="how many of the latest (default 50)")
    p.add_argument("--project", help="only this project (folder, repository or its name, or a conversation's title)")
    p.set_defaults(run=timeline)

    p = sub.add_parser("drift", parents=[common, as_json], help="how each concept moved over time")
    p.add_argument("--top", type=positive, default=10, help="the N most drifting concepts (default 10)")
    p.add_argument("--min-support", type=positive, default=2, help="concepts with at least N events (default 2)")
    p.set_defaults(run=drift)

    p = sub.add_parser("distill", parents=[common, as_json], help="the few chunks that stand for each node")
    p.add_argument("--top", type=positive, default=20, help="the N most central episodes and concepts (default 20)")
    p.set_defaults(run=distill)

    p = sub.add_parser("forgetting", parents=[common, as_json], help="what you are likely forgetting, and why")
    p.add_argument("--level", choices=(*NODE_LEVELS, "all"), default="concept", help="default: concept")
    p.add_argument("--top", type=positive, default=10, help="how many (default 10)")
    p.add_argument("--min-support", type=positive, default=1, help="episodes/concepts with at least N events")
    p.set_defaults(run=forgetting)

    p = sub.add_parser("recall", parents=[common, as_json], help="study cards from your own evidence")
    p.add_argument("--level", choices=(*NODE_LEVELS, "all"), default="all", help="default: all")
    p.add_argument("--top", type=positive, default=10, help="how many cards (default 10)")
    p.add_argument("--min-support", type=positive, default=1, help="episodes/concepts with at least N events")
    p.add_argument("--regenerate", action="store_true", help="write the cards again even if cached")
    p.set_defaults(run=recall)

    p = sub.add_parser("usage", parents=[common, as_json], help="the opt-in usage log (never the questions)")
    p.add_argument("--top", type=positive, default=20, help="the N most used (default 20)")
    p.add_argument("--clear", action="store_true", help="wipe the usage log")
    p.set_defaults(run=usage)
    _extend_ask_and_eval(sub)


def _extend_ask_and_eval(sub) -> None:
    """`--level` on ask, chat, eval and eval-generation; the usage flags on ask and chat (they live
    with the hierarchy)."""
    for name in ("ask", "chat", "eval", "eval-generation"):
        sub.choices[name].add_argument(
            "--level",
            choices=("evidence", *NODE_LEVELS),
            default="evidence",
            help="retrieve through this memory level, drilling down to evidence (default: evidence)",
        )
    for name in ("ask", "chat"):
        asking = sub.choices[name]
        asking.add_argument("--track", action="store_true", help="log what answers showed (usage log, opt-in)")
        asking.add_argument("--accept", action="store_true", help="log answers as accepted (implies --track)")
        asking.add_argument("--no-track", action="store_true", help="never log this call (wins over the others)")


def build_memory(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.build import build_memory as build

    settings = _settings(args)
    levels = LEVELS if args.level == "all" else (args.level,)
    progress = ExtractProgress()
    with _open(settings, create=False) as store:
        report = build(store, settings, levels, args.limit, args.max_minutes, args.model, progress)
    progress.finish()
    for message in report.notices:
        notice(f"note: {message}")
    if args.json:
        print_json(report.to_dict())
    else:
        for level, result in report.levels.items():
            notice(f"{level}: {_summary(result)}")
        for failure in report.levels.get("event", {}).get("failed", []):
            notice(f"failed: {failure['uri']} (source {failure['source_id']}): {failure['reason']}")
        waiting = report.levels.get("event", {}).get("waiting_sources", [])
        _list_some("waiting", waiting, "mem build-memory --json", notice, indent="")
        if not report.ran:  # every level asked for was skipped: a failure says so as failures do
            notice(
                "error: nothing was built: every level asked for was skipped"
                " (hint: each skipped level above says what it needs first)"
            )
    return 0 if report.ran else 1


SOME = 5  # sources listed on a terminal; --json lists them all


def _list_some(label: str, sources: list[dict], full: str, show, indent: str = "  ") -> None:
    """The first few sources of a list, one a line, then how many more and where they all are."""
    for item in sources[:SOME]:
        why = f": {item['reason']}" if item.get("reason") else ""
        show(f"{indent}{label}: {item['uri']} (source {item['source_id']}){why}")
    if len(sources) > SOME:
        show(f"{indent}{label}: and {len(sources) - SOME} more (`{full}` lists them all)")


def _summary(result: dict) -> str:
    if "skipped" in result:
        return f"skipped: {result['skipped']}"
    shown = {k: v for k, v in result.items() if not isinstance(v, (list, dict))}
    gone = result.get("removed_orphans")
    text = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown.items())
    return text + (f"; removed {counted(len(gone), 'event')} whose source is gone" if gone else "")


def events(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.events import list_events

    found = _fetch(args, lambda s: list_events(s, args.source, args.type, args.limit), "events")
    if found is None:
        return 0
    if not found:
        narrowed = args.source or args.type
        notice("no events match --source/--type" if narrowed else "no events yet: run `mem build-memory`")
    for event in found:
        flag = "" if event["supported"] else "  [waiting for a model]" if event["waiting"] else "  [unsupported]"
        if not event["supported"] and event["not_in_source"]:
            flag = f"  [unsupported: {', '.join(event['not_in_source'])} not in its source]"
        print(f"{(event['first_time'] or '')[:10]}  {event['type']:<8} {event['statement']}{flag}")
        print(f"    {event['id']}  {_locators(event['evidence'])}")
    return 0


def _fetch(args: argparse.Namespace, fetch, key: str) -> list | None:
    """A view's rows from the memory; with --json they are printed as {key: rows} and None returned."""
    with _open(_settings(args), create=False) as store:
        found = fetch(store)
    if args.json:
        print_json({key: found})
        return None
    return found


def _locators(evidence: list[dict]) -> str:
    """Where a node's evidence is, each with the id `mem source ID` opens (a `#chunk` read as an anchor)."""
    return "; ".join(f"{e['locator']} (source {e['source_id']})" for e in evidence[:3]) or "(no evidence left)"


def memory_stats(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.stats import memory_stats as stats

    with _open(_settings(args), create=False) as store:
        report = stats(store)
    if args.json:
        print_json(report)
        return 0
    nodes, integrity, sources = report["nodes"], report["integrity"], report["sources"]
    print("nodes: " + ", ".join(f"{level} {count}" for level, count in nodes.items()))
    print("edges: " + (", ".join(f"{kind} {count}" for kind, count in report["edges"].items()) or "none"))
    print(f"evidence links: {report['evidence_links']}")
    print("integrity: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in integrity.items()))
    print(
        f"sources: {sources['total']}: {sources['extracted']} extracted, {sources['not_extracted']} not extracted yet,"
        f" {len(sources['failed'])} failed"
    )
    for failure in sources["failed"]:
        print(f"  failed: {failure['uri']}: {failure['reason']}")
    _list_some("not extracted", sources["not_extracted_sources"], "mem memory-stats --json", print)
    print(
        f"drift concepts {report['drift_concepts']}, distilled nodes {report['distilled_nodes']},"
        f" recall cards {report['recall_cards']}, usage events {report['usage_events']}"
    )
    return 0


def concepts(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.concepts import list_concepts, why_no_concepts

    found = _fetch(args, lambda s: list_concepts(s, args.top), "concepts")
    if found is None:
        return 0
    if not found:
        with _open(_settings(args), create=False) as store:
            notice(f"no concepts: {why_no_concepts(store.conn)}")
    for item in found:
        spread = f"{counted(item['support'], 'event')}, {counted(item['projects'], 'project')}"
        print(f"{item['centrality']:7.3f}  {item['title']}  ({spread})")
        print(f"         {item['id']}  {_locators(item['evidence'])}")
    return 0


def timeline(args: argparse.Namespace) -> int:
    from crossmodalrag.answer.prompt import clip
    from crossmodalrag.memory.episodes import timeline as episodes

    found = _fetch(args, lambda s: episodes(s, args.limit, args.project), "episodes")
    if found is None:
        return 0
    if not found and args.project:
        notice(f"no episode matches --project {args.project!r} (`mem timeline` lists every project's)")
    elif not found:
        notice("no episodes yet: run `mem build-memory`")
    for item in found:
        print(f"{item['title']}")
        print(f"    {clip(item['statement'], 160)}")  # at a word, marked: "... table hit 4" read as a figure
        print(f"    {item['id']}  {_locators(item['evidence'])}")
    return 0


def drift(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.drift import drift_view, sparkline

    found = _fetch(args, lambda s: drift_view(s, args.top, args.min_support), "concepts")
    if found is None:
        return 0
    if not found:
        notice(_why_no_drift(args))
    for item in found:
        line = sparkline([w["drift"] for w in item["windows"]])
        again = "  relearning" if item["relearning"] else ""
        last = item.get("last_time") or item["windows"][-1]["start"]  # drift stored before last_time was
        span = f"{item['windows'][0]['start'][:10]} to {last[:10]}"
        print(f"{line:<24} drift {item['overall_drift']:.3f}  {span}  {item['title']}{again}")
        print(f"{'':<24} {item['concept_id']}  {item['grounding_uri']}")
    return 0


def _why_no_drift(args: argparse.Namespace) -> str:
    """No concept spans two windows, or those that do have fewer than --min-support events."""
    from crossmodalrag.memory.drift import drift_view

    settings = _settings(args)
    with _open(settings, create=False) as store:
        if drift_view(store, 1, 1):
            return f"no drifting concept has at least {args.min_support} events: lower --min-support"
        return _no_drift_window(store.conn, settings.drift_window_days)


def _no_drift_window(conn, window_days: float) -> str:
    """Why no concept has a drift series: no concepts, a build not run since they changed, or (after a
    build, when running it again changes nothing) concepts whose events all fall in one window."""
    from crossmodalrag.memory.concepts import why_no_concepts

    concepts, unbuilt, longest = conn.execute(
        "SELECT COUNT(*), COUNT(CASE WHEN json_type(metadata, '$.drift') IS NULL THEN 1 END),"
        " MAX(last_time - first_time) FROM memory_nodes WHERE level = 'concept'"
    ).fetchone()
    if not concepts:
        return f"no concepts: {why_no_concepts(conn)}"
    if unbuilt:
        return "no concept has a drift series yet: run `mem build-memory`"
    return (
        f"no concept spans two drift windows yet: the longest spans {(longest or 0) / 86400:.0f} days, a window"
        f" {window_days:g} (CMRAG_DRIFT_WINDOW_DAYS); drift shows once a topic comes back later, or with a shorter"
        " window"
    )


def distill(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.distill import distill_view

    found = _fetch(args, lambda s: distill_view(s, args.top), "nodes")
    if found is None:
        return 0
    if not found:
        notice("nothing distilled yet: run `mem build-memory` (distillation needs episodes or concepts)")
    for item in found:
        print(f"{item['level']:<8} {item['title']}  ({len(item['stand_ins'])} of {item['chunks_total']} chunks)")
        print(f"         {_locators(item['stand_ins'])}")
    return 0


def usage(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.usage import clear, usage_view

    with _open(_settings(args), create=False) as store:
        if args.clear:
            notice(f"usage log cleared ({counted(clear(store), 'event')})")
        report = usage_view(store, args.top)
    if args.json:
        print_json(report)
        return 0
    if not report["events"] and not args.clear:  # just cleared: the hint to opt in would read as never on
        notice("the usage log is empty (opt in with CMRAG_USAGE_TRACKING=on or `mem ask --track`)")
    for item in report["targets"]:
        events = ", ".join(f"{k} {v}" for k, v in sorted(item["events"].items()))
        print(f"{item['uses']:5d}  {item['target_id']:<20} {events}  (last {item['last_used']})")
    return 0


def forgetting(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.forgetting import forgetting as at_risk

    half_life = _settings(args).usage_halflife_days
    found = _fetch(args, lambda s: at_risk(s, args.level, args.top, args.min_support, half_life), "items")
    if found is None:
        return 0
    if not found:
        notice(_why_none(args))
    for item in found:
        why = f"importance {item['importance']:.3f} x staleness {item['staleness']:.3f}"
        age = f"{item['days_since_touched']:.0f} days ({item['touched_by'].replace('_', ' ')})"
        print(f"{item['risk']:.3f}  {item['level']:<8} {item['title']}  [{why}; {age}]")
        print(f"      {_locators(item['evidence'])}")
    return 0


def _why_none(args: argparse.Namespace) -> str:
    """Why `mem forgetting` or `mem recall` found nothing at --level: no such node yet, or none with
    --min-support events, or none with evidence left."""
    from crossmodalrag.memory.concepts import why_no_concepts

    levels = NODE_LEVELS if args.level == "all" else (args.level,)
    marks = ",".join("?" * len(levels))
    with _open(_settings(args), create=False) as store:
        total, supported = store.conn.execute(
            "SELECT COUNT(*), COUNT(CASE WHEN level = 'event' OR json_extract(metadata, '$.events') >= ?"
            f" THEN 1 END) FROM memory_nodes WHERE level IN ({marks}) AND supported = 1",
            (args.min_support, *levels),
        ).fetchone()
        if not total and args.level == "concept":
            return f"no concepts: {why_no_concepts(store.conn)}"
    what = "memory" if args.level == "all" else args.level
    if not total:
        return f"no {what} nodes yet: run `mem build-memory`"
    if not supported:
        return f"no {what} node has at least {args.min_support} events (--min-support counts an episode's or concept's)"
    return f"no {what} node has evidence left: run `mem build-memory` to rebuild from what remains"


def recall(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.build import extraction_llm
    from crossmodalrag.memory.recall import recall_cards

    settings = _settings(args)
    with _open(settings, create=False) as store:  # no database: its error alone, before any note
        llm, why, _ = extraction_llm(settings)
        if llm is None:
            kept = " (cards a model wrote are kept)" if args.regenerate else ""
            notice(f"note: new cards are template cards{kept}, as {why}")
        cards = recall_cards(
            store,
            args.level,
            args.top,
            args.min_support,
            settings.usage_halflife_days,
            llm,
            args.regenerate,
            min_margin=settings.verify_min_margin,
        )
    if args.json:
        print_json({"cards": cards})
        return 0
    if not cards:
        notice(_why_none(args))
    for number, card in enumerate(cards, 1):
        print(f"{number}. {card['question']}")
        print(f"   {card['answer']}  [{_locators(card['cited'])}]")
    return 0
