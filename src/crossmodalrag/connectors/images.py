"""Images and diagrams: text by OCR (rapidocr on onnxruntime; its PP-OCR models ship in the wheel).

One source per image; the recognized lines, in reading order (top to bottom, left to right), are
its text. Each line's recognition confidence is kept; the source's mean confidence travels with
its chunks, so weak OCR can rank below clean text. An image with no text registers with no chunks.
"""

from __future__ import annotations

import logging
import warnings
from datetime import datetime
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Iterator

from crossmodalrag.connectors.files import check_regular, find_files
from crossmodalrag.connectors.svg import read_svg
from crossmodalrag.connectors.tiles import TILE, Line, tiled_lines
from crossmodalrag.errors import ConnectorError, MissingExtraError
from crossmodalrag.types import Document

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".svg")
INSTALL_HINT = 'pip install -e ".[ocr]"'
_ENGINE = None
# rapidocr's detector by default scales an image until its SHORT side is 736 px: a 320x80 strip was
# blown up to 2944x736 and cost 2 CPU-s instead of 0.2, reading the same words. "max" only ever
# shrinks, and never a tile (TILE is its limit), so text is detected at the size it was drawn.
DETECTOR_PARAMS = {"Det.limit_type": "max", "Det.limit_side_len": TILE}


HEIC_SUFFIXES = (".heic", ".heif")  # an iPhone's photos: Pillow reads them only with pillow-heif


def find_images(path: Path, unsupported: list[Path] | None = None) -> Iterator[Path]:
    """The image itself, or every image under a folder (other files ignored; HEIC photos, unless
    pillow-heif is installed, appended to `unsupported`, so the ingest can say it left them)."""
    if path.is_file() or heic_readable():
        yield from find_files(path, IMAGE_SUFFIXES + HEIC_SUFFIXES)
        return
    for found in find_files(path, IMAGE_SUFFIXES + HEIC_SUFFIXES):
        if found.suffix.lower() in HEIC_SUFFIXES:
            if unsupported is not None:
                unsupported.append(found)
        else:
            yield found


def heic_readable() -> bool:
    """Whether Pillow reads HEIC here: pillow-heif, if it happens to be installed, teaches it."""
    try:
        from pillow_heif import register_heif_opener
    except ImportError:
        return False
    register_heif_opener()
    return True


def heic_notice(unsupported: list[Path]) -> str:
    example = unsupported[0]
    what = f"{example} is" if len(unsupported) == 1 else f"{len(unsupported)} HEIC photos (e.g. {example}) are"
    return f"{what} not read: HEIC is not supported (hint: convert to JPEG or PNG)"


# Part of every image's and PDF's file stamp (ingest.files._file_extractor): an unchanged file is not read
# again, so bump this whenever OCR would read the same bytes otherwise. 2: the detector only shrinks,
# 2000 px tiles with sparse ones re-read at 1000 px, lines read in part.
READER_VERSION = "2"
TESSERACT_HINT = 'pip install -e ".[tesseract]" and apt-get install tesseract-ocr'


def engine_parts(engine: str) -> tuple[str, str]:
    """The engine's name and, for tesseract, the languages its setting names ("tesseract:rus+eng"),
    "" when it names none (tesseract then reads with its default, English)."""
    name, _, languages = engine.partition(":")
    return name, languages


def extractor_version(engine: str = "rapidocr") -> str:
    """The OCR engine and version, folded into the fingerprint (with tesseract's languages, so
    naming others reads every image again). Raises MissingExtraError."""
    name, languages = engine_parts(engine)
    if name == "tesseract":
        try:
            import pytesseract

            version = f"tesseract {pytesseract.get_tesseract_version()}"
        except ImportError as exc:
            raise MissingExtraError("the tesseract OCR engine is not installed", TESSERACT_HINT) from exc
        except pytesseract.TesseractNotFoundError as exc:
            raise MissingExtraError("the tesseract program is not installed", "apt-get install tesseract-ocr") from exc
        if not languages:
            return version
        _check_languages(languages, pytesseract.get_languages(config=""))
        return f"{version} {languages}"
    try:
        return f"rapidocr {package_metadata.version('rapidocr')}"
    except package_metadata.PackageNotFoundError as exc:
        raise MissingExtraError("OCR support is not installed", INSTALL_HINT) from exc


def _check_languages(languages: str, installed: list[str]) -> None:
    """Tesseract told a language it has no data for fails on every image; say so once, up front."""
    missing = [language for language in languages.split("+") if language not in installed]
    if missing:
        packs = " ".join(f"tesseract-ocr-{language.lower().replace('_', '-')}" for language in missing)
        raise MissingExtraError(
            f"tesseract has no data for {', '.join(missing)} (it has {', '.join(sorted(installed)) or 'none'})",
            f"apt-get install {packs}",
        )


def ocr_available(engine: str = "rapidocr") -> bool:
    try:
        extractor_version(engine)
    except MissingExtraError:
        return False
    return True


