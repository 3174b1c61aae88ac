#!/usr/bin/env python3
"""Fit the cross-language cosine threshold of the abstention gate (retrieval/gate.py CROSS_LANGUAGE).

    python bench/calibrate_crosslang.py [--shared DIR] [--workdir DIR] [--keep 0.98]

(multilingual-e5-small installed as for `mem models install --offline`; about 5 minutes on 2 busy
cores, then instant: the vectors are cached in the workdir.)

A question asked in one language of a memory written in another shares (almost) no words with its
evidence, so only the cosine can judge it. XQuAD es and vi (/work/shared/data/multilingual) are the
same questions and paragraphs in two languages: the memory is every other paragraph (the even
positions, as bench/calibrate_gate.py stores them) in language B, the questions are in language A.
A question whose paragraph is stored is answerable; one whose paragraph is not (its article's other
paragraphs are: the hard case) is not. The feature is the best multilingual-e5-small cosine between
the question and any stored paragraph (what the gate reads: the best cosine among the hits).

Operating point, as for the other thresholds: the highest threshold (two decimals) that keeps at
least `--keep` of the answerable questions in each direction (es->vi, vi->es); then report how many
unanswerable questions it refuses, and how many whose article is absent from memory (off-topic). Also reports how often
retrieval/languages.py calls the pair different languages (cross) and, for the same-language pairs,
how often it wrongly does (where the threshold would apply to a same-language question). JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from benchlib import DEFAULT_SHARED, log, machine, source_state
from multilingual import load as load_multilingual

from crossmodalrag.config import Settings
from crossmodalrag.index.embed import embed_queries, load_embedder
from crossmodalrag.index.models import install_offline, resolve_model
from crossmodalrag.retrieval.gate import CROSS_LANGUAGE, MODEL_COSINES
from crossmodalrag.retrieval.languages import different_languages

MODEL = "multilingual-e5-small"
LANGS = ("es", "vi")


def embedder_for(workdir: Path):
    settings = Settings(db_path=workdir / "memory.db")
    settings.embed_model = MODEL
    spec = resolve_model(settings)
    if spec.path is None or not spec.path.exists():
        install_offline(settings)
    return load_embedder(settings)


def stored(corpus: list[dict]) -> list[dict]:
    """Every other paragraph (even positions): the memory."""
    return corpus[::2]


def features(embedder, workdir: Path, shared: Path) -> dict[str, dict]:
    """Per language: its stored paragraphs' vectors and ids, its questions' vectors, texts, gold ids."""
    found = {}
    for lang in LANGS:
        cache = workdir / f"{lang}.npz"
        corpus, queries, qrels = load_multilingual(shared / "data" / "multilingual" / lang)
        memory = stored(corpus)
        if cache.exists():
            saved = np.load(cache)
            passages, questions = saved["passages"], saved["questions"]
        else:
            log(f"embedding {len(memory)} {lang} paragraphs and {len(queries)} questions")
            passages = np.asarray(embedder.embed([d["text"].lstrip("\ufeff") for d in memory]))
            questions = np.asarray(embed_queries(embedder, [q["text"] for q in queries]))
            np.savez(cache, passages=passages, questions=questions)
        found[lang] = {
            "ids": [d["_id"] for d in memory],
            "texts": [d["text"].lstrip("\ufeff") for d in memory],
            "passages": passages,
            "questions": questions,
            "asked": [q["text"] for q in queries],
            "gold": [qrels.get(q["_id"], set()) for q in queries],
        }
    return found


def pairs(found: dict, asked_in: str, stored_in: str) -> dict:
    """Best cosine per question of `asked_in` over the memory in `stored_in`, split by answerability;
    and over the paragraphs of the other articles only (off-topic: the question's article is absent)."""
    questions, memory = found[asked_in], found[stored_in]
    cosines = questions["questions"] @ memory["passages"].T
    best = cosines.argmax(axis=1)
    articles = np.array([article(i) for i in memory["ids"]])
    answerable, unanswerable, off_topic, cross = [], [], [], 0
    for row, gold in enumerate(questions["gold"]):
        side = answerable if gold & set(memory["ids"]) else unanswerable
        side.append(float(cosines[row, best[row]]))
        elsewhere = articles != article(next(iter(gold)))
        off_topic.append(float(cosines[row, elsewhere].max()))
        cross += different_languages(questions["asked"][row], memory["texts"][best[row]])
    return {
        "answerable": answerable,
        "unanswerable": unanswerable,
        "off_topic": off_topic,
        "called_cross": cross / len(questions["gold"]),
    }


def article(paragraph_id: str) -> str:
    """The article of an XQuAD paragraph id (xq07p3 -> xq07)."""
    return paragraph_id.rsplit("p", 1)[0]


def fit(groups: dict[str, dict], keep: float) -> float:
    """The highest threshold (two decimals) that keeps `keep` of the answerable questions in every group."""
    candidates = [t / 100 for t in range(70, 100)]
    kept = [t for t in candidates if all(_share(g["answerable"], t) >= keep for g in groups.values())]
    return max(kept)


def _share(values: list[float], threshold: float) -> float:
    return sum(v >= threshold for v in values) / len(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (data/multilingual)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cmrag-crosslang"))
    parser.add_argument("--keep", type=float, default=0.98)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    found = features(embedder_for(args.workdir), args.workdir, args.shared)
    cross = {f"{a}->{b}": pairs(found, a, b) for a, b in (("es", "vi"), ("vi", "es"))}
    same = {f"{a}->{a}": pairs(found, a, a) for a in LANGS}
    threshold = fit(cross, args.keep)
    close = MODEL_COSINES[MODEL].close

    def summary(group: dict) -> dict:
        return {
            "answerable": len(group["answerable"]),
            "unanswerable": len(group["unanswerable"]),
            "kept_answerable": round(_share(group["answerable"], threshold), 3),
            "refused_unanswerable": round(1 - _share(group["unanswerable"], threshold), 3),
            "refused_off_topic": round(1 - _share(group["off_topic"], threshold), 3),
            "by_threshold": {
                f"{t:.2f}": [round(_share(group["answerable"], t), 3), round(1 - _share(group["off_topic"], t), 3)]
                for t in (0.76, 0.78, 0.80, 0.82, 0.84, 0.86)
            },
            "kept_answerable_at_close": round(_share(group["answerable"], close), 3),
            "called_cross_language": round(group["called_cross"], 3),
        }

    result = {
        "bench": "calibrate_crosslang",
        "model": MODEL,
        "keep": args.keep,
        "fitted_threshold": threshold,
        "by_threshold": "per group: threshold -> [kept answerable, refused off-topic]",
        "stored_threshold": CROSS_LANGUAGE.get(MODEL),
        "same_language_close": close,
        "cross_language": {name: summary(group) for name, group in cross.items()},
        "same_language": {name: summary(group) for name, group in same.items()},
        "machine": machine(),
        "source": source_state(),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
