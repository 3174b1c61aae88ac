"""A large image read in overlapping tiles, and the lines the tiles' edges cut put back together.

rapidocr shrinks a larger image whole to about TILE pixels a side, and its small text past reading
(a 5K screenshot's menus, a poster's captions): such an image is read in tiles of this size instead,
at its own scale. A tile where the detector found little is read again in smaller tiles: on a blank
2000x2000 tile it found no lone 22 px label (anywhere on it) that it read on a 1000 px one, while
dense tiles (a scanned page, a slide) read as well or better whole, and cheaper. A blank tile is
not read at all. A line crossing a tile's edge comes out of each tile as a fragment; a line crossing
both edges of the overlap is whole in no tile, so the fragments of one row are joined by their boxes.
"""

from __future__ import annotations

from typing import Callable

Line = tuple[str, float, tuple[float, float, float, float]]  # text, confidence, (top, left, height, right)
Word = tuple[str, float, float]  # text, left, right (estimated from the line's box)
TILE = 2000
OVERLAP = 200  # the same words seen by both neighbours: where their fragments are lined up
# A tile that gave fewer lines than this is read again in SPARSE_TILE tiles, kept if they find more.
# Their overlap is wider: a 90 px title's word is 350 px wide, and at 200 on 1000 px tiles none was
# whole in both ("Pelican" came out "Pelic elican").
SPARSE_LINES = 6
SPARSE_TILE, SPARSE_OVERLAP = 1000, 400
BLANK_SPREAD = 16  # grey levels: text is drawn in more contrast than that


def tiled_lines(pixels, read_tile: Callable[[object], list[Line]]) -> list[Line]:
    """The lines of a pixel array read tile by tile, each line whole and once."""
    return joined_fragments(_tiles_read(pixels, read_tile, TILE, OVERLAP))


def _tiles_read(pixels, read_tile: Callable[[object], list[Line]], size: int, overlap: int) -> list[Line]:
    """The fragments of every tile of `size`, in the array's coordinates."""
    fragments: list[Line] = []
    height, width = pixels.shape[:2]
    for top in tile_starts(height, size, overlap):
        for left in tile_starts(width, size, overlap):
            tile = pixels[top : top + size, left : left + size]
            for text, score, (y, x, tall, right) in _tile_lines(tile, read_tile, size):
                fragments.append((text, score, (y + top, x + left, tall, right + left)))
    return fragments


def _tile_lines(tile, read_tile: Callable[[object], list[Line]], size: int) -> list[Line]:
    """One tile's lines; a sparse one's from smaller tiles when they find more."""
    if is_blank(tile):
        return []
    lines = read_tile(tile)
    if len(lines) >= SPARSE_LINES or size <= SPARSE_TILE or max(tile.shape[:2]) <= SPARSE_TILE:
        return lines
    closer = _tiles_read(tile, read_tile, SPARSE_TILE, SPARSE_OVERLAP)
    return closer if len(joined_fragments(list(closer))) > len(lines) else lines


def is_blank(tile) -> bool:
    """One flat colour (give or take a JPEG's noise): no text to find, and a detector pass saved."""
    return int(tile.max()) - int(tile.min()) < BLANK_SPREAD


def tile_starts(size: int, tile: int = TILE, overlap: int = OVERLAP) -> list[int]:
    starts = list(range(0, max(size - tile, 0) + 1, tile - overlap))
    return starts if starts[-1] + tile >= size else [*starts, size - tile]


def joined_fragments(fragments: list[Line]) -> list[Line]:
    """Each row's fragments grown into whole lines from the leftmost; a fragment inside a line's span
    (another tile's reading of the same words) is dropped."""
    remaining = sorted(fragments, key=lambda line: (line[2][1], -line[1]))  # leftmost, then surest
    lines = []
    while remaining:
        line = _grown(remaining.pop(0), remaining)
        lines.append(line)
        remaining = [other for other in remaining if not (_same_row(line, other) and _inside(other, line))]
    return lines


