"""IndexFile: a hash table from "topic#key" to commitlog offsets, with chained entries.

    [0, 40)                header (below)
    [40, 40 + 4*S)         S slots, i32: newest entry number for the slot, 0 = empty
    [.., + 20*N)           N entries; entry #0 is never used (numbers start at 1)

    header: beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64
            hashSlotCount i32 (slots that were empty when used) | indexCount i32 (next entry no.)
    entry:  keyHash i32 | commitLogOffset i64 | timeDiff i32 (s after beginTimestamp) | prevIndex i32

Only the 32-bit hash is stored, so a walk returns collisions; callers that care verify."""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.format.index_layout import slot_of
from engine.format.index_layout import (ENTRY as _ENTRY, HEADER as _HEADER, HEADER_TIMES as _HEADER_TIMES,  # noqa: F401
                                        INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, SLOT as _SLOT)
from engine.format.javahash import index_key_hash
from engine.files.mapped_file import MappedFile

INDEX_RESERVE_STEP = 1 << 20  # entries reserved 52,428 at a time, after the whole slot table

LONG_MAX = (1 << 63) - 1


_HEADER_FIELDS = ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount",
                  "indexCount")


class IndexHeader:
    """IndexHeader's six fields, kept in one array('q') so the compiled put loop
    (engine/accel/_append.pyx) reads and updates them in place."""
    __slots__ = ("values",)

    def __init__(self, beginTimestamp: int = 0, endTimestamp: int = 0, beginPhyOffset: int = 0,
                 endPhyOffset: int = 0, hashSlotCount: int = 0, indexCount: int = 1):
        self.values = array("q", (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount,
                                  indexCount))

    @classmethod
    def read(cls, raw, as_found: bool = False) -> "IndexHeader":
        """The header in the first 40 bytes of `raw` (a map or bytes read by range). A
        never-flushed header reads as zeros: its indexCount is taken as 1, as RocketMQ's
        IndexFile does (as_found: the fields as they are)."""
        h = np.frombuffer(raw, dtype=INDEX_HEADER_DTYPE, count=1)[0]
        out = cls(*(int(h[n]) for n in INDEX_HEADER_DTYPE.names))
        if out.indexCount <= 0 and not as_found:
            out.indexCount = 1
        return out

    @classmethod
    def read_path(cls, path, as_found: bool = False) -> "IndexHeader | None":
        """The header of the index file at `path` read by range (a file no load mapped: one of
        the wrong size); None when fewer than its 40 bytes remain or it cannot be read."""
        try:
            with open(path, "rb") as fh:
                raw = fh.read(INDEX_HEADER_SIZE)
        except OSError:
            return None
        return cls.read(raw, as_found) if len(raw) == INDEX_HEADER_SIZE else None

    def to_json(self) -> dict:
        return dict(zip(_HEADER_FIELDS, self.values))

    def copy(self) -> "IndexHeader":
        return IndexHeader(*self.values)

    def __eq__(self, other) -> bool:
        return isinstance(other, IndexHeader) and self.values == other.values

    def __repr__(self) -> str:
        return "IndexHeader(" + ", ".join(f"{k}={v}" for k, v in self.to_json().items()) + ")"


def _header_field(i: int) -> property:
    def get(self) -> int:
        return self.values[i]

    def set(self, v: int) -> None:
        self.values[i] = v
    return property(get, set)


for _i, _name in enumerate(_HEADER_FIELDS):
    setattr(IndexHeader, _name, _header_field(_i))


def entry_time(begin_ts: int, diff: int) -> int:
    """An entry's time, beginTimestamp + timeDiff * 1000, in Java's long arithmetic: it wraps
    past 2^63 (a damaged header's begin near the end of time), and the walk compares what
    RocketMQ compares. (engine/accel/_query.pyx _entry_time is the same rule in C.)"""
    t = begin_ts + diff * 1000
    if -(1 << 63) <= t <= LONG_MAX:
        return t
    return (t + (1 << 63)) % (1 << 64) - (1 << 63)


def time_diff(store_ts: int, begin_ts: int) -> int:
    """§9.4: an entry's timeDiff, whole seconds after the header's beginTimestamp (Java's
    truncating division), 0 without a begin or before it, capped at 2^31 - 1."""
    diff = store_ts - begin_ts
    diff = diff // 1000 if diff >= 0 else -((-diff) // 1000)
    if begin_ts <= 0 or diff < 0:
        return 0
    return min(diff, 0x7FFFFFFF)


