"""PDFs through the real pypdfium2: page locators, bad files, folders, incremental re-ingest."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.cli.main import main
from crossmodalrag.connectors.pdf import read_pdf
from crossmodalrag.errors import ConnectorError
from crossmodalrag.ingest import ingest_pdfs
from tests.conftest import write_note
from tests.pdfs import add_page_labels, write_form_pdf, write_pdf

pytestmark = pytest.mark.integration
pytest.importorskip("pypdfium2")


def test_pages_become_chunks_with_page_locators_and_never_straddle(tmp_path):
    path = write_pdf(
        tmp_path / "spec.pdf",
        ["Rate limits: 100 requests.", "", "Retries use backoff."],
        title="API Spec",
        created="D:20240301120000Z",
    )
    doc = read_pdf(path)
    assert doc.title == "API Spec" and doc.modality == "pdf" and doc.metadata["empty_pages"] == [2]
    assert doc.timestamp == 1709294400.0  # the PDF's creation date, not the file's mtime
    chunks = chunk_document(doc)
    assert [c.locator for c in chunks] == ["spec.pdf p.1", "spec.pdf p.3"]
    assert [c.metadata["page"] for c in chunks] == [1, 3]
    for chunk in chunks:
        body = chunk.text.split("\n", 1)[1]
        assert doc.text[chunk.char_start : chunk.char_end] == body and "\f" not in body


@pytest.mark.parametrize("content", [b"not a pdf at all", b"%PDF-1.4\n1 0 obj << /Type /Catalog", b""])
def test_corrupt_or_truncated_pdfs_are_connector_errors(tmp_path, content):
    path = tmp_path / "bad.pdf"
    path.write_bytes(content)
    with pytest.raises(ConnectorError, match="cannot open as a PDF"):
        read_pdf(path)


def test_a_pdf_without_pages_says_so(tmp_path):
    """PDFium refuses it without an error code: the message said "(PDFium: Success)"."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 3\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    path = tmp_path / "zero.pdf"
    path.write_bytes(bytes(out))
    # In a process of its own: PDFium keeps the error code of the last file it failed to open.
    script = "import sys; from crossmodalrag.connectors.pdf import read_pdf; from pathlib import Path; "
    script += "read_pdf(Path(sys.argv[1]))"
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True)
    assert "zero.pdf: cannot open as a PDF (it has no pages) (hint" in result.stderr.splitlines()[-1]


def test_a_folder_ingests_and_a_bad_file_fails_alone_keeping_what_is_stored(store, tmp_path):
    folder = tmp_path / "papers"
    write_pdf(folder / "a.pdf", ["alpha page"])
    write_pdf(folder / "deep" / "b.pdf", ["bravo page", "bravo second page"])
    first = ingest_pdfs(store, [folder])
    assert (first.added, first.failed) == (2, 0)
    (folder / "a.pdf").write_bytes(b"garbage now")  # a broken update must not erase what we had
    (folder / "c.pdf").write_bytes(b"also garbage")
    second = ingest_pdfs(store, [folder])
    assert second.failed == 2 and second.unchanged == 1 and second.removed == 0
    uris = {r[0] for r in store.conn.execute("SELECT uri FROM sources")}
    assert uris == {str((folder / "a.pdf").resolve()), str((folder / "deep" / "b.pdf").resolve())}


