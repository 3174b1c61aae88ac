"""The model `mem build-memory --model` (or CMRAG_EXTRACT_MODEL) names: used, or an error naming the real cause."""

from __future__ import annotations

import pytest

from crossmodalrag.answer.llm import LLMUnavailable
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.memory import build as build_module
from crossmodalrag.memory.build import build_memory
from tests.memory.helpers import ScriptedExtractor, add_docs, note, semantic_for


@pytest.fixture
def waiting(store):
    add_docs(store, note("a", "# A\n\nRedis costs 40 dollars a month; we decided to keep it."))
    return store


def _build(store, db_path, model, **settings):
    options = Settings(db_path=db_path, **settings)
    return build_memory(store, options, levels=("event",), model=model, semantic=semantic_for(store, db_path))


def test_a_model_that_is_no_file_is_an_error_when_the_backend_loads_files(waiting, db_path, tmp_path) -> None:
    """It was taken as a server's model name, which llamacpp ignores: the run used the default GGUF."""
    default = tmp_path / "default.gguf"
    default.write_bytes(b"GGUF")
    with pytest.raises(CMRAGError, match="is no file, and the llamacpp backend loads a GGUF file") as raised:
        _build(waiting, db_path, "/nonexistent/my-other-model", llm_model_path=str(default))
    assert "--model" in raised.value.hint
    with pytest.raises(CMRAGError, match="is no file"):
        _build(waiting, db_path, str(tmp_path), llm_provider="llamacpp")  # a folder is no GGUF file either


def test_a_missing_gguf_given_to_model_is_blamed_on_model(waiting, db_path) -> None:
    with pytest.raises(CMRAGError, match=r"no GGUF model at /nonexistent/other\.gguf \(from --model\)") as raised:
        _build(waiting, db_path, "/nonexistent/other.gguf")
    assert "CMRAG_LLM_MODEL_PATH" not in str(raised.value) + raised.value.hint


def test_a_model_file_that_cannot_load_gets_its_own_hint_not_start_its_server(waiting, db_path, monkeypatch) -> None:
    class Corrupt(ScriptedExtractor):
        def stream(self, messages, generation):
            raise LLMUnavailable("llama.cpp cannot load bad.gguf: it is not a GGUF file", "download it again")

    monkeypatch.setattr(build_module, "extraction_llm", lambda settings, chosen=None: (Corrupt(), "", ""))
    with pytest.raises(CMRAGError, match="cannot load bad.gguf") as raised:
        _build(waiting, db_path, "bad.gguf")
    assert raised.value.hint == "download it again"


def test_a_waiting_notice_names_the_setting_that_names_no_file(waiting, db_path) -> None:
    report = _build(waiting, db_path, None, llm_model_path="/nonexistent/m.gguf")
    (said,) = [n for n in report.notices if "for a language model" in n]
    assert "point CMRAG_LLM_MODEL_PATH at a GGUF file" in said and "set CMRAG_EXTRACT_MODEL" not in said


def test_the_progress_line_counts_only_the_sources_the_model_reads(store, db_path) -> None:
    """Without a model, 'events: extracting from 3 sources' was printed for three git commits."""
    from crossmodalrag.types import Document
    from tests.memory.helpers import event, events_output

    commits = [
        Document(f"/repo@{n:03x}", "commit", f"Fix bug {n}", f"Fix bug {n}\n\nbody", "diff", "code", 1e9 + n, f"r@{n}")
        for n in range(3)
    ]
    add_docs(store, *commits)
    calls = []
    options = Settings(db_path=db_path, llm_provider="none")
    semantic = semantic_for(store, db_path)
    build_memory(store, options, levels=("event",), semantic=semantic, progress=lambda *call: calls.append(call))
    assert calls == []
    add_docs(store, note("a", "# A\n\nWe shipped the release."))
    store.conn.execute("DELETE FROM memory_extractions")  # the commits need work again, beside the note
    llm = ScriptedExtractor(events_output(event("We shipped the release.")))
    build_memory(store, options, levels=("event",), semantic=semantic, llm=llm, progress=lambda *c: calls.append(c))
    assert [(done, total) for done, total, *_ in calls] == [(0, 1)]


def test_the_progress_line_counts_no_more_sources_than_limit_lets_the_model_read(store, db_path) -> None:
    """`--limit 1` on 30 waiting notes announced "extracting from 30 sources" and an ETA for all 30."""
    from tests.memory.helpers import event, events_output

    add_docs(store, *(note(f"n{n}", f"# N{n}\n\nWe shipped release {n}.") for n in range(3)))
    calls = []
    llm = ScriptedExtractor(events_output(event("We shipped the release.")))
    options = Settings(db_path=db_path, llm_provider="none")
    semantic = semantic_for(store, db_path)
    build_memory(store, options, ("event",), limit=1, semantic=semantic, llm=llm, progress=lambda *c: calls.append(c))
    assert [(done, total) for done, total, *_ in calls] == [(0, 1)]