def _rapidocr():
    """One rapidocr engine per process (loading its three models takes about a second)."""
    global _ENGINE
    if _ENGINE is None:
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise MissingExtraError("OCR support is not installed", INSTALL_HINT) from exc
        # It logs every model file at INFO and every blank image at WARNING; we report in one line.
        # A filter, not a level: RapidOCR() resets its logger's level to INFO while it starts.
        logging.getLogger("RapidOCR").addFilter(lambda record: record.levelno >= logging.ERROR)
        _ENGINE = RapidOCR(params=DETECTOR_PARAMS)
    return _ENGINE


def _rapidocr_lines(source) -> list[Line]:
    if not isinstance(source, Path) and max(source.shape[:2]) > TILE:
        return tiled_lines(source, _rapidocr_lines)
    output = _rapidocr()(str(source) if isinstance(source, Path) else source)
    if output is None or not getattr(output, "txts", None):
        return []
    lines = []
    for text, score, box in zip(output.txts, output.scores, output.boxes, strict=True):
        ys, xs = [point[1] for point in box], [point[0] for point in box]
        lines.append((str(text), float(score), (min(ys), min(xs), max(ys) - min(ys), max(xs))))
    return lines


def image_pixels(path: Path):
    """The first frame of an image as 8-bit RGB pixels, upright, however it is stored: CMYK, 16-bit
    grey, a palette, transparency (on white, as a viewer shows it). Given the path, rapidocr's OpenCV
    reading saw no text in any of those."""
    import numpy as np
    from PIL import Image, ImageOps

    with Image.open(path) as image:
        image.seek(0)
        image = ImageOps.exif_transpose(image)  # a photo taken sideways
        if image.mode.startswith("I"):  # 16- or 32-bit grey: scaled down to 8 bits
            grey = np.asarray(image, dtype=np.float64)
            image = Image.fromarray((grey * (255 / max(grey.max(), 255))).astype(np.uint8), "L")
        if image.mode in ("RGBA", "LA", "PA", "P") or "transparency" in image.info:
            image = Image.alpha_composite(Image.new("RGBA", image.size, "white"), image.convert("RGBA"))
        return np.asarray(image.convert("RGB"))


def _is_pdf(path: Path) -> bool:
    """Whether the file starts as a PDF does (a PDF renamed .png is read as what it is)."""
    try:
        with path.open("rb") as file:
            return file.read(5) == b"%PDF-"
    except OSError:
        return False


EXIF_IFD, DATE_TIME, DATE_TIME_ORIGINAL, OFFSET_TIME_ORIGINAL = 0x8769, 0x0132, 0x9003, 0x9011


def taken_at(path: Path) -> float | None:
    """When a photo was taken, from its EXIF DateTimeOriginal (else DateTime, when it was last
    saved): a camera writes the local time without a zone, so it is read as this machine's local
    time unless OffsetTimeOriginal gives the offset. None without a usable date."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            exif = image.getexif()
            original = exif.get_ifd(EXIF_IFD)
    except Exception:  # noqa: BLE001 - a broken EXIF block only loses the date
        return None
    when, offset = original.get(DATE_TIME_ORIGINAL), original.get(OFFSET_TIME_ORIGINAL)
    if not when:
        when, offset = exif.get(DATE_TIME), None
    try:
        moment = datetime.strptime(str(when).strip("\x00 "), "%Y:%m:%d %H:%M:%S")
        if offset:
            moment = moment.replace(tzinfo=datetime.strptime(str(offset).strip("\x00 "), "%z").tzinfo)
        return moment.timestamp()  # naive: local time
    except (ValueError, OverflowError, OSError):  # absent, "0000:00:00 00:00:00", a bad offset
        return None


def _tesseract_lines(source, languages: str = "") -> list[Line]:
    """Words grouped back into tesseract's own lines; confidence is the words' mean (0-1).
    `languages` as tesseract's -l takes them ("rus+eng"); "" for its default."""
    import pytesseract
    from PIL import Image

    image = Image.open(source) if isinstance(source, Path) else Image.fromarray(source)
    data = pytesseract.image_to_data(image, lang=languages or None, output_type=pytesseract.Output.DICT)
    grouped: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if word.strip() and float(data["conf"][i]) >= 0:
            grouped.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]), []).append(i)
    lines = []
    for members in grouped.values():
        text = " ".join(data["text"][i] for i in members)
        confidence = sum(float(data["conf"][i]) for i in members) / len(members) / 100
        top, left = min(data["top"][i] for i in members), min(data["left"][i] for i in members)
        right = max(data["left"][i] + data["width"][i] for i in members)
        lines.append((text, confidence, (top, left, max(data["height"][i] for i in members), right)))
    return lines