def test_an_unchanged_pdf_is_read_again_once_its_reader_or_the_chunker_changes(store, tmp_path, monkeypatch):
    """The file stamp named only pypdfium2's version: an upgraded reader (page labels, form fields) or
    chunker never re-read a PDF whose bytes stayed. Read again to the same text, nothing is rewritten."""
    from crossmodalrag.connectors import pdf

    folder = tmp_path / "papers"
    write_pdf(folder / "a.pdf", ["alpha page"])
    ingest_pdfs(store, [folder])
    chunk_ids = store.conn.execute("SELECT id FROM chunks").fetchall()
    reads, read_pdf = [], pdf.read_pdf
    monkeypatch.setattr(pdf, "read_pdf", lambda path, **options: reads.append(path) or read_pdf(path, **options))
    assert ingest_pdfs(store, [folder]).unchanged == 1 and reads == []
    monkeypatch.setattr(pdf, "READER_VERSION", "next")
    report = ingest_pdfs(store, [folder])
    assert report.unchanged == 1 and len(reads) == 1
    assert report.notices == ["1 file read again: this version of mem reads such files better (once after an upgrade;"
                              " what reads the same is left as stored)"]  # fmt: skip
    assert store.conn.execute("SELECT id FROM chunks").fetchall() == chunk_ids
    assert ingest_pdfs(store, [folder]).unchanged == 1 and len(reads) == 1  # restamped: not read a third time
    monkeypatch.setattr("crossmodalrag.store.documents.CHUNKER_VERSION", "chunker-test-next")
    assert ingest_pdfs(store, [folder]).updated == 1 and len(reads) == 2


def test_a_broken_link_or_a_fifo_named_pdf_fails_alone_with_one_error_line(capsys, tmp_path):
    """pdfium raised FileNotFoundError for a link to a file that is gone, aborting the whole ingest."""
    folder = tmp_path / "papers"
    write_pdf(folder / "a.pdf", ["alpha page"])
    (folder / "broken.pdf").symlink_to(folder / "gone.pdf")  # a link to a file on an unmounted drive
    os.mkfifo(folder / "fifo.pdf")
    assert main(["ingest-pdf", str(folder)]) == 1
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {folder / 'broken.pdf'}: cannot read (No such file or directory)"
        " (hint: a link to a file that is gone: fix or remove the link)",
        f"error: {folder / 'fifo.pdf'}: not a regular file"
        " (hint: only regular files are read: remove it or move it out of the folder)",
    ]
    assert "1 added" in captured.err and "Traceback" not in captured.err


def test_a_folder_that_cannot_be_listed_is_named_and_keeps_its_stored_pdfs(store, tmp_path, monkeypatch):
    folder = tmp_path / "papers"
    write_pdf(folder / "a.pdf", ["alpha page"])
    write_pdf(folder / "sub" / "b.pdf", ["bravo page"])
    assert ingest_pdfs(store, [folder]).added == 2
    write_pdf(folder / "new" / "c.pdf", ["charlie page"])
    real_scandir = os.scandir

    def failing_scandir(path):  # as for a folder made unreadable (tests run as root, whom chmod does not stop)
        if os.path.basename(path) in ("sub", "new"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", failing_scandir)
    report = ingest_pdfs(store, [folder])
    assert (report.unchanged, report.removed) == (1, 0)
    assert [failure.split(":")[0] for failure in report.failures] == [str(folder / "new"), str(folder / "sub")]
    assert all("check the folder's permissions" in failure for failure in report.failures)
    assert {str(folder / "a.pdf"), str(folder / "sub" / "b.pdf")} == {
        uri for (uri,) in store.conn.execute("SELECT uri FROM sources")
    }


def test_a_stored_pdf_whose_folder_cannot_be_looked_in_is_kept(store, tmp_path, monkeypatch):
    """Path.is_file raised PermissionError for a stored file under a folder made unreadable."""
    from pathlib import Path

    folder = tmp_path / "papers"
    write_pdf(folder / "a.pdf", ["alpha page"])
    write_pdf(folder / "sub" / "b.pdf", ["bravo page"])
    ingest_pdfs(store, [folder])
    (folder / "sub" / "b.pdf").rename(folder / "sub" / ".b.pdf")  # out of the walk: looked up by its path
    real_stat = Path.stat

    def denied_stat(path, **kwargs):
        if path.parent.name == "sub":
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, **kwargs)

    monkeypatch.setattr(Path, "stat", denied_stat)
    report = ingest_pdfs(store, [folder])
    assert (report.removed, report.failures) == (0, [])
    assert ingest_pdfs(store, [folder / "sub" / "b.pdf"]).failures == [
        f"{folder / 'sub' / 'b.pdf'}: cannot read (Permission denied)"
        " (hint: check the permissions of the folders above it)"
    ]


