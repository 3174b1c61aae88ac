#!/usr/bin/env python3
"""OCR: seconds per image and word recall, for both engines, on generated images and rendered
FinanceBench pages.

    python bench/ocr.py [--shared DIR] [--pages 5]

Word recall = fraction of the reference's words (lowercased \\w+, as a multiset) that the OCR output
contains. References: the text drawn into the sample's whiteboard and diagram images, and, for
FinanceBench, each page's own PDF text layer (the page is rendered at 2x and OCR'd as a picture).
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state

from crossmodalrag.connectors import images
from crossmodalrag.sample import assets

WORD = re.compile(r"\w+")
FINANCE_PAGES = [
    ("3M_2018_10K", 3),
    ("AMAZON_2017_10K", 20),
    ("COCACOLA_2017_10K", 50),
    ("BOEING_2018_10K", 10),
    ("ADOBE_2017_10K", 30),
    ("CORNING_2021_10K", 40),
]


def word_recall(reference: str, recognized: str) -> float:
    want, got = Counter(WORD.findall(reference.lower())), Counter(WORD.findall(recognized.lower()))
    total = sum(want.values())
    return sum(min(count, got[word]) for word, count in want.items()) / total if total else 1.0


def samples(folder: Path, shared: Path, pages: int) -> list[tuple[str, object, str]]:
    """(name, image path or pixel array, reference text)."""
    import numpy as np
    import pypdfium2

    made = assets.write_assets(folder)
    items = [
        ("sample whiteboard", made["whiteboard"], "\n".join(assets.WHITEBOARD_LINES)),
        ("sample diagram", made["diagram"], "Architecture " + " ".join(label for label, _ in assets.DIAGRAM_BOXES)),
    ]
    for doc_name, index in FINANCE_PAGES[:pages]:
        document = pypdfium2.PdfDocument(str(shared / "data" / "financebench" / "pdfs" / f"{doc_name}.pdf"))
        page = document[min(index, len(document) - 1)]
        reference = page.get_textpage().get_text_range()
        pixels = np.asarray(page.render(scale=2).to_pil().convert("RGB"))
        items.append((f"{doc_name} p.{index + 1}", pixels, reference))
    return items


def run(engine: str, items: list) -> dict:
    images.recognize(items[0][1], engine)  # load the engine outside the timings
    rows = []
    for name, source, reference in items:
        started = time.perf_counter()
        lines = images.recognize(source, engine)
        seconds = time.perf_counter() - started
        recognized = "\n".join(text for text, _, _ in lines)
        rows.append(
            {
                "image": name,
                "seconds": round(seconds, 3),
                "word_recall": round(word_recall(reference, recognized), 4),
                "mean_confidence": round(sum(s for _, s, _ in lines) / len(lines), 3) if lines else None,
            }
        )
        log(f"[{engine}] {name}: {rows[-1]}")
    sample_rows, finance_rows = rows[:2], rows[2:]
    mean = lambda values: round(sum(values) / len(values), 4) if values else None  # noqa: E731
    return {
        "engine": images.extractor_version(engine),
        "sample_images": {
            "seconds_per_image": mean([r["seconds"] for r in sample_rows]),
            "word_recall": mean([r["word_recall"] for r in sample_rows]),
        },
        "financebench_pages": {
            "seconds_per_page": mean([r["seconds"] for r in finance_rows]),
            "word_recall": mean([r["word_recall"] for r in finance_rows]),
        },
        "per_image": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--pages", type=int, default=5)
    args = parser.parse_args()
    clean_environment()
    with tempfile.TemporaryDirectory(prefix="bench-ocr-") as tmp:
        items = samples(Path(tmp), args.shared, args.pages)
        result = {"benchmark": "ocr", "machine": machine(), "source": source_state(), "engines": {}}
        for engine in images.ENGINES:
            if images.ocr_available(engine):
                result["engines"][engine] = run(engine, items)
            else:
                result["engines"][engine] = "not installed"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
