"""`mem ask` / `mem eval` with --match, in several scripts, as a user runs them."""

from __future__ import annotations

import json

import pytest

from crossmodalrag.cli.main import main
from tests.conftest import write_note


@pytest.fixture
def vault(tmp_path, capsys):
    root = tmp_path / "vault"
    write_note(root, "retry.md", "# Retries\nThe client retries after a rate limit with backoff.\n")
    write_note(root, "disk.md", "# Disk\nA limit on the rate of writes keeps the disk healthy.\n")
    write_note(root, "zh.md", "# 解析器\n解析器为什么要重写？因为正则表达式回溯太慢。\n")
    write_note(root, "vi.md", "# Bàn giao\nQuy trình bàn giao dự án gồm ba bước.\n")
    assert main(["ingest-notes", str(root)]) == 0
    capsys.readouterr()
    return root


def ask(capsys, *argv: str) -> dict:
    assert main(["ask", *argv, "--no-llm", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def names(answer: dict) -> list[str]:
    return [e["locator"] for e in answer["evidence"]]


def test_match_modes_on_ask(vault, capsys):
    assert set(names(ask(capsys, "rate limit retries"))) == {"retry.md", "disk.md"}
    assert names(ask(capsys, "rate limit retries", "--match", "all")) == ["retry.md"]
    assert names(ask(capsys, "rate limit", "--match", "phrase")) == ["retry.md"]
    assert ask(capsys, "limit rate", "--match", "phrase")["abstained"]


def test_an_unknown_match_mode_is_a_usage_error(vault, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["ask", "x", "--match", "most"])
    assert caught.value.code == 2


def test_chinese_and_unaccented_vietnamese_questions_find_their_notes(vault, capsys):
    chinese = ask(capsys, "解析器为什么要重写？")
    assert names(chinese)[0] == "zh.md" and not chinese["abstained"]
    assert names(ask(capsys, "quy trinh ban giao"))[0] == "vi.md"


def test_evidence_json_has_byte_offsets_into_the_note(vault, capsys):
    evidence = ask(capsys, "解析器为什么要重写？")["evidence"][0]
    raw = (vault / "zh.md").read_bytes()
    body = raw[evidence["byte_start"] : evidence["byte_end"]].decode("utf-8")
    assert body == raw.decode("utf-8")[evidence["char_start"] : evidence["char_end"]]
    assert "正则表达式" in body


def test_eval_takes_the_match_mode(vault, capsys, tmp_path):
    queries = tmp_path / "q.json"
    retry = str(vault / "retry.md")
    queries.write_text(json.dumps([{"query_text": "rate limit retries", "expected_source_uris": [retry]}]))
    assert main(["eval", "--load-queries", str(queries), "--match", "all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["per_query"][0]["retrieved_source_uris"] == [retry]