def test_reingest_is_a_noop_and_deleted_pdfs_leave(store, tmp_path):
    folder = tmp_path / "papers"
    write_pdf(folder / "a.pdf", ["alpha"])
    write_pdf(folder / "b.pdf", ["bravo"])
    ingest_pdfs(store, [folder])
    assert ingest_pdfs(store, [folder]).unchanged == 2
    (folder / "b.pdf").unlink()
    assert ingest_pdfs(store, [folder]).removed == 1
    assert store.conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'bravo'").fetchone()[0] == 0


def test_cli_cites_pages_and_filters_by_modality(capsys, tmp_path):
    write_pdf(tmp_path / "spec.pdf", ["Intro page.", "The gateway enforces rate limits per token."])
    write_note(tmp_path / "vault", "limits.md", "# Limits\nOur notes on rate limits for the gateway.")
    assert main(["ingest-pdf", str(tmp_path / "spec.pdf")]) == 0
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    capsys.readouterr()
    assert main(["ask", "gateway rate limits", "--no-llm", "--json", "--modality", "pdf"]) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"]
    assert [(e["modality"], e["locator"], e["page"]) for e in evidence] == [("pdf", "spec.pdf p.2", 2)]
    assert main(["ask", "gateway rate limits", "--no-llm", "--json"]) == 0
    kinds = {e["modality"] for e in json.loads(capsys.readouterr().out)["evidence"]}
    assert kinds == {"pdf", "text"}
    assert main(["ask", "gateway rate limits", "--no-llm"]) == 0
    assert "spec.pdf p.2 (pdf" in capsys.readouterr().out


