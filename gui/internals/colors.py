"""Colours of the internals views (plain RGB tuples, no Qt): one per topic, one per
segment category, one per collision-chain entry kind."""
from __future__ import annotations

import colorsys

from engine import analysis as A

# qualitative palette (Tableau 20 reordered so neighbours differ, then a few ColorBrewer Dark2 /
# Set2 hues) without the red-ish hues: red means "damaged" in every view (CATEGORY_COLORS)
_CANDIDATES: list[tuple[int, int, int]] = [
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
    (227, 119, 194), (188, 189, 34), (23, 190, 207), (174, 199, 232), (255, 187, 120),
    (152, 223, 138), (255, 152, 150), (197, 176, 213), (196, 156, 148), (247, 182, 210),
    (219, 219, 141), (158, 218, 229), (57, 59, 121), (99, 121, 57), (140, 109, 49), (132, 60, 57),
    (123, 65, 115), (82, 84, 163), (181, 207, 107), (231, 186, 82), (214, 97, 107), (206, 109, 189),
    (27, 158, 119), (117, 112, 179), (102, 166, 30), (166, 118, 29), (102, 194, 165), (141, 160, 203),
]
RED_HUES = (340.0, 22.0)   # degrees: hues from 340 through 360/0 to 22 read as red


def is_reddish(rgb: tuple[int, int, int]) -> bool:
    """A colour that could be taken for the red of damaged bytes (hue near red, not grey)."""
    h, lightness, sat = colorsys.rgb_to_hls(*(c / 255 for c in rgb))
    deg = h * 360
    return sat > 0.2 and 0.15 < lightness < 0.95 and (deg >= RED_HUES[0] or deg <= RED_HUES[1])


TOPIC_PALETTE: list[tuple[int, int, int]] = [c for c in _CANDIDATES if not is_reddish(c)]

CATEGORY_COLORS: dict[int, tuple[int, int, int]] = {
    A.BLANK: (70, 70, 70),          # the end-of-file blank tail: dark
    A.FREE: (232, 232, 232),        # not written: almost background
    A.DAMAGED: (230, 0, 0),         # unreadable bytes: red
    A.FILLER: (160, 160, 160),      # CQ pre-blank filler units
    A.USED: (70, 130, 180),         # index entries / slots in use
    A.RESERVED: (120, 120, 120),    # index entry #0
    A.SLOTS: (0, 150, 136),         # index slots in use
    A.ENTRY_HEADER: (40, 40, 110),  # DLedger entry headers: dark blue
}

# the same categories on a dark background: unwritten space stays close to the background,
# the blank tail stands out from it (light where the light scheme has it dark)
DARK_CATEGORY_COLORS: dict[int, tuple[int, int, int]] = {
    **CATEGORY_COLORS, A.BLANK: (175, 175, 175), A.FREE: (62, 62, 68), A.FILLER: (120, 120, 120),
    A.RESERVED: (150, 150, 150), A.ENTRY_HEADER: (120, 120, 230)}


def category_colors(dark: bool = False) -> dict[int, tuple[int, int, int]]:
    """A fresh copy of the segment categories' colours for a light or a dark background."""
    return dict(DARK_CATEGORY_COLORS if dark else CATEGORY_COLORS)


KIND_COLORS: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {  # (border, fill)
    A.MATCH: ((46, 125, 50), (220, 242, 222)),
    A.COLLISION: ((230, 100, 0), (255, 234, 208)),
    A.SAME_KEY: ((21, 101, 192), (222, 236, 252)),
    A.SHARES_SLOT: ((97, 97, 97), (240, 240, 240)),
    A.UNRESOLVED: ((198, 40, 40), (255, 228, 228)),
}
KIND_TEXT = {
    A.MATCH: "the query's key",
    A.COLLISION: "true collision: same keyHash, other key",
    A.SAME_KEY: "same key again",
    A.SHARES_SLOT: "only shares the slot",
    A.UNRESOLVED: "message or key not found",
}
QUERY_HIT_COLOR = (255, 193, 7)     # border of entries a query returns


def topic_colors(topics: list[str]) -> dict[str, tuple[int, int, int]]:
    """Stable colours: topics sorted by name take the palette in order (cycling)."""
    return {t: TOPIC_PALETTE[i % len(TOPIC_PALETTE)] for i, t in enumerate(sorted(topics))}


def hex_color(rgb: tuple[int, int, int]) -> str:
    return "#%02x%02x%02x" % rgb
