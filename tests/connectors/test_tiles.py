"""Joining the fragments of a line that tiles' edges cut (boxes as a 4K screenshot's tiles gave them)."""

from __future__ import annotations

from crossmodalrag.connectors.tiles import joined_fragments, tile_starts


def fragment(text, left, right, top=894.0, score=0.99):
    return (text, score, (top, left, 50.0, right))


def texts(fragments):
    return [text for text, _, _ in joined_fragments(fragments)]


def test_fragments_cut_by_both_edges_of_the_overlap_join_on_a_word_both_read():
    assert texts(
        [
            fragment("Meeting notes: Priya approved the aardvark migration b", 1092, 1999),
            fragment("migration budget for the Lisbon office on Tuesday", 1800, 2618),
            fragment("igration budget for the Lisbon office on Tuesday", 1840, 2577),
        ]
    ) == ["Meeting notes: Priya approved the aardvark migration budget for the Lisbon office on Tuesday"]


def test_without_a_word_both_read_the_overlap_is_split_at_its_middle_and_the_cut_word_kept_once():
    assert texts(
        [
            fragment("Action item: Marcus will rotate the staging certificates b", 1092, 1999),
            fragment("tificates before the quarterly audit begins", 1840, 2516),
        ]
    ) == ["Action item: Marcus will rotate the staging certificates before the quarterly audit begins"]


def test_a_garbled_reading_of_the_overlap_loses_to_one_that_lines_up():
    assert texts(
        [
            fragment("Reminder: the vendor contract with Halvorsen Logistics", 1093, 1996),
            fragment("eucs o s ae  ss sosc ber", 1800, 2528, score=0.64),
            fragment("Logistics expires at the end of September", 1840, 2529),
        ]
    ) == ["Reminder: the vendor contract with Halvorsen Logistics expires at the end of September"]


def test_a_line_inside_the_overlap_is_kept_once_and_lines_apart_stay_apart():
    assert texts(
        [
            fragment("Deploy on Friday", 1850, 2100),
            fragment("Deploy on Friday", 1850, 2101, top=896.0),
            fragment("Rotate the keys", 2400, 2650),
            fragment("Deploy on Friday", 1850, 2100, top=1200.0),
        ]
    ) == ["Deploy on Friday", "Deploy on Friday", "Rotate the keys"]  # in order of left edge


def test_tiles_cover_the_image_with_the_last_flush_to_its_edge():
    assert tile_starts(1500) == [0] and tile_starts(3840) == [0, 1800, 1840] and tile_starts(3800) == [0, 1800]