def _grown(line: Line, others: list[Line]) -> Line:
    """The line extended rightwards, one fragment at a time, by the fragments of its row that start
    within (or just past) its end and reach further; the one whose words line up with it is trusted
    first, then the surest reading."""
    while True:
        tall, end = line[2][2], line[2][3]
        further = [
            other
            for other in others
            if _same_row(line, other) and other[2][1] <= end + tall and other[2][3] > end + tall / 2
        ]
        if not further:
            return line
        joins = [(*_joined(line, other), other[1]) for other in further]
        line = max(joins, key=lambda join: (join[1], join[2]))[0]


def _same_row(line: Line, other: Line) -> bool:
    (top, _, tall, _), (top2, _, tall2, _) = line[2], other[2]
    return abs(top - top2) < max(tall, tall2) / 2


def _inside(line: Line, other: Line) -> bool:
    """Does the line's span lie within the other's (give or take a line height)?"""
    (_, left, tall, right), (_, left2, _, right2) = line[2], other[2]
    return left >= left2 - tall and right <= right2 + tall


def _joined(left: Line, right: Line) -> tuple[Line, bool]:
    """Two fragments of one row as one line, and whether a word both read in their overlap lined
    them up (else the overlap is split at its middle, each side's words kept on its own half)."""
    words, lined_up = _aligned_words(_placed_words(left), _placed_words(right), max(left[2][2], right[2][2]))
    if not lined_up:
        words = _split_at_middle(_placed_words(left), _placed_words(right), (right[2][1] + left[2][3]) / 2)
    text = " ".join(word for word, _, _ in words)
    (top, start, tall, end), (top2, _, tall2, end2) = left[2], right[2]
    score = (left[1] * len(left[0]) + right[1] * len(right[0])) / max(len(left[0]) + len(right[0]), 1)
    bottom = max(top + tall, top2 + tall2)
    return (text, score, (min(top, top2), start, bottom - min(top, top2), max(end, end2))), lined_up


def _placed_words(line: Line) -> list[Word]:
    """The line's words with their spans, the box's width shared out evenly among its characters."""
    text, _, (_, left, _, right) = line
    step = (right - left) / max(len(text), 1)
    words, position = [], 0
    for word in text.split(" "):
        if word:
            words.append((word, left + position * step, left + (position + len(word)) * step))
        position += len(word) + 1
    return words


def _aligned_words(left: list[Word], right: list[Word], tolerance: float) -> tuple[list[Word], bool]:
    """The left fragment's words up to the longest run both fragments read at the same place, then
    the right fragment's from it (the edge-cut word before or after the run is dropped)."""
    best = (0, 0, 0)
    for i, (word, start, _) in enumerate(left):
        for j, (word2, start2, _) in enumerate(right):
            if word == word2 and abs(start - start2) < tolerance:
                run = 0
                while i + run < len(left) and j + run < len(right) and left[i + run][0] == right[j + run][0]:
                    run += 1
                best = max(best, (run, i, j))
    run, i, j = best
    return (left[:i] + right[j:], True) if run else ([], False)


def _split_at_middle(left: list[Word], right: list[Word], middle: float) -> list[Word]:
    kept, rest = [w for w in left if (w[1] + w[2]) / 2 < middle], [w for w in right if (w[1] + w[2]) / 2 >= middle]
    if kept and rest and _one_word_twice(kept[-1], rest[0]):
        # the two halves' readings of a word straddling the middle, one of them cut by a tile's edge
        longer = max(kept[-1], rest[0], key=lambda word: len(word[0]))
        return [*kept[:-1], longer, *rest[1:]]
    return kept + rest


def _one_word_twice(word: Word, word2: Word) -> bool:
    overlapping = word[1] < word2[2] and word2[1] < word[2]
    return overlapping and (word2[0].startswith(word[0]) or word[0].endswith(word2[0]))