def test_a_labelled_page_is_cited_by_its_label_and_json_keeps_the_physical_page(capsys, tmp_path):
    pages = ["Preface.", "Contents.", "Thanks.", "Chapter one.", "The hartebeest migrates.", "More.", "End."]
    add_page_labels(write_pdf(tmp_path / "book.pdf", pages), "0 << /S /r >> 3 << /S /D >>")  # i-iii, then 1-4
    doc = read_pdf(tmp_path / "book.pdf")
    assert doc.metadata["page_labels"] == {"1": "i", "2": "ii", "3": "iii", "4": "1", "5": "2", "6": "3", "7": "4"}
    assert chunk_document(doc)[4].text.startswith("book.pdf > p.2 (page 5 of 7)\n")
    assert "page_labels" not in read_pdf(write_pdf(tmp_path / "plain.pdf", pages)).metadata  # labels = numbers
    assert main(["ingest-pdf", str(tmp_path / "book.pdf")]) == 0
    capsys.readouterr()
    assert main(["ask", "hartebeest", "--no-llm", "--json"]) == 0
    (citation,) = json.loads(capsys.readouterr().out)["citations"]
    assert (citation["locator"], citation["page"], citation["page_label"]) == ("book.pdf p.2 (page 5 of 7)", 5, "2")
    assert main(["source", "1", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["chunks"][4]
    assert (listed["locator"], listed["page"], listed["page_label"]) == ("book.pdf p.2 (page 5 of 7)", 5, "2")


def test_filled_in_form_fields_are_read_with_their_names_on_their_page(tmp_path):
    fields = [
        ("applicant", "Tx", "Bartholomew Quibble"),
        ("form1[0].page1[0].reason[0]", "Tx", "renewal of the serval permit"),
        ("urgent", "Btn", "Yes"),  # a check box: nothing searchable
        ("notes", "Tx", ""),
    ]
    doc = read_pdf(write_form_pdf(tmp_path / "form.pdf", "Permit application form", fields))
    assert doc.text == "Permit application form\napplicant: Bartholomew Quibble\nreason: renewal of the serval permit"
    assert [chunk.metadata["page"] for chunk in chunk_document(doc)] == [1]


def test_a_missing_path_is_one_error_line(capsys, tmp_path):
    assert main(["ingest-pdf", str(tmp_path / "nope.pdf")]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no such file or folder" in errors[0]


def test_without_the_pdf_extra_the_error_names_the_install(capsys, tmp_path, monkeypatch):
    from importlib import metadata

    from crossmodalrag.connectors import pdf

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pdf.package_metadata, "version", missing)
    write_pdf(tmp_path / "a.pdf", ["alpha"])
    assert main(["ingest-pdf", str(tmp_path / "a.pdf")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: PDF support is not installed") and 'pip install -e ".[pdf]"' in err


def test_reingesting_a_single_unchanged_file_is_a_noop(store, tmp_path):
    path = write_pdf(tmp_path / "one.pdf", ["alpha"])
    assert ingest_pdfs(store, [path]).added == 1
    ids = [r[0] for r in store.conn.execute("SELECT id FROM chunks")]
    again = ingest_pdfs(store, [path])
    assert (again.unchanged, again.chunks) == (1, 0)
    assert [r[0] for r in store.conn.execute("SELECT id FROM chunks")] == ids


def test_unchanged_files_are_not_read_again(tmp_path, store, monkeypatch):
    """Re-reading is the slow part (OCR): a file whose size and mtime are unchanged is skipped unread."""
    import os

    from crossmodalrag.connectors import pdf

    folder = tmp_path / "papers"
    folder.mkdir()
    first = write_pdf(folder / "a.pdf", ["Alpha page."])
    write_pdf(folder / "b.pdf", ["Beta page."])
    reads: list[str] = []
    real_read = pdf.read_pdf
    monkeypatch.setattr(pdf, "read_pdf", lambda path, **kw: reads.append(path.name) or real_read(path, **kw))

    assert ingest_pdfs(store, [folder]).added == 2 and sorted(reads) == ["a.pdf", "b.pdf"]
    reads.clear()
    report = ingest_pdfs(store, [folder])
    assert report.unchanged == 2 and reads == []

    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))  # touched, same bytes
    report = ingest_pdfs(store, [folder])
    assert report.unchanged == 2 and reads == []  # its bytes hash as stored: not read again
    stamp = f"{first.stat().st_size}:{first.stat().st_mtime_ns}:"
    assert (
        store.conn.execute("SELECT json_extract(metadata, '$.file_stamp') FROM sources WHERE uri = ?", (str(first),))
        .fetchone()[0]
        .startswith(stamp)
    )

    # a source stored before hashes were kept is read once more when touched, and gets its hash
    store.conn.execute("UPDATE sources SET metadata = json_remove(metadata, '$.file_sha256')")
    store.conn.commit()
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))
    assert ingest_pdfs(store, [folder]).unchanged == 2 and reads == ["a.pdf"]
    reads.clear()
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))
    assert ingest_pdfs(store, [folder]).unchanged == 2 and reads == []

    write_pdf(first, ["Alpha page, rewritten with more words."])
    report = ingest_pdfs(store, [folder])
    assert report.updated == 1 and reads == ["a.pdf"]


def test_of_two_identical_pdfs_the_renamed_one_keeps_its_id_when_the_other_is_deleted(tmp_path, store):
    """Both gone from their stored paths with the same bytes: the rename is the one of the same mtime."""
    papers = tmp_path / "papers"
    original = write_pdf(papers / "a.pdf", ["Budget 2027: the heron fund gets 40k euros."])
    copy = papers / "copy.pdf"
    copy.write_bytes(original.read_bytes())
    os.utime(copy, ns=(original.stat().st_atime_ns, original.stat().st_mtime_ns + 10**9))  # copied a second later
    ingest_pdfs(store, [papers])
    ids = dict(store.conn.execute("SELECT uri, id FROM sources").fetchall())
    original.unlink()
    final = copy.rename(papers / "final.pdf")
    report = ingest_pdfs(store, [papers])
    assert (report.moved, report.removed) == (1, 1)
    assert [tuple(row) for row in store.conn.execute("SELECT uri, id FROM sources")] == [(str(final), ids[str(copy)])]