def recognize(source, engine: str = "rapidocr") -> list[tuple[str, float, tuple[float, float]]]:
    """(text, confidence, (top, left)) per recognized line of an image file or pixel array,
    in reading order."""
    return [(text, score, (box[0], box[1])) for text, score, box in recognized_lines(source, engine)]


def recognized_lines(source, engine: str = "rapidocr") -> list[Line]:
    """The recognized lines with their boxes, in reading order; with rapidocr, a line read in part
    has its confidence cut."""
    name, languages = engine_parts(engine)
    lines = _tesseract_lines(source, languages) if name == "tesseract" else _rapidocr_lines(source)
    if not lines:
        return []
    if name != "tesseract":
        lines = [_discounted(line) if read_in_part(line) else line for line in lines]
    # Rows first (lines whose tops are within ~half a line height share a row), then left to right.
    height = max(1.0, sum(box[2] for _, _, box in lines) / len(lines))
    return sorted(lines, key=lambda line: (round(line[2][0] / (height / 2)), line[2][1]))


# rapidocr's recogniser knows Chinese and Latin letters only: it skips what else it sees and is sure
# of the rest ("Счёт за электричество: 3450 рублей" came out ": 3450" at 0.90). The detector boxes
# the whole line, so the text's width against the box's tells: characters x box height / box width
# was 1.8-2.5 for Latin lines read whole (code, invoices, accents, diagrams), 0.4 for that Russian
# line, 1.2 for Greek and 1.4 for Vietnamese read without their hooked letters.
FULL_DENSITY = 1.8  # at or above: read whole
PARTIAL_DENSITY = 1.5  # below: a line read in part
CHECKED_SHAPE = 6  # box width / height from which the estimate holds (the box's margins widen a short
# label's: "Ship it" came out at 1.4)


def _density(text: str, box) -> float:
    """Characters per line height of the box's width (a Chinese character counts as two, being
    square), or FULL_DENSITY for a box too short or upright to judge."""
    _, left, tall, right = box
    if tall <= 0 or right - left < CHECKED_SHAPE * tall:
        return FULL_DENSITY
    characters = sum(
        2 if "\u2e80" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af" else 1 for char in text if not char.isspace()
    )
    return characters * tall / (right - left)


def _discounted(line: Line) -> Line:
    """Weak evidence: the confidence times the share of the box the text fills."""
    text, score, box = line
    return text, float(score * _density(text, box) / FULL_DENSITY), box


def read_in_part(line: Line) -> bool:
    text, _, box = line
    return _density(text, box) < PARTIAL_DENSITY


def partial_notice(path: Path, partial: int) -> str:
    what = "1 line here looks" if partial == 1 else f"{partial} lines here look"
    return (
        f"{path}: the bundled OCR reads Latin and Chinese script; {what} read in part "
        "(hint: see the README on OCR for other scripts)"
    )


def read_image(path: Path, engine: str = "rapidocr") -> Document:
    """OCR one image (an SVG's text is read instead). Raises ConnectorError for a file that is not
    a readable image."""
    version = extractor_version(engine)
    check_regular(path)  # Pillow would wait forever on a FIFO
    if path.suffix.lower() == ".svg":
        return read_svg(path, version)
    if path.suffix.lower() in HEIC_SUFFIXES and not heic_readable():
        raise ConnectorError(f"{path}: HEIC is not supported", "convert it to JPEG or PNG")
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            # Past Pillow's pixel limit (~89 million) it warns, past twice that it refuses: either is
            # an image no OCR reads in reasonable time or memory (a 30000 px square took them all).
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                image.verify()
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise ConnectorError(
            f"{path}: too large to read (over {Image.MAX_IMAGE_PIXELS / 1e6:.0f} million pixels)",
            "shrink the image or cut it into parts",
        ) from exc
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
        if _is_pdf(path):
            raise ConnectorError(f"{path}: a PDF, not an image", f"read it with mem ingest-pdf {path}") from exc
        raise ConnectorError(f"{path}: not a readable image ({exc})", "check or re-export the file") from exc
    try:
        lines = recognized_lines(image_pixels(path), engine)
    except Exception as exc:  # noqa: BLE001 - the OCR runtime raises assorted errors on odd images
        raise ConnectorError(f"{path}: OCR failed ({exc})", "re-export the image as PNG") from exc
    confidence = sum(score for _, score, _ in lines) / len(lines) if lines else None
    partial = sum(read_in_part(line) for line in lines) if engine_parts(engine)[0] != "tesseract" else 0
    return Document(
        uri=str(path),
        source_type="image",
        title=path.stem,
        text="\n".join(text for text, _, _ in lines),
        format="ocr",
        modality="image",
        timestamp=taken_at(path) or path.stat().st_mtime,
        locator=path.name,
        extractor=version,
        metadata={
            "path": str(path),
            "ocr_engine": version,
            "ocr_confidence": confidence,
            "lines": len(lines),
            **({"notice": partial_notice(path, partial)} if partial else {}),
        },
    )
