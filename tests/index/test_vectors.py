"""Exact and approximate vector indexes: correctness vs brute force, caching, and usearch staying optional."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crossmodalrag.index.vectors import ApproximateIndex, ExactIndex, build_index, sidecar_path, usearch_available


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def clustered(rng: np.random.Generator, middles: np.ndarray, n: int, noise: float = 0.35) -> np.ndarray:
    """Unit vectors around gaussian centres: closer to real embeddings than uniform noise."""
    picks = middles[rng.integers(0, middles.shape[0], n)]
    vectors = picks + noise * rng.standard_normal(picks.shape).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def brute_force(keys: np.ndarray, vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    scores = vectors @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return keys[order], scores[order]


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    keys = rng.choice(10_000_000, size=3000, replace=False).astype(np.int64)  # non-contiguous, unsorted
    return keys, unit_rows(rng, 3000, 32)


# --- exact ---------------------------------------------------------------------------------------


def test_exact_top_k_matches_brute_force(data) -> None:
    keys, vectors = data
    index = ExactIndex(keys, vectors)
    for query in unit_rows(np.random.default_rng(1), 20, 32):
        found_keys, found_scores = index.search(query, 10)
        expected_keys, expected_scores = brute_force(keys, vectors, query, 10)
        assert found_keys.dtype == np.int64 and found_scores.dtype == np.float32
        np.testing.assert_array_equal(found_keys, expected_keys)
        np.testing.assert_allclose(found_scores, expected_scores, rtol=1e-5)
        assert np.all(np.diff(found_scores) <= 0)


def test_exact_k_larger_than_n_returns_everything_sorted() -> None:
    rng = np.random.default_rng(2)
    keys, vectors = np.array([40, 7, 99], dtype=np.int64), unit_rows(rng, 3, 8)
    found_keys, found_scores = ExactIndex(keys, vectors).search(vectors[1], 50)
    assert sorted(found_keys.tolist()) == [7, 40, 99]
    assert found_keys[0] == 7 and found_scores[0] == pytest.approx(1.0, abs=1e-6)
    assert np.all(np.diff(found_scores) <= 0)


def test_exact_empty_index_and_zero_k() -> None:
    empty = ExactIndex(np.empty(0, dtype=np.int64), np.empty((0, 16), dtype=np.float32))
    assert len(empty) == 0
    keys, scores = empty.search(np.ones(16, dtype=np.float32), 5)
    assert keys.shape == (0,) and scores.shape == (0,) and keys.dtype == np.int64
    assert [len(k) for k, _ in empty.search_batch(np.ones((3, 16), dtype=np.float32), 5)] == [0, 0, 0]
    assert np.isnan(empty.scores_for(np.ones(16), np.array([1, 2]))).all()
    index = ExactIndex(np.array([1]), np.ones((1, 16), dtype=np.float32))
    assert len(index.search(np.ones(16), 0)[0]) == 0
    unknown_width = ExactIndex(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
    assert unknown_width.search(np.ones(5), 3)[0].shape == (0,)


def test_exact_batch_equals_single(data, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, vectors = data
    index = ExactIndex(keys, vectors)
    queries = unit_rows(np.random.default_rng(3), 25, 32)
    monkeypatch.setattr("crossmodalrag.index.vectors.BATCH_SCORE_BUDGET", 3000 * 4)  # force several chunks
    batch = index.search_batch(queries, 7)
    assert len(batch) == 25
    for query, (batch_keys, batch_scores) in zip(queries, batch, strict=True):
        single_keys, single_scores = index.search(query, 7)
        np.testing.assert_array_equal(batch_keys, single_keys)
        np.testing.assert_allclose(batch_scores, single_scores, rtol=1e-5)


def test_exact_scores_for_given_keys_with_missing_as_nan(data) -> None:
    keys, vectors = data
    index = ExactIndex(keys, vectors)
    query = vectors[10]
    wanted = np.array([keys[10], -5, keys[2999], 10_000_001, keys[0]], dtype=np.int64)
    scores = index.scores_for(query, wanted)
    assert scores.dtype == np.float32
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert np.isnan(scores[1]) and np.isnan(scores[3])
    assert scores[2] == pytest.approx(float(vectors[2999] @ query), abs=1e-5)
    assert scores[4] == pytest.approx(float(vectors[0] @ query), abs=1e-5)


def test_exact_normalizes_rows_and_query_defensively() -> None:
    vectors = np.array([[3.0, 0.0], [0.0, 0.5], [1.0, 1.0]], dtype=np.float32)
    keys, scores = ExactIndex(np.array([1, 2, 3]), vectors).search(np.array([10.0, 0.0]), 3)
    assert keys.tolist() == [1, 3, 2]
    np.testing.assert_allclose(scores, [1.0, np.sqrt(0.5), 0.0], atol=1e-6)


def test_exact_rejects_bad_input(data) -> None:
    keys, vectors = data
    index = ExactIndex(keys, vectors)
    with pytest.raises(ValueError, match="dimension 31, the index has 32"):
        index.search(np.ones(31), 5)
    with pytest.raises(ValueError, match="k must be"):
        index.search(np.ones(32), -1)
    with pytest.raises(ValueError, match="shape"):
        ExactIndex(keys[:10], vectors)
    with pytest.raises(ValueError, match="unique"):
        ExactIndex(np.array([1, 1]), vectors[:2])
    with pytest.raises(ValueError, match="non-negative"):
        ExactIndex(np.array([1, -2]), vectors[:2])


def test_importing_the_module_does_not_need_usearch() -> None:
    code = "import sys, crossmodalrag.index.vectors; assert 'usearch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_build_index_without_usearch_falls_back_to_exact(data, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usearch", None)  # makes `import usearch...` raise ImportError
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    keys, vectors = data
    with pytest.warns(RuntimeWarning, match=r"crossmodalrag\[embeddings\]"):
        index = build_index(keys, vectors, approximate_from=1000, cache_path=Path("never.usearch"))
    assert isinstance(index, ExactIndex) and len(index) == 3000
    assert not Path("never.usearch").exists()


# --- approximate (usearch) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def clustered_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    keys = rng.choice(1 << 40, size=20_000, replace=False).astype(np.int64)
    middles = rng.standard_normal((200, 64)).astype(np.float32)
    vectors = clustered(rng, middles, 20_000)
    queries = clustered(np.random.default_rng(12), middles, 200)  # fresh points from the same topics
    return keys, vectors, queries


@pytest.fixture(scope="module")
def approximate(clustered_data) -> ApproximateIndex:
    if not usearch_available():
        pytest.skip("usearch is not installed")
    keys, vectors, _ = clustered_data
    return ApproximateIndex.build(keys, vectors)


def recall_at_10(index, exact: ExactIndex, queries: np.ndarray) -> float:
    hits = sum(len(set(index.search(q, 10)[0].tolist()) & set(exact.search(q, 10)[0].tolist())) for q in queries)
    return hits / (10 * len(queries))


def test_approximate_recall_at_10(clustered_data, approximate: ApproximateIndex) -> None:
    keys, vectors, queries = clustered_data
    exact = ExactIndex(keys, vectors)
    assert len(approximate) == 20_000
    assert recall_at_10(approximate, exact, queries) >= 0.95
    found_keys, found_scores = approximate.search(queries[0], 10)
    assert found_keys.dtype == np.int64 and found_scores.dtype == np.float32
    assert np.all(np.diff(found_scores) <= 1e-6)
    np.testing.assert_allclose(found_scores, exact.scores_for(queries[0], found_keys), atol=2e-3)  # f16 storage


def test_approximate_batch_and_edge_cases(clustered_data, approximate: ApproximateIndex) -> None:
    _, _, queries = clustered_data
    for query, (keys, _) in zip(queries[:5], approximate.search_batch(queries[:5], 10), strict=True):
        np.testing.assert_array_equal(keys, approximate.search(query, 10)[0])
    [(one_keys, _)] = approximate.search_batch(queries[:1], 10)
    np.testing.assert_array_equal(one_keys, approximate.search(queries[0], 10)[0])
    with pytest.raises(ValueError, match="dimension"):
        approximate.search(np.ones(63), 10)
    small = ApproximateIndex.build(np.array([5, 9]), unit_rows(np.random.default_rng(0), 2, 8), dtype="f32")
    assert sorted(small.search(np.ones(8), 100)[0].tolist()) == [5, 9]
    empty = ApproximateIndex.build(np.empty(0, dtype=np.int64), np.empty((0, 8), dtype=np.float32))
    assert len(empty) == 0 and empty.search(np.ones(8), 3)[0].shape == (0,)
    with pytest.raises(ValueError, match="dtype"):
        ApproximateIndex.build(np.array([1]), np.ones((1, 8)), dtype="f64")


def test_save_load_round_trip(tmp_path: Path, clustered_data, approximate: ApproximateIndex) -> None:
    _, _, queries = clustered_data
    path = tmp_path / "cache" / "vectors.usearch"
    approximate.save(path, stamp="v1")
    assert path.exists() and sidecar_path(path).exists()
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    for view in (True, False):
        loaded = ApproximateIndex.load(path, "v1", view=view)
        assert loaded is not None and len(loaded) == 20_000 and loaded.dtype == "f16"
        for query in queries[:20]:
            np.testing.assert_array_equal(loaded.search(query, 10)[0], approximate.search(query, 10)[0])


def test_load_returns_none_when_stale_missing_or_corrupt(tmp_path: Path) -> None:
    if not usearch_available():
        pytest.skip("usearch is not installed")
    rng = np.random.default_rng(4)
    path = tmp_path / "vectors.usearch"
    ApproximateIndex.build(np.arange(500), unit_rows(rng, 500, 16)).save(path, stamp="v1")
    assert ApproximateIndex.load(path, "v1") is not None
    assert ApproximateIndex.load(path, "v2") is None
    assert ApproximateIndex.load(tmp_path / "absent.usearch", "v1") is None
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 2])  # truncated
    assert ApproximateIndex.load(path, "v1") is None
    path.write_bytes(bytes(len(original)))  # same size, garbage header
    assert ApproximateIndex.load(path, "v1") is None
    path.write_bytes(original)
    sidecar_path(path).write_text("{not json", encoding="utf-8")
    assert ApproximateIndex.load(path, "v1") is None
    sidecar_path(path).unlink()
    assert ApproximateIndex.load(path, "v1") is None


def test_build_index_switches_at_threshold_and_reuses_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not usearch_available():
        pytest.skip("usearch is not installed")
    rng = np.random.default_rng(5)
    keys, vectors = np.arange(10, 1210, dtype=np.int64) * 3, unit_rows(rng, 1200, 16)
    cache = tmp_path / "vectors.usearch"
    assert isinstance(build_index(keys, vectors, approximate_from=1201, cache_path=cache), ExactIndex)
    assert not cache.exists()
    first = build_index(keys, vectors, approximate_from=1200, cache_path=cache, stamp="s1")
    assert isinstance(first, ApproximateIndex) and cache.exists()

    def no_rebuild(*args, **kwargs):
        raise AssertionError("rebuilt although the cache was fresh")

    with monkeypatch.context() as patched:
        patched.setattr(ApproximateIndex, "build", classmethod(no_rebuild))
        second = build_index(keys, vectors, approximate_from=1200, cache_path=cache, stamp="s1")
    assert isinstance(second, ApproximateIndex)
    np.testing.assert_array_equal(second.search(vectors[3], 5)[0], first.search(vectors[3], 5)[0])
    assert second.search(vectors[3], 1)[0].tolist() == [keys[3]]

    third = build_index(keys[:-1], vectors[:-1], approximate_from=1000, cache_path=cache, stamp="s2")
    assert len(third) == 1199  # stale stamp: rebuilt and re-saved
    assert ApproximateIndex.load(cache, "s1") is None and ApproximateIndex.load(cache, "s2") is not None
    fourth = build_index(keys[:-1], vectors[:-1], approximate_from=1000, cache_path=cache, stamp="s2", dtype="f32")
    assert isinstance(fourth, ApproximateIndex) and fourth.dtype == "f32"  # another dtype is not a cache hit
