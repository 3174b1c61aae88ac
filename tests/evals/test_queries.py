import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crossmodalrag.errors import EvalError
from crossmodalrag.evals.queries import (
    EvalQuery,
    gold_warnings,
    list_queries,
    load_queries_file,
    parse_queries,
    upsert_queries,
)
from tests.retrieval.helpers import add_docs, note


def test_upsert_replaces_gold_by_query_text(store):
    upsert_queries(store, [EvalQuery("[t] q1", ["/a"]), EvalQuery("[t] q2", [])])
    upsert_queries(store, [EvalQuery("[t] q1", ["/b"]), EvalQuery("[u] q3", ["/c"])])
    assert list_queries(store, "[t]") == [EvalQuery("[t] q1", ["/b"]), EvalQuery("[t] q2", [])]
    assert len(list_queries(store)) == 3


def test_the_label_prefix_is_not_part_of_the_question():
    assert EvalQuery("[sample] Why did I change the parser?", []).question == "Why did I change the parser?"
    assert EvalQuery("No label here", []).question == "No label here"


def test_gold_warnings_name_relative_doubled_and_unknown_uris(store):
    add_docs(store, note("known", "text"))
    queries = [EvalQuery("q", ["/vault/known.md", "vault/rel.md", "/vault//double.md", "/vault/missing.md"])]
    warnings = gold_warnings(store, queries)
    assert len(warnings) == 3
    assert "relative" in warnings[0] and "doubled" in warnings[1] and "matches no ingested source" in warnings[2]


def test_a_gold_uri_written_with_a_tilde_is_the_home_folders_path(store, tmp_path, monkeypatch):
    """`~/vault/rate.md` was stored literally, warned about as "relative" on every run, and never matched."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (query,) = parse_queries([{"query_text": "q", "expected_source_uris": ["~/vault/rate.md", "~/code/repo@abc1234"]}])
    assert query.expected_source_uris == [f"{tmp_path}/vault/rate.md", f"{tmp_path}/code/repo@abc1234"]
    upsert_queries(store, [EvalQuery("[t] old", ["~/vault/rate.md"])])  # loaded before `~` was expanded
    assert list_queries(store, "[t]")[0].expected_source_uris == [f"{tmp_path}/vault/rate.md"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not a readable JSON"),
        ('{"query_text": "x"}', "expected a JSON list"),
        ('[{"expected_source_uris": []}]', "no query_text"),
        ('[{"query_text": "q", "expected_source_uris": "/a"}]', "not a list of strings"),
    ],
)
def test_malformed_query_files_are_eval_errors(tmp_path, content, message):
    path = tmp_path / "q.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvalError, match=message):
        load_queries_file(path)


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ({"query_text": "q", "expected_source_uri": []}, "'expected_source_uri'; did you mean 'expected_source_uris'"),
        ({"Query_Text": "q", "expected_source_uris": []}, "'Query_Text'; did you mean 'query_text'?"),
        ({"query_text": "q", "expected_source_uris": [], "notes": "x"}, "'notes'"),
    ],
)
def test_an_unknown_key_is_refused_naming_it_and_the_closest_valid_one(tmp_path, item, named):
    """A misspelled expected_source_uris loaded the query as one that must abstain, with no warning."""
    path = tmp_path / "q.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    with pytest.raises(EvalError) as caught:
        load_queries_file(path)
    assert f"item 0 has an unknown key {named}" in caught.value.message
    assert "'query_text' and 'expected_source_uris'" in caught.value.hint


def test_missing_query_file(tmp_path):
    with pytest.raises(EvalError, match="no such file"):
        load_queries_file(tmp_path / "absent.json")


def test_valid_file_round_trips(tmp_path):
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"query_text": " q ", "expected_source_uris": ["/a", "/a"]}]), encoding="utf-8")
    assert load_queries_file(path) == [EvalQuery("q", ["/a"])]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_parse_queries_accepts_or_rejects_any_json_cleanly(data):
    try:
        parse_queries(data)
    except EvalError:
        pass
