"""Default-size index files at a chosen load factor, built with numpy in seconds.

Filling 20,000,000 entries through IndexFile.put_key would take many minutes per file, so the
file is computed the way put_key would have written it, for keys "topic#K0000000000" ...
stored in order: entry n (from 1) = key n-1, its slot's previous newest entry as prevIndex,
each slot holding its newest entry. `check_against_put_key` builds a small file both ways and
compares the bytes, so the numpy path cannot drift from the engine's."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.config import INDEX_HEADER_SIZE
from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, IndexFile
from engine.format.javahash import java_hash

KEY_DIGITS = 10
PHY_STEP = 1024      # entry i points at commitlog offset i * PHY_STEP
T0 = 1_700_000_000_000


def key_of(i: int) -> str:
    return f"K{i:0{KEY_DIGITS}d}"


def key_hashes(topic: str, n: int) -> np.ndarray:
    """index_key_hash(f"{topic}#K%010d" % i) for i < n, vectorised over the ten digits."""
    i = np.arange(n, dtype=np.int64)
    h = np.full(n, java_hash(f"{topic}#K") & 0xFFFFFFFF, dtype=np.uint32)
    for k in range(KEY_DIGITS - 1, -1, -1):
        digit = ((i // 10 ** k) % 10 + 48).astype(np.uint32)
        h = h * np.uint32(31) + digit          # wraps modulo 2**32, like Java's int
    signed = h.view(np.int32).astype(np.int64)
    return np.where(signed == -(1 << 31), 0, np.abs(signed))


def build(path: Path, topic: str, n: int, slot_num: int, index_num: int) -> dict:
    """Write an index file holding n entries; returns its header values."""
    assert 0 < n < index_num
    kh = key_hashes(topic, n)
    slot = kh % slot_num
    order = np.argsort(slot, kind="stable")
    ss = slot[order]
    same = ss[1:] == ss[:-1]
    prev = np.zeros(n, dtype=np.int64)
    prev[order[1:][same]] = order[:-1][same] + 1
    last = np.ones(n, dtype=bool)
    last[:-1] = ~same
    slots = np.zeros(slot_num, dtype=">i4")
    slots[ss[last]] = order[last] + 1
    entries = np.zeros(n + 1, dtype=INDEX_ENTRY_DTYPE)
    entries["keyHash"][1:] = kh
    entries["commitLogOffset"][1:] = np.arange(n, dtype=np.int64) * PHY_STEP
    diff = np.arange(n, dtype=np.int64) // 1000     # store time T0 + i ms
    diff[0] = 0                                     # put_key's first-entry quirk: no begin time yet
    entries["timeDiff"][1:] = diff
    entries["prevIndex"][1:] = prev
    header = {"beginTimestamp": T0, "endTimestamp": T0 + n - 1, "beginPhyOffset": 0,
              "endPhyOffset": (n - 1) * PHY_STEP, "hashSlotCount": int(last.sum()), "indexCount": n + 1}
    h = np.zeros(1, dtype=INDEX_HEADER_DTYPE)
    for k, v in header.items():
        h[k] = v
    size = INDEX_HEADER_SIZE + slot_num * 4 + index_num * 20
    with open(path, "wb") as fh:
        fh.truncate(size)
        fh.write(h.tobytes())
        fh.write(slots.tobytes())
        step = 1 << 20
        for k in range(0, n + 1, step):
            fh.write(entries[k:k + step].tobytes())
    return header


def check_against_put_key(tmp: Path, topic: str = "BenchTopic", n: int = 3000, slots: int = 1000) -> bool:
    a, b = tmp / "20260101000000000", tmp / "20260101000000001"
    build(a, topic, n, slots, 4 * slots)
    f = IndexFile(b, slots, 4 * slots, writable=True, create=True)
    for i in range(n):
        f.put_key(f"{topic}#{key_of(i)}", i * PHY_STEP, T0 + i)
    f.flush()
    f.close()
    same = a.read_bytes() == b.read_bytes()
    a.unlink()
    b.unlink()
    return same
