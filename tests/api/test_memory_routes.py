"""The memory-hierarchy routes over a built sample: each one is its CLI twin's JSON."""

from __future__ import annotations

import pytest

from tests.api.helpers import cli_json, without_timing

TWINS = {
    "memory-stats": ["memory-stats"],
    "timeline": ["timeline"],
    "concepts": ["concepts"],
    "drift": ["drift"],
    "distill": ["distill"],
    "usage": ["usage"],
}


@pytest.mark.parametrize("view", sorted(TWINS))
def test_memory_routes_equal_their_cli_twin(built_client, built_db, capsys, monkeypatch, view) -> None:
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    response = built_client.get(f"/{view}")
    assert response.status_code == 200
    assert response.json() == cli_json(capsys, *TWINS[view], "--db-path", str(built_db))


@pytest.mark.parametrize("params", [{}, {"level": "all", "top": 3}, {"level": "event", "min_support": 2}])
def test_forgetting_takes_its_cli_twins_options_and_defaults(built_client, built_db, capsys, params) -> None:
    response = built_client.get("/forgetting", params=params)
    flags = [part for key, value in params.items() for part in (f"--{key.replace('_', '-')}", str(value))]
    assert response.json() == cli_json(capsys, "forgetting", *flags, "--db-path", str(built_db))


@pytest.mark.parametrize(
    ("view", "params"),
    [
        ("timeline", {"limit": 2}),
        ("timeline", {"project": "no-such-project"}),
        ("timeline", {"project": "quillmark", "limit": 1}),
        ("concepts", {"top": 1}),
        ("drift", {"top": 1, "min_support": 1}),
        ("distill", {"top": 1}),
        ("usage", {"top": 1}),
    ],
)
def test_memory_routes_take_their_cli_twins_options(built_client, built_db, capsys, view, params) -> None:
    """They were capped at the CLI defaults, their options silently ignored."""
    response = built_client.get(f"/{view}", params=params)
    assert response.status_code == 200
    flags = [part for key, value in params.items() for part in (f"--{key.replace('_', '-')}", str(value))]
    assert response.json() == cli_json(capsys, view, *flags, "--db-path", str(built_db))


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/timeline?limit=0", "limit: Input should be greater than or equal to 1"),
        ("/concepts?top=501", "top: Input should be less than or equal to 500"),
        ("/drift?min_support=x", "min_support: Input should be a valid integer"),
    ],
)
def test_a_bad_memory_view_option_is_a_422_naming_it(built_client, path, error) -> None:
    response = built_client.get(path)
    assert response.status_code == 422 and response.json()["error"].startswith(error)


def test_a_console_memory_page_says_when_more_exist_and_links_to_them(built_client) -> None:
    everything = built_client.get("/timeline").json()["episodes"]
    assert len(everything) >= 3
    first = built_client.get("/ui/timeline", params={"limit": 2})
    assert first.text.count('class="memory-list"') == 1 and first.text.count("<strong>") == 2
    assert "The latest 2 episodes shown; there are more" in first.text
    assert 'href="/ui/timeline?limit=4"' in first.text
    assert everything[-1]["title"] in first.text and everything[0]["title"] not in first.text  # the latest ones
    whole = built_client.get("/ui/timeline", params={"limit": len(everything)})
    assert "there are more" not in whole.text and whole.text.count("<strong>") == len(everything)
    narrowed = built_client.get("/ui/forgetting", params={"top": 1})  # the console's level (all) stays
    assert (
        'href="/ui/forgetting?top=2"' in narrowed.text and "mem forgetting --level all --top 1 --json" in narrowed.text
    )
    assert built_client.get("/ui/timeline", params={"limit": 0}).status_code == 422
    assert (
        "The latest 1 episode shown; there are more" in built_client.get("/ui/timeline?limit=1").text
    )  # not "1 episodes"


def test_recall_takes_a_level_and_a_top(built_client) -> None:
    cards = built_client.get("/recall", params={"top": 2, "level": "all"}).json()["cards"]
    assert 0 < len(cards) <= 2
    assert built_client.get("/recall", params={"level": "nonsense"}).status_code == 422


def test_the_recall_page_and_route_say_template_cards_stand_where_mem_recall_would_write(built_client) -> None:
    """/recall showed template cards where `mem recall --json` had the model write (and keep) cards, unsaid."""
    page = built_client.get("/ui/recall").text
    assert 'id="template-cards"' in page and "<code>mem recall</code> with a model" in page
    summary = built_client.get("/openapi.json").json()["paths"]["/recall"]["get"]["summary"]
    assert "template cards where none is kept yet" in summary


def test_timeline_cites_l0_evidence(built_client) -> None:
    episodes = built_client.get("/timeline").json()["episodes"]
    assert episodes and all(e["evidence"] and e["events"] for e in episodes)
    assert all(item["source_uri"] and item["chunk_id"] for e in episodes for item in e["evidence"])


def test_forgetting_and_recall_ground_every_item(built_client) -> None:
    items = built_client.get("/forgetting", params={"level": "all"}).json()["items"]
    assert items and all(i["risk"] == pytest.approx(i["importance"] * i["staleness"], abs=1e-5) for i in items)
    cards = built_client.get("/recall").json()["cards"]
    assert cards and all(c["cited"] and c["generator"] == "template" for c in cards)


def test_ask_at_the_event_level_returns_matched_nodes(built_client, built_db, capsys, monkeypatch) -> None:
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    question = "Why did I drop the LRU render cache?"
    body = built_client.get("/ask", params={"q": question, "level": "event", "no_llm": True}).json()
    assert body["level"] == "event" and body["matched_nodes"]
    assert body["matched_nodes"][0]["id"].startswith("ev_") and body["evidence"]
    twin = cli_json(capsys, "ask", question, "--level", "event", "--no-llm", "--db-path", str(built_db))
    assert without_timing(body) == without_timing(twin)


def test_eval_at_the_event_level_is_mem_eval_at_that_level(built_client, built_db, capsys, monkeypatch) -> None:
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    params = {"query_prefix": "[sample]", "level": "event"}
    body = built_client.get("/eval", params=params).json()
    twin = cli_json(capsys, "eval", "--query-prefix", "[sample]", "--level", "event", "--db-path", str(built_db))
    assert body == twin and body["level"] == "event"
    evidence = built_client.get("/eval", params={"query_prefix": "[sample]"}).json()
    assert evidence["level"] == "evidence"
