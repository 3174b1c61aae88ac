"""The frontmatter fast path must agree with YAML wherever it answers, and defer everywhere else."""

import yaml
from hypothesis import given
from hypothesis import strategies as st

from crossmodalrag.connectors import frontmatter
from crossmodalrag.connectors.frontmatter import parse_frontmatter

KEYS = st.from_regex(r"[a-z][a-z_-]{0,8}", fullmatch=True)
VALUES = st.one_of(
    st.from_regex(r"20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])", fullmatch=True),
    st.from_regex(r"[A-Za-z][A-Za-z0-9 _./:#'-]{0,12}", fullmatch=True),
    st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True), max_size=4).map(lambda xs: f"[{', '.join(xs)}]"),
    st.sampled_from(["yes", "No", "null", "~", "12", "1.5", "'quoted'", "[a, 'b']", "{a: 1}", "2025-13-01", "true"]),
)


@given(st.lists(st.tuples(KEYS, VALUES), max_size=6))
def test_the_fast_path_agrees_with_yaml(pairs):
    raw = "\n".join(f"{key}: {value}" for key, value in pairs)
    try:
        expected = yaml.safe_load(raw) if raw else None
    except yaml.YAMLError:
        expected = None
    except ValueError:  # a value YAML resolves and cannot build ("2025-13-01"): every value read as a string
        expected = yaml.load(raw, Loader=yaml.BaseLoader)  # noqa: S506
    assert parse_frontmatter(raw) == (expected if isinstance(expected, dict) else {})


def test_typical_frontmatter_takes_the_fast_path(monkeypatch):
    monkeypatch.setattr(yaml, "load", lambda *a, **k: (_ for _ in ()).throw(AssertionError("YAML was called")))
    parsed = parse_frontmatter("date: 2025-08-02\ntags: [networking, ops]\ntitle: Release plan")
    assert parsed["tags"] == ["networking", "ops"] and parsed["title"] == "Release plan"
    assert str(parsed["date"]) == "2025-08-02"


def test_a_value_yaml_cannot_build_keeps_the_other_fields():
    parsed = parse_frontmatter("date: 2023-02-30\ncreated: 2022-06-01\ntags: [a, 'b']")
    assert parsed == {"date": "2023-02-30", "created": "2022-06-01", "tags": ["a", "b"]}


def test_anything_else_goes_to_yaml():
    assert frontmatter._simple("tags:\n  - a\n  - b") is None
    assert parse_frontmatter("tags:\n  - a\n  - b") == {"tags": ["a", "b"]}
    assert parse_frontmatter("published: yes") == {"published": True}
    assert parse_frontmatter(": broken : [") == {}
    assert parse_frontmatter("- just\n- a list") == {}
