"""Images through the real rapidocr engine: text in reading order, confidence, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.connectors.images import read_image
from crossmodalrag.errors import ConnectorError
from crossmodalrag.ingest import ingest_images, ingest_pdfs
from crossmodalrag.retrieval.scoring import ocr_factor
from tests.conftest import write_note
from tests.images import write_text_image
from tests.pdfs import write_image_page_pdf

pytestmark = pytest.mark.integration
pytest.importorskip("rapidocr")


def test_ocr_reads_lines_in_order_and_labels_inside_boxes(tmp_path):
    path = write_text_image(
        tmp_path / "board.png", ["Next steps: ship the parser", "Then write the docs"], boxed=["Tokenizer", "Renderer"]
    )
    doc = read_image(path)
    assert doc.modality == "image" and doc.source_type == "image"
    lines = doc.text.splitlines()
    assert lines[0] == "Next steps: ship the parser" and lines[1] == "Then write the docs"
    assert "Tokenizer" in lines and "Renderer" in lines
    assert 0.8 < doc.metadata["ocr_confidence"] <= 1.0


@pytest.mark.parametrize("mode", ["CMYK", "I;16", "P", "LA"])
def test_images_stored_in_other_modes_are_read(tmp_path, mode):
    import numpy as np
    from PIL import Image

    drawn = Image.open(write_text_image(tmp_path / "drawn.png", ["Quarterly review notes"]))
    if mode == "I;16":  # 16-bit grey, full range
        grey = (np.asarray(drawn.convert("L"), dtype=np.uint16) * 257).astype("<u2")
        converted = Image.frombytes("I;16", drawn.size, grey.tobytes())
    else:
        converted = drawn.convert(mode)
    path = tmp_path / ("scan.jpg" if mode == "CMYK" else "scan.png")
    converted.save(path, **({"transparency": 255} if mode == "P" else {}))
    assert Image.open(path).mode == mode
    assert read_image(path).text == "Quarterly review notes"


def test_small_text_in_a_large_image_is_read_at_its_own_scale(tmp_path):
    from PIL import Image

    board = Image.new("RGB", (6000, 1200), "white")
    board.paste(Image.open(write_text_image(tmp_path / "a.png", ["Left corner: deploy on Friday"])), (0, 0))
    board.paste(Image.open(write_text_image(tmp_path / "b.png", ["Right edge: rotate the keys"])), (4950, 700))
    board.save(tmp_path / "board.png")
    assert read_image(tmp_path / "board.png").text.splitlines() == [
        "Left corner: deploy on Friday",
        "Right edge: rotate the keys",
    ]


def test_the_detector_neither_blows_up_a_small_image_nor_shrinks_a_tile(tmp_path):
    import numpy as np

    from crossmodalrag.connectors import images
    from crossmodalrag.connectors.tiles import TILE

    # rapidocr's default scaled a 320x80 strip to 2944x736 (ten times the work, the same words)
    detector = images._rapidocr()._load_det_model().get_preprocess()
    assert detector.resize(np.zeros((80, 320, 3), np.uint8)).shape[:2] == (64, 320)  # multiples of 32
    assert all(abs(side - TILE) <= 16 for side in detector.resize(np.zeros((TILE, TILE, 3), np.uint8)).shape[:2])
    strip = write_text_image(tmp_path / "strip.png", ["ticket ZX0042 parcel"], size=(480, 90))
    assert read_image(strip).text == "ticket ZX0042 parcel"


def test_isolated_small_labels_in_a_large_blank_image_are_each_read(tmp_path):
    from PIL import Image, ImageDraw, ImageFont

    # 2000 px tiles lost lines like these: the detector saw nothing on a mostly blank tile that size
    image = Image.new("RGB", (4200, 3000), "white")
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=22)
    labels = {(1000, 1000): "Status: compiling nebulizer module", (3500, 2700): "Corner label zucchini"}
    for spot, label in labels.items():
        draw.text(spot, label, fill="black", font=font)
    image.save(tmp_path / "screen.png")
    assert read_image(tmp_path / "screen.png").text.splitlines() == list(labels.values())


def test_blank_tiles_are_not_read():
    import numpy as np

    from crossmodalrag.connectors.tiles import SPARSE_TILE, TILE, tiled_lines

    pixels = np.full((3 * TILE, 3 * TILE, 3), 255, np.uint8)
    pixels[10:30, 10:200] = 0  # something in the first tile only
    read = []
    tiled_lines(pixels, lambda tile: read.append(tile.shape[:2]) or [])
    # the first tile, then (nothing found there) the one smaller tile of it that is not blank
    assert read == [(TILE, TILE), (SPARSE_TILE, SPARSE_TILE)]


def test_a_tile_with_many_lines_is_not_read_again_in_smaller_tiles():
    import numpy as np

    from crossmodalrag.connectors.tiles import SPARSE_LINES, TILE, tiled_lines

    pixels = np.zeros((TILE + 500, TILE, 3), np.uint8)
    pixels[::2] = 255  # no blank tile
    read = []
    lines = [(f"line {n}", 0.9, (40.0 * n, 10.0, 20.0, 300.0)) for n in range(SPARSE_LINES)]
    tiled_lines(pixels, lambda tile: read.append(tile.shape[:2]) or lines)
    assert read == [(TILE, TILE), (TILE, TILE)]  # a dense page is read in the big tiles alone


def test_a_broken_image_is_a_connector_error(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(ConnectorError, match="not a readable image"):
        read_image(path)


def test_a_fifo_named_png_fails_alone_instead_of_blocking_the_ingest(store, tmp_path):
    """Pillow opened it and waited for a writer forever."""
    import os

    write_text_image(tmp_path / "a.png", ["Ship it"], size=(140, 60))
    os.mkfifo(tmp_path / "capture.png")
    report = ingest_images(store, [tmp_path])
    assert report.added == 1
    assert report.failures == [
        f"{tmp_path / 'capture.png'}: not a regular file"
        " (hint: only regular files are read: remove it or move it out of the folder)"
    ]


def test_an_image_past_the_pixel_limit_is_one_error_and_the_rest_is_read(store, tmp_path, monkeypatch):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 20_000)  # Pillow warns past it, refuses past twice it
    Image.new("1", (160, 160), 1).save(tmp_path / "a_refused.png")  # 25,600 pixels: a warning
    Image.new("1", (400, 400), 1).save(tmp_path / "b_bomb.png")  # 160,000: an error
    write_text_image(tmp_path / "c_note.png", ["Ship it"], size=(140, 60))
    report = ingest_images(store, [tmp_path])
    assert report.added == 1 and len(report.failures) == 2
    assert [f.split(":")[0].rsplit("/", 1)[1] for f in report.failures] == ["a_refused.png", "b_bomb.png"]
    assert all("too large to read (over 0 million pixels)" in f for f in report.failures)


def test_an_image_without_text_registers_with_no_chunks(store, tmp_path):
    write_text_image(tmp_path / "pics" / "blank.png", [])
    write_text_image(tmp_path / "pics" / "notes.txt.png", ["Quarterly planning board"])
    (tmp_path / "pics" / "readme.txt").write_text("not an image")
    report = ingest_images(store, [tmp_path / "pics"])
    assert (report.added, report.failed) == (2, 0)
    counts = dict(
        store.conn.execute(
            "SELECT s.title, COUNT(c.id) FROM sources s LEFT JOIN chunks c ON c.source_id = s.id GROUP BY s.id"
        )
    )
    assert counts == {"blank": 0, "notes.txt": 1}
    assert ingest_images(store, [tmp_path / "pics"]).unchanged == 2


def test_an_unchanged_image_is_read_again_once_the_ocr_reader_changes(store, tmp_path, monkeypatch):
    """The file stamp named only the OCR engine's version: tiles and detector settings that read more
    never reached an image stored before them."""
    from crossmodalrag.connectors import images

    write_text_image(tmp_path / "pics" / "board.png", ["Quarterly planning board"], size=(600, 120))
    ingest_images(store, [tmp_path / "pics"])
    reads, read_image = [], images.read_image
    monkeypatch.setattr(images, "read_image", lambda path, **options: reads.append(path) or read_image(path, **options))
    assert ingest_images(store, [tmp_path / "pics"]).unchanged == 1 and reads == []
    monkeypatch.setattr(images, "READER_VERSION", "next")
    assert ingest_images(store, [tmp_path / "pics"]).unchanged == 1 and len(reads) == 1


def test_low_confidence_ocr_ranks_below_equal_clean_text():
    assert ocr_factor(None) == 1.0 and ocr_factor(1.0) == 1.0
    assert ocr_factor(0.6) == pytest.approx(0.8) and ocr_factor(0.0) == 0.5


def test_cli_ingests_images_and_filters_by_modality(capsys, tmp_path):
    write_text_image(tmp_path / "whiteboard.png", ["Next steps: migrate the billing service"])
    write_note(tmp_path / "vault", "billing.md", "# Billing\nThe billing service migration is planned.")
    assert main(["ingest-images", str(tmp_path / "whiteboard.png")]) == 0
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    capsys.readouterr()
    assert main(["ask", "billing service migration next steps", "--no-llm", "--json", "--modality", "image"]) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"]
    assert len(evidence) == 1 and evidence[0]["modality"] == "image" and evidence[0]["locator"] == "whiteboard.png"
    assert 0.8 < evidence[0]["ocr_confidence"] <= 1.0
    assert evidence[0]["components"]["ocr_factor"] == pytest.approx(0.5 + 0.5 * evidence[0]["ocr_confidence"], abs=1e-3)


def test_without_the_ocr_extra_the_error_names_the_install(capsys, tmp_path, monkeypatch):
    from importlib import metadata

    from crossmodalrag.connectors import images

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(images.package_metadata, "version", missing)
    assert main(["ingest-images", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: OCR support is not installed") and 'pip install -e ".[ocr]"' in err


def test_a_scanned_pdf_page_is_read_by_ocr_and_tagged(store, tmp_path):
    pytest.importorskip("pypdfium2")
    from PIL import Image

    from crossmodalrag.connectors.pdf import read_pdf

    scan = write_text_image(tmp_path / "scan.png", ["Invoice total: 420 euros", "Due in thirty days"])
    Image.open(scan).convert("RGB").save(tmp_path / "scanned.pdf")  # an image-only page, no text layer
    doc = read_pdf(tmp_path / "scanned.pdf")
    assert "Invoice total" in doc.text and "rapidocr" in doc.extractor
    assert 0.8 < doc.metadata["ocr_pages"]["1"] <= 1.0 and "notice" not in doc.metadata
    ingest_pdfs(store, [tmp_path / "scanned.pdf"])
    text, metadata = store.conn.execute("SELECT text, metadata FROM chunks").fetchone()
    assert text.startswith("scanned.pdf > p.1 (OCR)") and json.loads(metadata)["ocr_confidence"] > 0.8


def test_a_scan_with_a_stamped_text_layer_is_read_by_ocr_too_and_keeps_the_stamp(tmp_path, monkeypatch):
    pytest.importorskip("pypdfium2")
    from crossmodalrag.connectors import images
    from crossmodalrag.connectors.pdf import read_pdf

    scan = write_text_image(
        tmp_path / "scan.png", ["Lease for the flat", "The tenant keeps a porcupine"], size=(850, 1100)
    )
    write_image_page_pdf(tmp_path / "lease.pdf", scan, (0, 0, 612, 792), text="ACME-0001 Page 1 of 1")
    doc = read_pdf(tmp_path / "lease.pdf")
    assert doc.text.startswith("ACME-0001 Page 1 of 1\n") and "porcupine" in doc.text
    assert doc.text.count("ACME-0001") == 1  # OCR reads the stamp too: it is not repeated
    assert 0.8 < doc.metadata["ocr_pages"]["1"] <= 1.0
    monkeypatch.setattr(images, "ocr_available", lambda engine="rapidocr": False)
    assert "1 page(s) are scans" in read_pdf(tmp_path / "lease.pdf").metadata["notice"]


def test_a_page_with_a_little_text_and_a_logo_is_not_ocr_read(tmp_path, monkeypatch):
    pytest.importorskip("pypdfium2")
    from crossmodalrag.connectors import images
    from crossmodalrag.connectors.pdf import read_pdf

    logo = write_text_image(tmp_path / "logo.png", ["ACME"], size=(200, 100))
    write_image_page_pdf(tmp_path / "letter.pdf", logo, (40, 680, 120, 60), text="Thank you for your order")
    monkeypatch.setattr(images, "recognize", lambda pixels, engine: pytest.fail("a text page was rendered for OCR"))
    doc = read_pdf(tmp_path / "letter.pdf")
    assert doc.text.strip() == "Thank you for your order" and doc.metadata["ocr_pages"] == {}


def test_a_huge_blank_page_is_rendered_within_the_pixel_budget_and_needs_no_notice(tmp_path, monkeypatch):
    pypdfium2 = pytest.importorskip("pypdfium2")
    from PIL import Image

    from crossmodalrag.connectors import pdf

    Image.new("RGB", (100, 100), "white").save(tmp_path / "poster.pdf", resolution=1)  # 7200 points a side
    scales = []
    render = pypdfium2.PdfPage.render
    monkeypatch.setattr(
        pypdfium2.PdfPage, "render", lambda page, scale: scales.append(scale) or render(page, scale=scale)
    )
    monkeypatch.setattr(pdf, "MAX_RENDER_PIXELS", 1_000_000)
    doc = pdf.read_pdf(tmp_path / "poster.pdf")
    assert scales == [pytest.approx(1000 / 7200)] and doc.metadata["empty_pages"] == [1]
    assert "notice" not in doc.metadata  # OCR is installed and found nothing: no "install OCR" advice


def test_without_ocr_a_scanned_page_registers_empty_with_a_notice(store, tmp_path, monkeypatch):
    pytest.importorskip("pypdfium2")
    from PIL import Image

    from crossmodalrag.connectors import images

    scan = write_text_image(tmp_path / "scan.png", ["Invoice total: 420 euros"])
    Image.open(scan).convert("RGB").save(tmp_path / "scanned.pdf")
    monkeypatch.setattr(images, "ocr_available", lambda engine="rapidocr": False)
    report = ingest_pdfs(store, [tmp_path / "scanned.pdf"])
    assert report.added == 1 and report.chunks == 0
    assert report.notices and 'pip install -e ".[ocr]"' in report.notices[0]


def test_tesseract_is_an_alternative_engine(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pytesseract")
    from crossmodalrag.connectors import images

    if not images.ocr_available("tesseract"):
        pytest.skip("the tesseract program is not installed")
    path = write_text_image(tmp_path / "board.png", ["Next steps: ship the parser", "Then write the docs"])
    doc = read_image(path, engine="tesseract")
    assert doc.extractor.startswith("tesseract ") and doc.text.splitlines()[0] == "Next steps: ship the parser"
    assert 0.5 < doc.metadata["ocr_confidence"] <= 1.0
    monkeypatch.setenv("CMRAG_OCR_ENGINE", "tesseract")
    assert main(["ingest-images", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 1


def test_tesseract_reads_another_script_in_the_languages_its_setting_names(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pytesseract")
    from PIL import Image, ImageDraw, ImageFont

    from crossmodalrag.connectors import images

    if not images.ocr_available("tesseract:rus") or not Path(DEJAVU).exists():
        pytest.skip("tesseract's Russian data or the DejaVu font is not installed")
    bill = Image.new("RGB", (1000, 200), "white")
    font = ImageFont.truetype(DEJAVU, 34)  # the default Pillow font has no Cyrillic letters
    for row, text in enumerate(["Счёт за электричество: 3450 рублей", "Оплатить до пятницы"]):
        ImageDraw.Draw(bill).text((30, 30 + row * 60), text, fill="black", font=font)
    bill.save(tmp_path / "bill.png")
    english = read_image(tmp_path / "bill.png", engine="tesseract")
    russian = read_image(tmp_path / "bill.png", engine="tesseract:rus+eng")
    assert "электричество" not in english.text  # read as Latin look-alikes without the language
    assert russian.text.splitlines() == ["Счёт за электричество: 3450 рублей", "Оплатить до пятницы"]
    assert russian.extractor == english.extractor + " rus+eng"  # other languages read every image again
    monkeypatch.setenv("CMRAG_OCR_ENGINE", "tesseract:rus")
    assert main(["ingest-images", str(tmp_path / "bill.png")]) == 0
    capsys.readouterr()
    assert main(["ask", "электричество", "--no-llm", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["evidence"][0]["source_uri"].endswith("bill.png")


def test_a_tesseract_language_without_its_data_names_the_debian_pack(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pytesseract")
    from crossmodalrag.connectors import images

    if not images.ocr_available("tesseract"):
        pytest.skip("the tesseract program is not installed")
    path = write_text_image(tmp_path / "board.png", ["Next steps: ship the parser"])
    monkeypatch.setenv("CMRAG_OCR_ENGINE", "tesseract:eng+chi_sim_vert+xyz")
    assert main(["ingest-images", str(path)]) == 1
    err = capsys.readouterr().err
    assert "tesseract has no data for" in err and "xyz" in err
    assert "apt-get install" in err and "tesseract-ocr-xyz" in err and "Traceback" not in err


def test_a_scanned_pdf_page_without_the_named_languages_data_names_the_pack(store, tmp_path):
    pytest.importorskip("pypdfium2")
    pytest.importorskip("pytesseract")
    from PIL import Image

    from crossmodalrag.connectors import images

    if not images.ocr_available("tesseract"):
        pytest.skip("the tesseract program is not installed")
    scan = write_text_image(tmp_path / "scan.png", ["Invoice total: 420 euros"])
    Image.open(scan).convert("RGB").save(tmp_path / "scanned.pdf")
    report = ingest_pdfs(store, [tmp_path / "scanned.pdf"], ocr_engine="tesseract:xyz")
    assert report.added == 1 and report.chunks == 0
    assert "apt-get install tesseract-ocr-xyz reads them" in report.notices[0]


@pytest.mark.parametrize("value", ["rapidocr:eng", "tesseract:", "tesseract:rus;rm", "tesseract:rus eng", "paddle"])
def test_an_ocr_engine_setting_tesseract_could_not_take_is_refused(value, monkeypatch, capsys):
    monkeypatch.setenv("CMRAG_OCR_ENGINE", value)
    assert main(["stats"]) == 1
    assert "CMRAG_OCR_ENGINE" in capsys.readouterr().err


def test_a_missing_tesseract_program_names_the_apt_package(monkeypatch):
    pytest.importorskip("pytesseract")
    import pytesseract

    from crossmodalrag.connectors import images
    from crossmodalrag.errors import MissingExtraError

    def absent():
        raise pytesseract.TesseractNotFoundError()

    monkeypatch.setattr(pytesseract, "get_tesseract_version", absent)
    with pytest.raises(MissingExtraError) as info:
        images.extractor_version("tesseract")
    assert "apt-get install tesseract-ocr" in info.value.hint


def test_a_line_crossing_both_edges_of_a_tile_overlap_is_read_whole(tmp_path):
    from PIL import Image, ImageDraw, ImageFont

    # 3800 px wide: tiles at x=0 and x=1800; the line runs from 1100 to past 2000, whole in neither
    image = Image.new("RGB", (3800, 200), "white")
    line = "Meeting notes: Priya approved the aardvark migration budget for the Lisbon office on Tuesday"
    ImageDraw.Draw(image).text((1100, 80), line, fill="black", font=ImageFont.load_default(size=32))
    image.save(tmp_path / "screen.png")
    assert read_image(tmp_path / "screen.png").text == line


def _photo(path, original=None, offset=None, saved=None):
    from PIL import Image

    exif = Image.Exif()
    if saved:
        exif[0x0132] = saved
    if original:
        exif.get_ifd(0x8769)[0x9003] = original
    if offset:
        exif.get_ifd(0x8769)[0x9011] = offset
    Image.open(write_text_image(path.with_suffix(".png"), ["Whiteboard"], size=(300, 100))).save(path, exif=exif)
    return path


def test_a_photo_is_dated_by_when_it_was_taken_not_its_file_time(tmp_path, monkeypatch):
    import time
    from datetime import datetime

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        taken = _photo(tmp_path / "taken.jpg", original="2021:06:05 14:30:00", saved="2024:01:01 00:00:00")
        # 14:30 in New York in June (EDT) is 18:30 UTC: no offset stored, the machine's zone applies
        assert read_image(taken).timestamp == datetime.fromisoformat("2021-06-05T18:30:00+00:00").timestamp()
        zoned = _photo(tmp_path / "zoned.jpg", original="2021:06:05 14:30:00", offset="+02:00")
        assert read_image(zoned).timestamp == datetime.fromisoformat("2021-06-05T12:30:00+00:00").timestamp()
        saved = _photo(tmp_path / "saved.jpg", saved="2020:02:03 04:05:06")
        assert read_image(saved).timestamp == datetime.fromisoformat("2020-02-03T09:05:06+00:00").timestamp()
        blank = _photo(tmp_path / "blank.jpg", original="0000:00:00 00:00:00")
        assert read_image(blank).timestamp == blank.stat().st_mtime
    finally:
        monkeypatch.undo()
        time.tzset()


def test_heic_given_is_an_error_with_a_hint_and_in_a_folder_a_notice(store, tmp_path, monkeypatch):
    from crossmodalrag.connectors import images

    monkeypatch.setattr(images, "heic_readable", lambda: False)  # as without pillow-heif
    photo = tmp_path / "photos" / "IMG_0001.HEIC"
    write_text_image(tmp_path / "photos" / "board.png", ["Ship it"], size=(300, 100))
    photo.write_bytes(b"\x00\x00\x00\x18ftypheic")
    (tmp_path / "photos" / "IMG_0002.heif").write_bytes(b"\x00\x00\x00\x18ftypheic")
    with pytest.raises(ConnectorError, match="HEIC is not supported") as error:
        read_image(photo)
    assert error.value.hint == "convert it to JPEG or PNG"
    report = ingest_images(store, [photo.parent])
    assert report.added == 1 and not report.failures
    assert report.notices == [
        f"2 HEIC photos (e.g. {photo}) are not read: HEIC is not supported (hint: convert to JPEG or PNG)"
    ]
    assert "HEIC is not supported" in ingest_images(store, [photo]).failures[0]


def test_a_pdf_named_as_an_image_is_called_a_pdf_and_pointed_to_ingest_pdf(tmp_path):
    path = tmp_path / "scan.png"
    path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n")
    with pytest.raises(ConnectorError, match="a PDF, not an image") as info:
        read_image(path)
    assert "mem ingest-pdf" in info.value.hint


DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


@pytest.mark.skipif(not __import__("os").path.exists(DEJAVU), reason="needs a font with Cyrillic letters")
def test_a_line_in_a_script_the_ocr_does_not_read_is_weak_evidence_with_a_notice(tmp_path):
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (900, 120), "white")
    ImageDraw.Draw(image).text(
        (20, 40), "Счёт за электричество: 3450 рублей", fill="black", font=ImageFont.truetype(DEJAVU, 28)
    )
    image.save(tmp_path / "bill.png")
    doc = read_image(tmp_path / "bill.png")
    # the recogniser kept ": 3450" and was sure of it (0.90): the line's width says most is missing
    assert "3450" in doc.text and doc.metadata["ocr_confidence"] < 0.5
    assert "bill.png" in doc.metadata["notice"] and "1 line here looks read in part" in doc.metadata["notice"]


def test_a_line_filling_its_box_is_whole_and_a_short_or_upright_box_is_not_judged():
    from crossmodalrag.connectors.images import read_in_part

    assert not read_in_part(("Quarterly invoice number INV-77213", 0.99, (0, 0, 34, 518)))
    assert read_in_part((": 3450", 0.9, (0, 0, 46, 553)))
    assert not read_in_part(("try:", 0.9, (0, 0, 34, 67)))  # too short to estimate
    assert not read_in_part(("会议记录：星期二交付项目", 0.99, (0, 0, 40, 440)))  # square characters count double
    assert not read_in_part(("Rotated scan", 0.99, (0, 0, 717, 39)))
