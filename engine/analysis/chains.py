"""Index chains: the length of every slot's chain, its histogram against the Poisson law a
uniform hash gives, the longest chains, and the cycles of a damaged file.

A chain is walked from a slot's head through prevIndex links; entry numbers outside
1..min(indexCount, maxIndexNum - 1) end it, so does coming back to an entry already met (a
cycle): its length is the number of distinct entries met, as IndexFile.chain counts them.
The compiled kernel (engine/accel/_index.pyx) and the numpy walk here give equal answers;
tests compare them on real index files, compiled and with RMQSTORE_PURE_PYTHON=1."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.accel import load


def _accel():
    """The compiled kernels, or None: not built, or RMQSTORE_PURE_PYTHON=1. Looked up per call
    so tests can switch them off."""
    return load("_index")


def chain_census(f, accel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(lengths int32 per slot, counts int64: how many slots have each length).

    Compiled: one pass over the used entries' prevIndex straight from the map (an intact file
    only links an entry to an older one, so len[e] = 1 + len[prev[e]] in entry order), then
    one pass over the slot table; damaged files (forward links, cycles) resolved in C."""
    k = _accel() if accel else None
    if k is not None and f.file.mm is not None:
        return k.chain_lengths(f.file.mm, f.slot_num, f.index_num, f.header.indexCount)
    lengths = chain_lengths_numpy(f)
    return lengths, np.bincount(lengths, minlength=1).astype(np.int64)


def chain_lengths(f, accel: bool = True) -> np.ndarray:
    """Chain length of every slot (int32): the entries select() meets from the slot."""
    return chain_census(f, accel)[0]


def chain_lengths_numpy(f) -> np.ndarray:
    """chain_lengths in numpy: vectorised over slots, one gather per chain step on a native
    copy of the prevIndex column. The few slots that take a forward link (damage; every cycle
    has one) are walked one by one with IndexFile.chain, which stops at a cycle."""
    limit = valid_limit(f) + 1                       # valid entry numbers: 1 .. limit-1
    prev = f.entries["prevIndex"][:limit].astype(np.int32)
    heads = f.slots.astype(np.int32)
    lengths = np.zeros(len(heads), dtype=np.int32)
    alive = np.flatnonzero((heads > 0) & (heads < limit))
    cur = heads[alive]
    slow: list[np.ndarray] = []
    step = 0
    while alive.size:
        step += 1
        nxt = prev[cur]
        go_on = (nxt > 0) & (nxt < limit)
        fwd = go_on & (nxt >= cur)
        if fwd.any():
            slow.append(alive[fwd])
            go_on &= ~fwd
        ends = ~go_on
        lengths[alive[ends]] = step
        alive, cur = alive[go_on], nxt[go_on]
    for s in (np.concatenate(slow) if slow else ()):
        lengths[s] = len(f.chain(int(s)))
    return lengths


def valid_limit(f) -> int:
    """L: entry numbers 1..L can be part of a chain (min(indexCount, maxIndexNum - 1))."""
    return max(0, min(f.header.indexCount, f.index_num - 1))


def chain_cycles(f) -> list[list[int]]:
    """Every prevIndex cycle among the entries 1..L, each as its entry numbers in link order
    (starting at its largest entry). select() walking into one would loop until its step
    limit; only a forward or self link can close one, so only entries reached from those
    are walked (each once)."""
    L = valid_limit(f)
    if L <= 0:
        return []
    prev = f.entries["prevIndex"][:L + 1].astype(np.int64)
    idx = np.arange(L + 1)
    starts = np.flatnonzero((prev >= idx) & (prev > 0) & (prev <= L) & (idx > 0))
    state = np.zeros(L + 1, dtype=np.int8)          # 0 new, 1 on the current path, 2 done
    cycles: list[list[int]] = []
    for e in starts.tolist():
        path: list[int] = []
        x = e
        while 0 < x <= L and state[x] == 0:
            state[x] = 1
            path.append(x)
            x = int(prev[x])
        if 0 < x <= L and state[x] == 1:            # came back onto this path: a cycle
            cyc = path[path.index(x):]
            top = cyc.index(max(cyc))
            cycles.append(cyc[top:] + cyc[:top])
        for y in path:
            state[y] = 2
    return cycles


# ---- histogram and statistics ---------------------------------------------------------------
@dataclass
class ChainHistogram:
    lengths: np.ndarray     # 0 .. kmax
    observed: np.ndarray    # slots with that chain length (int64)
    expected: np.ndarray    # Poisson(load) * slots (float64)
    load: float             # entries / slots
    slots: int
    entries: int

    def rows(self) -> list[tuple[int, int, float]]:
        return [(int(k), int(o), float(e)) for k, o, e in zip(self.lengths, self.observed, self.expected)]


def poisson_expected(slots: int, load: float, kmax: int) -> np.ndarray:
    """slots * P(K = k) for K ~ Poisson(load), k = 0..kmax (recurrence, no factorials)."""
    p = np.empty(kmax + 1, dtype=np.float64)
    p[0] = math.exp(-load)
    for k in range(1, kmax + 1):
        p[k] = p[k - 1] * load / k
    return p * slots


