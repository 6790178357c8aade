"""The slot heat map as pixels: chain lengths (or slots in use) binned to a pixel budget,
laid out row-major, and turned into an 8-bit indexed image for a 256-colour table. The
numbers come from engine.analysis; only the picture is made here (numpy, no Qt)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine import analysis as A

NAN_INDEX = 255   # heat_indices: the colour index of "no slot here" (past the last bin)


@dataclass
class SlotHeatmap:
    image: np.ndarray        # (rows, cols) float32, NaN past the last slot; row-major
    slots_per_bin: int
    bins: int
    how: str                 # "max" or "mean" chain length, or "used" slots (occupancy)
    top: float = 1.0         # colour scale maximum (>= 1): the largest value, `slots_per_bin` for "used"
    indices: np.ndarray | None = None   # heat_indices(self), when the binning made it on the way
    nonzero_bins: int = -1   # bins with a value > 0, when known (-1: count them)

    @property
    def shape(self) -> tuple[int, int]:
        return self.image.shape

    def slot_range(self, row: int, col: int) -> tuple[int, int] | None:
        b = row * self.image.shape[1] + col
        if not (0 <= row < self.image.shape[0] and 0 <= col < self.image.shape[1]) or b >= self.bins:
            return None
        return b * self.slots_per_bin, (b + 1) * self.slots_per_bin


def heatmap_layout(n: int, width: int, height: int) -> tuple[int, int, int, int]:
    """(slots per bin, bins, rows, cols) for `n` slots in at most width x height pixels,
    with an aspect near width:height."""
    width, height = max(1, width), max(1, height)
    bins = max(1, min(width * height, n))
    per = max(1, -(-n // bins))
    nb = max(1, -(-n // per))
    cols = max(1, min(width, nb, math.ceil(math.sqrt(nb * width / height))))
    rows = -(-nb // cols)
    return per, nb, rows, cols


def _new_image(nb: int, rows: int, cols: int) -> np.ndarray:
    img = np.empty(rows * cols, dtype=np.float32)
    img[nb:] = np.nan
    return img


def slot_heatmap(lengths: np.ndarray, width: int, height: int, how: str = "max", accel: bool = True) -> SlotHeatmap:
    """Every slot binned to at most width x height pixels, laid out row-major with an aspect
    near width:height (slot numbers increase left to right, then down)."""
    if how not in ("max", "mean"):
        raise ValueError(f"unknown reduction {how!r}")
    n = len(lengths)
    if n == 0:
        return SlotHeatmap(np.full((1, 1), np.nan, dtype=np.float32), 1, 0, how)
    per, nb, rows, cols = heatmap_layout(n, width, height)
    img = _new_image(nb, rows, cols)
    A.bin_slots(lengths, nb, how, out=img, accel=accel)     # straight into the image
    top = max(1.0, float(img[:nb].max()))
    return SlotHeatmap(img.reshape(rows, cols), per, nb, how, top)


def slot_occupancy(f, width: int, height: int) -> SlotHeatmap:
    """How many slots of each pixel's bin are in use (non-zero): the slot table alone, no
    entry is read. Same layout as slot_heatmap, how = "used", colour scale 0 .. slots per bin."""
    n = f.slot_num
    if n == 0:
        return SlotHeatmap(np.full((1, 1), np.nan, dtype=np.float32), 1, 0, "used")
    per, nb, rows, cols = heatmap_layout(n, width, height)
    img = _new_image(nb, rows, cols)
    used = A.slots_used_per_bin(f, per, nb)
    img[:nb] = used
    return SlotHeatmap(img.reshape(rows, cols), per, nb, "used", float(per),
                       nonzero_bins=int(np.count_nonzero(used)))


def heat_indices(heat: SlotHeatmap) -> np.ndarray:
    """The heat map as an 8-bit indexed image (rows, cols): value v -> round(v / top * 254)
    clipped to 0..254, NAN_INDEX past the last bin. A view shows it with a 256-entry colour
    table as is (no per-pixel float scaling or NaN scan at paint time)."""
    if heat.indices is not None:
        return heat.indices
    flat = heat.image.ravel()
    out = np.empty(flat.size, dtype=np.uint8)
    nb = heat.bins
    v = flat[:nb] * np.float32(254.0 / heat.top if heat.top > 0 else 0.0)
    v += np.float32(0.5)
    np.clip(v, 0, 254, out=v)
    out[:nb] = v                     # NaN cannot occur before nb: every bin holds a slot
    out[nb:] = NAN_INDEX
    return out.reshape(heat.image.shape)
