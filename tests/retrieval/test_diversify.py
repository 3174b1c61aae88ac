from crossmodalrag.retrieval.diversify import cap_per_source, drop_near_duplicates, jaccard, word_set


def test_cap_keeps_rank_order_and_limit_per_source():
    ranked = [("a", 1), ("a", 2), ("b", 3), ("a", 4), ("b", 5), ("b", 6)]
    assert cap_per_source(ranked, lambda x: x[0], 2) == [("a", 1), ("a", 2), ("b", 3), ("b", 5)]
    assert cap_per_source(ranked, lambda x: x[0], 0) == ranked


def test_near_duplicates_keep_the_better_ranked_copy():
    ranked = ["the quick brown fox", "The quick brown fox!", "a different sentence entirely"]
    assert drop_near_duplicates(ranked, str, 0.95) == ["the quick brown fox", "a different sentence entirely"]
    assert drop_near_duplicates(ranked, str, 0) == ranked


def test_near_duplicate_threshold_is_jaccard_on_word_sets():
    a, b = word_set("one two three four"), word_set("one two three five")
    assert jaccard(a, b) == 3 / 5
    assert drop_near_duplicates(["one two three four", "one two three five"], str, 0.6) == ["one two three four"]
    assert len(drop_near_duplicates(["one two three four", "one two three five"], str, 0.61)) == 2


def test_limit_stops_early():
    assert drop_near_duplicates(["a", "b", "c", "d"], str, 0.95, limit=2) == ["a", "b"]