@dataclass
class ChainStep:
    """One entry met while walking a slot's chain (for the collision-chain view and checks)."""
    index: int
    keyHash: int
    commitLogOffset: int
    timeDiff: int
    prevIndex: int
    timestamp: int
    stop: str = ""  # why the walk ended after this entry ("" = it went on)


class IndexFile:
    def __init__(self, path: Path, slot_num: int, index_num: int, writable: bool = False, create: bool = False,
                 file: MappedFile | None = None):
        """`file`: a map made elsewhere (engine.store.dledger_reput's in-memory ones), else the file at `path`."""
        self.path = Path(path)
        self.name = self.path.name
        self.slot_num = slot_num
        self.index_num = index_num
        size = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        # MappedFile wants a numeric name; index names are 17-digit times, so that holds
        self.file = file if file is not None else MappedFile(self.path, size, writable=writable, create=create,
                                                             reserve_step=INDEX_RESERVE_STEP, reserve_from_start=True)
        mm = self.file.mm
        self.header_view = np.frombuffer(mm, dtype=INDEX_HEADER_DTYPE, count=1)
        self.slots = np.frombuffer(mm, dtype=">i4", count=slot_num, offset=INDEX_HEADER_SIZE)
        self.entries = np.frombuffer(mm, dtype=INDEX_ENTRY_DTYPE, count=index_num,
                                     offset=INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE)
        self._entry_base = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
        self.accel = None  # its chain copy for key queries (IndexService.accelerate)
        if create and writable:
            self._room(0)
            self._populate_slots()
        self.header_on_disk = IndexHeader.read(mm, as_found=True)
        self.header = IndexHeader.read(mm)

    def _room(self, entries: int) -> None:
        """Blocks reserved for the header, the whole slot table (slots are written at random)
        and entries up to number `entries` (MappedFile.ensure_room)."""
        end = self._entry_base + (entries + 1) * INDEX_ENTRY_SIZE
        if end > self.file.reserved_until:
            self.file.ensure_room(end)

    def _populate_slots(self) -> None:
        """Fault the header and slot table of a new file in at once (MADV_POPULATE_WRITE,
        Linux 5.14+): puts write slots at random, and 5,000 first-touch faults scattered over
        the writer's puts cost several times one sequential populate. On a thread of its own
        (MappedFile.warm; ~20 ms of zeroing a default file on a VM, which the put that made
        the file paid): a put that gets to a slot page first faults it in itself. Zeros stay
        zeros; a kernel without the advice just faults them in later."""
        self.file.warm(0, self._entry_base)

    # ---- facts -----------------------------------------------------------------------
    @property
    def entry_count(self) -> int:
        return self.header.indexCount - 1

    @property
    def is_write_full(self) -> bool:
        return self.header.indexCount >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        h = self.header
        return ((begin < h.beginTimestamp and end > h.endTimestamp)
                or h.beginTimestamp <= begin <= h.endTimestamp
                or h.beginTimestamp <= end <= h.endTimestamp)

    def slot_of(self, key: str) -> int:
        return slot_of(index_key_hash(key), self.slot_num)

    # ---- reading ---------------------------------------------------------------------
    def select(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """IndexFile.selectPhyOffset, with one addition: a chain never walks more steps
        than the file has entries, so a cycle of any length ends."""
        key_hash = index_key_hash(key)
        h = self.header
        mm = self.file.mm
        n = _SLOT.unpack_from(mm, INDEX_HEADER_SIZE + slot_of(key_hash, self.slot_num) * INDEX_SLOT_SIZE)[0]
        count = h.indexCount
        if n <= 0 or n > count or count <= 1:
            return
        unpack, base, index_num, begin_ts = _ENTRY.unpack_from, self._entry_base, self.index_num, h.beginTimestamp
        steps, max_steps = 0, min(count, index_num)  # indexCount comes from the file: never trust it alone
        while len(out) < max_num and steps < max_steps:
            steps += 1
            if n >= index_num:
                break
            e_hash, e_phy, diff, prev = unpack(mm, base + n * INDEX_ENTRY_SIZE)
            if diff < 0:
                break
            t = entry_time(begin_ts, diff)
            if e_hash == key_hash and begin <= t <= end:
                out.append(e_phy)
            if prev <= 0 or prev > count or prev == n or t < begin:
                break
            n = prev

    def chain(self, slot: int, limit: int | None = None) -> list[ChainStep]:
        """Every entry of a slot's chain with the reason the walk ends; cycles and
        out-of-range links end it instead of being followed. (Every slot's chain length at
        once, and the cycles of a file: engine.analysis.chains.)"""
        h = self.header
        n = int(self.slots[slot])
        steps: list[ChainStep] = []
        seen: set[int] = set()
        limit = h.indexCount if limit is None else limit
        if n <= 0:
            return steps
        while True:
            if n > h.indexCount or n >= self.index_num:
                if steps:
                    steps[-1].stop = f"link to entry {n} beyond indexCount {h.indexCount}"
                break
            e = self.entries[n]
            s = ChainStep(n, int(e["keyHash"]), int(e["commitLogOffset"]), int(e["timeDiff"]),
                          int(e["prevIndex"]), entry_time(h.beginTimestamp, int(e["timeDiff"])))
            steps.append(s)
            seen.add(n)
            prev = s.prevIndex
            if prev <= 0:
                s.stop = "end of chain"
                break
            if prev in seen:
                s.stop = f"cycle back to entry {prev}"
                break
            if prev > h.indexCount:
                s.stop = f"link to entry {prev} beyond indexCount {h.indexCount}"
                break
            if len(steps) >= limit:
                s.stop = "step limit"
                break
            n = prev
        return steps

    # ---- writing ---------------------------------------------------------------------
    def put_key(self, key: str, phy_offset: int, store_ts: int) -> bool:
        """§9.4 putKey, including the first-entry timeDiff quirk. False when full."""
        h = self.header
        if h.indexCount >= self.index_num:
            return False
        self._room(h.indexCount)
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + slot_of(key_hash, self.slot_num) * INDEX_SLOT_SIZE
        mm = self.file.mm
        prev = _SLOT.unpack_from(mm, slot_pos)[0]
        if prev <= 0 or prev > h.indexCount:
            prev = 0
        diff = time_diff(store_ts, h.beginTimestamp)
        n = h.indexCount
        _ENTRY.pack_into(mm, self._entry_base + n * INDEX_ENTRY_SIZE, key_hash, phy_offset, diff, prev)
        _SLOT.pack_into(mm, slot_pos, n)
        if h.indexCount <= 1:
            h.beginPhyOffset, h.beginTimestamp = phy_offset, store_ts
        if prev == 0:
            h.hashSlotCount += 1
        h.indexCount += 1
        h.endPhyOffset, h.endTimestamp = phy_offset, store_ts
        self.write_header()
        return True

    def write_header(self, counts: bool = True) -> None:
        """Java writes each header field as it changes: a new file inherits begin/end values
        at once but its counters reach the disk only with the first entry."""
        h = self.header
        self._room(0)
        if counts:
            _HEADER.pack_into(self.file.mm, 0, h.beginTimestamp, h.endTimestamp, h.beginPhyOffset,
                              h.endPhyOffset, h.hashSlotCount, h.indexCount)
        else:
            _HEADER_TIMES.pack_into(self.file.mm, 0, h.beginTimestamp, h.endTimestamp, h.beginPhyOffset,
                                    h.endPhyOffset)

    def repair_torn_put(self) -> int:
        """put_key writes the entry, then the slot, then the header: a writer killed between the
        slot and the header leaves a slot pointing at entry == indexCount, which the next put
        overwrites for another key (two chains then share entries; the slot's older entries
        are lost). Before appending again, point such slots back where the entry links.
        Returns how many slots were repaired."""
        count = self.header.indexCount
        self.accel = None  # slots change under the same indexCount: a chain copy would not see it
        self._room(count)  # before the slot table is read: its holes must not be touched unreserved
        slots = self.slots
        bad = np.flatnonzero(slots >= count)
        for s in bad.tolist():
            n = int(slots[s])
            prev = int(self.entries[n]["prevIndex"]) if n == count and n < self.index_num else 0
            _SLOT.pack_into(self.file.mm, INDEX_HEADER_SIZE + s * INDEX_SLOT_SIZE, prev if 0 < prev < count else 0)
        return len(bad)

    def reload_header(self) -> None:
        """Re-read the header another process may have changed (live stores)."""
        self.header.values[:] = IndexHeader.read(self.file.mm).values  # in place: the put loop and the key walker hold it

    def flush(self) -> None:
        """msync the whole map every time: slots and entries change anywhere in it (a flush
        from the last flushed position on would sync an index file once, then never again)."""
        self.file.wrote_position = self.file.file_size
        self.file.sync()

    def flush_header(self) -> None:
        """msync the header's page only. Its endTimestamp on disk, once past the checkpoint's
        indexMsgTimestamp, is what makes crash recovery delete the file (§12.6) whatever its
        other pages hold after a power cut; the slots and entries are synced when it is full."""
        self.file.sync_head(INDEX_HEADER_SIZE)

    def close(self) -> None:
        del self.header_view, self.slots, self.entries
        self.file.close()
