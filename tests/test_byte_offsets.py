"""Evidence offsets: UTF-8 byte offsets and character offsets name the same span of the source."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import open_store
from crossmodalrag.store.documents import utf8_offsets

PIECES = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00<>"), max_size=30),
    st.sampled_from(
        ["\r\n", "\n\n", "# Heading\r\n", "😀", "🧑‍🔬", "e\u0301", "ệ", "解析器", "𠀀", "ﾊﾟ", " ", "\u200d"]
    ),
)
NOTE = st.lists(PIECES, min_size=1, max_size=25).map("".join).filter(lambda t: t.strip())


@given(st.text(max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_utf8_offsets_match_encoding_a_prefix(text, positions):
    positions = [p for p in positions if p <= len(text)]
    offsets = utf8_offsets(text, positions)
    for position in positions:
        assert offsets[position] == len(text[:position].encode("utf-8", "surrogatepass"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(NOTE)
def test_every_chunk_s_byte_span_decodes_to_its_character_span_in_the_file(tmp_path, text):
    vault = tmp_path / "vault"
    vault.mkdir(exist_ok=True)
    path = vault / "note.md"
    path.write_bytes(text.encode("utf-8"))
    with open_store(tmp_path / "memory.db") as store:
        report = ingest_notes(store, [vault])
        rows = store.conn.execute("SELECT text, char_start, char_end, byte_start, byte_end FROM chunks").fetchall()
    if report.failed:  # e.g. only whitespace after all: nothing stored, nothing to check
        return
    raw = Path(path).read_bytes()
    decoded = raw.decode("utf-8")
    for chunk, char_start, char_end, byte_start, byte_end in rows:
        assert raw[byte_start:byte_end].decode("utf-8") == decoded[char_start:char_end]
        assert decoded[char_start:char_end] in chunk
