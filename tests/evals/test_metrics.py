import math

import pytest

from crossmodalrag.evals.metrics import ndcg, score_ranking


def test_metrics_of_one_ranking():
    scores = score_ranking(["x", "g1", "x", "y", "g2"], {"g1", "g2", "g3"}, k=3)
    # duplicates collapse: the ranking is x, g1, y, g2
    assert scores["hit_rate"] == 1.0
    assert scores["recall"] == pytest.approx(1 / 3)
    assert scores["mrr"] == 0.5
    assert scores["ndcg"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3) + 0.5))


def test_nothing_found():
    assert score_ranking(["a", "b"], {"g"}, 5) == {"hit_rate": 0.0, "recall": 0.0, "mrr": 0.0, "ndcg": 0.0}


def test_perfect_ndcg_is_one():
    assert ndcg(["g1", "g2", "x"], {"g1", "g2"}, 5) == pytest.approx(1.0)