def test_a_moved_or_renamed_pdf_keeps_its_source_id(tmp_path, store):
    papers, archive = tmp_path / "papers", tmp_path / "archive"
    first = write_pdf(papers / "draft.pdf", ["The aardvark migration budget."])
    ingest_pdfs(store, [papers])
    (source_id,) = store.conn.execute("SELECT id FROM sources").fetchone()

    renamed = first.rename(papers / "final.pdf")
    report = ingest_pdfs(store, [papers])
    assert (report.moved, report.added, report.removed) == (1, 0, 0)
    assert [tuple(row) for row in store.conn.execute("SELECT id, uri FROM sources")] == [(source_id, str(renamed))]

    archive.mkdir()
    moved = renamed.rename(archive / "final.pdf")  # to a folder ingested on its own
    report = ingest_pdfs(store, [archive])
    assert report.moved == 1 and report.notices == []  # not "no pdf files in it"
    assert [tuple(row) for row in store.conn.execute("SELECT id, uri FROM sources")] == [(source_id, str(moved))]
    assert ingest_pdfs(store, [papers]).removed == 0

    copy = papers / "copy.pdf"
    copy.write_bytes(moved.read_bytes())  # a copy is another source: the original is still there
    report = ingest_pdfs(store, [papers])
    assert (report.added, report.moved) == (1, 0)


def test_a_renamed_pdf_keeps_its_chunks_and_vectors_and_is_found_by_its_new_name(tmp_path, store):
    """Its file name heads every chunk, so a rename rewrote and embedded every chunk again (a 300-page
    manual: 3 minutes); now each keeps its row and vectors, its heading and index row relabelled."""
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.retrieval.search import SearchOptions, search
    from tests.fakes import HashingEmbedder

    papers = tmp_path / "papers"
    old = write_pdf(papers / "manual.pdf", ["Replica shard checkpoints.", "Eviction planner."], title="Ops")
    ingest_pdfs(store, [papers])
    embedder = HashingEmbedder()
    embed_missing(store, embedder)
    before = store.conn.execute("SELECT id FROM chunks ORDER BY id").fetchall()
    old.rename(papers / "handbook-2024.pdf")
    report = ingest_pdfs(store, [papers])
    assert (report.moved, report.chunks) == (1, 0)
    assert store.conn.execute("SELECT id FROM chunks ORDER BY id").fetchall() == before
    assert embed_missing(store, embedder).chunks == 0, "nothing to embed again"
    texts = [row[0] for row in store.conn.execute("SELECT text FROM chunks ORDER BY id")]
    assert texts[0] == "handbook-2024.pdf · Ops > p.1\nReplica shard checkpoints."
    hits = search(store, "handbook", SearchOptions()).hits
    assert {hit.locator for hit in hits} == {"handbook-2024.pdf p.1", "handbook-2024.pdf p.2"}
    assert not search(store, "manual", SearchOptions()).hits


def test_a_pdf_that_is_empty_or_really_an_image_says_so(tmp_path):
    from PIL import Image

    (tmp_path / "empty.pdf").write_bytes(b"")
    with pytest.raises(ConnectorError, match="cannot open as a PDF") as error:
        read_pdf(tmp_path / "empty.pdf")
    assert error.value.hint == "the file is empty"
    for kind in ("PNG", "JPEG"):
        Image.new("RGB", (20, 20), "white").save(tmp_path / f"{kind}.pdf", format=kind)
        with pytest.raises(ConnectorError) as error:
            read_pdf(tmp_path / f"{kind}.pdf")
        assert error.value.hint == f"it is a {kind} image: use `mem ingest-images`"