def chain_histogram(lengths: np.ndarray, entries: int, counts: np.ndarray | None = None) -> ChainHistogram:
    """Observed chain lengths against Poisson; `counts` (from chain_census) saves the bincount."""
    slots = len(lengths)
    observed = (np.bincount(lengths, minlength=1) if counts is None else np.asarray(counts)).astype(np.int64)
    load = entries / slots if slots else 0.0
    # show the law's tail too, until it expects less than half a slot
    kmax = len(observed) - 1
    exp = poisson_expected(slots, load, kmax + 64)
    above = np.flatnonzero(exp >= 0.5)
    kmax = max(kmax, int(above[-1]) if above.size else 0)
    observed = np.pad(observed, (0, kmax + 1 - len(observed)))
    return ChainHistogram(np.arange(kmax + 1), observed, exp[:kmax + 1], load, slots, entries)


@dataclass
class SlotStats:
    slots: int
    entries: int
    used_slots: int
    load: float
    longest: list[tuple[int, int]]      # (slot, chain length), longest first
    mean_used: float                    # mean chain length over used slots
    reachable: int                      # entries met walking every chain
    expected_used: float                # slots * (1 - e^-load)


def slot_stats(lengths: np.ndarray, entries: int, top: int = 5, counts: np.ndarray | None = None) -> SlotStats:
    """Used slots, entries reached and the `top` longest chains (longest first, lower slot
    first on ties). With `counts` (chain_census) the longest chains are looked for only above
    the length the histogram says holds the top ones."""
    slots = len(lengths)
    if counts is None:
        counts = np.bincount(lengths, minlength=1)
    counts = np.asarray(counts, dtype=np.int64)
    used = slots - int(counts[0]) if slots else 0
    reach = int(np.dot(np.arange(len(counts), dtype=np.int64), counts))
    top = min(top, used)
    longest: list[tuple[int, int]] = []
    if top > 0:
        above = np.cumsum(counts[::-1])[::-1]          # above[k]: slots with length >= k
        t = max(1, int(np.flatnonzero(above >= top)[-1]))
        gt = np.flatnonzero(lengths > t)                # fewer than `top` of them
        eq = np.flatnonzero(lengths == t)[:top - len(gt)]
        idx = np.concatenate((gt, eq))
        idx = idx[np.lexsort((idx, -lengths[idx].astype(np.int64)))][:top]
        longest = [(int(i), int(lengths[i])) for i in idx]
    load = entries / slots if slots else 0.0
    return SlotStats(slots, entries, used, load, longest, reach / used if used else 0.0, reach,
                     slots * (1 - math.exp(-load)))


def longest_slot_in(lengths: np.ndarray, lo: int, hi: int) -> int:
    """The slot with the longest chain in [lo, hi) (the first one on ties)."""
    hi = min(hi, len(lengths))
    return lo + int(np.argmax(lengths[lo:hi])) if hi > lo else lo


# ---- binning ---------------------------------------------------------------------------------
def bin_slots(lengths: np.ndarray, bins: int, how: str = "max", out: np.ndarray | None = None,
              accel: bool = True) -> tuple[np.ndarray, int]:
    """Chain lengths reduced to at most `bins` equal bins of consecutive slots (the last one
    shorter): (values float32, slots per bin). `out` (float32, at least that many bins) is
    filled in place and returned when given."""
    if how not in ("max", "mean"):
        raise ValueError(f"unknown reduction {how!r}")
    n = len(lengths)
    bins = max(1, min(bins, n))
    per = -(-n // bins)
    nb = -(-n // per)
    v = np.empty(nb, dtype=np.float32) if out is None else out
    k = _accel() if accel else None
    if k is not None and lengths.dtype == np.int32 and lengths.flags.c_contiguous:
        k.bin_lengths(lengths, per, nb, v, how == "max")
        return v, per
    pad = nb * per - n
    a = lengths if pad == 0 else np.concatenate((lengths, np.zeros(pad, dtype=lengths.dtype)))
    a = a.reshape(nb, per)
    if how == "max":
        v[:nb] = a.max(axis=1)
    else:
        counts = np.full(nb, per, dtype=np.float64)
        counts[-1] = per - pad
        v[:nb] = a.sum(axis=1, dtype=np.int64) / counts
    return v, per


def slots_used_per_bin(f, per: int, nb: int, accel: bool = True) -> np.ndarray:
    """How many slots of each bin of `per` consecutive slots are in use (non-zero, damage
    included): int32[nb], read from the slot table alone."""
    k = _accel() if accel else None
    if k is not None and f.file.mm is not None:
        out = np.empty(nb, dtype=np.int32)
        k.used_per_bin(f.file.mm, f.slot_num, per, nb, out)
        return out
    used = f.slots.view(np.uint32) != 0             # no byte swap: zero is zero either way
    pad = nb * per - f.slot_num
    if pad:
        used = np.concatenate((used, np.zeros(pad, dtype=bool)))
    return used.reshape(nb, per).sum(axis=1, dtype=np.int32)
