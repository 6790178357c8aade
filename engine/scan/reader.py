"""Reading the slices of a plan, inside whichever process runs them (the local scanner or a
Spark worker): files are mapped read-only here, never shipped. Nothing here moves shared
state; every function only reads."""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from engine.format.dledger_layout import hop_entries
from engine.format.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, FILLER_SIZE
from engine.format.index_layout import INDEX_ENTRY_DTYPE, INDEX_ENTRY_SIZE, slots_of
from engine.scan.columns import RecordBlock, hop, hop_assisted
from engine.store.rocksdb_cq import read_units as read_rocksdb_units
from engine.scan.jobs import is_uri
from engine.scan.remote import read_commitlog_ranges
from engine.scan.planning import CommitLogSlice, CQSlice, IndexSlice, index_entry_position

BLOCK_RECORDS = 1 << 16
BLOCK_BYTES = 32 << 20


@dataclass
class SliceStats:
    """What a read skipped: SIZE_MISMATCH records, and where a slice ended early."""
    records: int = 0
    size_mismatch: int = 0
    stops: list[tuple[int, str]] = field(default_factory=list)  # (commitlog offset, why)

    def merge(self, other: "SliceStats") -> None:
        self.records += other.records
        self.size_mismatch += other.size_mismatch
        self.stops.extend(other.stops)


def map_file(path: str) -> tuple[mmap.mmap, np.ndarray]:
    from engine.files.mapped_file import map_for_reading
    with open(path, "rb") as fh:
        mm = map_for_reading(fh.fileno(), os.fstat(fh.fileno()).st_size)
    return mm, np.frombuffer(mm, dtype=np.uint8)


def read_commitlog(s: CommitLogSlice, delay_level_millis: list[int], stats: SliceStats | None = None,
                   max_records: int = BLOCK_RECORDS, max_bytes: int = BLOCK_BYTES) -> Iterator[RecordBlock]:
    """Blocks of valid messages whose records start in [s.start, s.end): mapped, or read by
    byte ranges through the filesystem when the slice's path is a URI (engine.scan.remote)."""
    if is_uri(s.path):
        yield from read_commitlog_ranges(s, delay_level_millis, stats, max_records, max_bytes)
        return
    mm, u8 = map_file(s.path)
    pos = s.start
    cands = hint_positions(s)
    while True:
        if s.entry_header:  # DLedger: the records are the bodies of the entries
            h = hop_entries(mm, pos, s.end, s.limit, s.file_from_offset, max_records, max_bytes)
        elif cands is not None:
            h = hop_assisted(mm, u8, pos, s.end, s.limit, cands, max_records, max_bytes)
        else:
            h = hop(mm, pos, s.end, s.limit, max_records, max_bytes)
        block, skipped, invalid_at = RecordBlock.decode(u8, s.file_from_offset, h.starts, delay_level_millis)
        if stats is not None:
            stats.records += len(block)
            stats.size_mismatch += skipped
            if invalid_at is not None:
                stats.stops.append((s.file_from_offset + int(h.starts[invalid_at]), "invalid topic length"))
            elif h.stop == "invalid":
                stats.stops.append((s.file_from_offset + h.next_pos, "invalid record header"))
        if len(block):
            yield block
        if invalid_at is not None or h.stop:
            return
        pos = h.next_pos


def hint_positions(s: CommitLogSlice) -> np.ndarray | None:
    """Record starts the slice's CQ ranges name (positions in the commitlog file), sorted."""
    if not s.hints:
        return None
    parts = []
    for path, a, b in s.hints:
        try:
            _, u8 = map_file(path)
        except (OSError, ValueError):
            continue   # a CQ file gone since planning: hop without it
        if len(u8) < b * CQ_UNIT_SIZE:
            continue
        u = np.frombuffer(u8, dtype=CQ_UNIT_DTYPE, count=b)[a:b]
        phy = u["commitLogOffset"].astype(np.int64)
        size = u["size"].astype(np.int64)
        pos = phy[(size > 0) & (size != FILLER_SIZE)] - s.file_from_offset
        parts.append(pos[(pos >= s.start) & (pos < s.end)])
    if not parts:
        return None
    return np.unique(np.concatenate(parts))


def read_cq(s: CQSlice) -> dict[str, np.ndarray]:
    """Units of one CQ slice as native arrays; filler units (0, MAX_INT, 0) are dropped."""
    if s.kind == "rocksdb":  # no byte position: `position` is -1
        first = s.file_from // CQ_UNIT_SIZE + s.unit_start
        q, u = read_rocksdb_units(s.path, s.topic, s.queue_id, first, first + s.unit_end - s.unit_start)
        phy = u["commitLogOffset"].astype(np.int64)
        return {"queueOffset": q, "commitLogOffset": phy, "phyOffset": phy, "size": u["size"].astype(np.int32),
                "tagsCode": u["tagsCode"].astype(np.int64), "position": np.full(len(q), -1, np.int64)}
    if is_uri(s.path):   # a store on a filesystem: byte ranges
        from engine.scan.remote import read_cq_units
        u = read_cq_units(s)
    else:
        _, u8 = map_file(s.path)
        u = np.frombuffer(u8, dtype=CQ_UNIT_DTYPE, count=s.unit_end, offset=0)[s.unit_start:s.unit_end]
    phy = u["commitLogOffset"].astype(np.int64)
    size = u["size"].astype(np.int64)
    keep = ~((phy == 0) & (size == FILLER_SIZE))
    n = np.flatnonzero(keep) + s.unit_start
    first_q = s.file_from // CQ_UNIT_SIZE
    return {"queueOffset": first_q + n, "commitLogOffset": phy[keep], "phyOffset": phy[keep],
            "size": size[keep].astype(np.int32), "tagsCode": u["tagsCode"].astype(np.int64)[keep], "position": n * CQ_UNIT_SIZE}


def read_index(s: IndexSlice) -> dict[str, np.ndarray]:
    """Entries [first, last) of one index file with their slot, absolute time and position."""
    base = index_entry_position(s, 0)
    if is_uri(s.path):   # a store on a filesystem: byte ranges
        from engine.scan.remote import read_index_entries
        e = read_index_entries(s, base)
    else:
        _, u8 = map_file(s.path)
        e = np.frombuffer(u8, dtype=INDEX_ENTRY_DTYPE, count=s.index_num, offset=base)[s.first:s.last]
    n = np.arange(s.first, s.first + len(e), dtype=np.int64)
    key_hash = e["keyHash"].astype(np.int64)
    diff = e["timeDiff"].astype(np.int64)
    return {"index": n.astype(np.int32), "keyHash": key_hash.astype(np.int32),
            "commitLogOffset": e["commitLogOffset"].astype(np.int64), "timeDiff": diff.astype(np.int32),
            "phyOffset": e["commitLogOffset"].astype(np.int64),
            "prevIndex": e["prevIndex"].astype(np.int32), "timestamp": s.begin_timestamp + diff * 1000,
            "slot": slots_of(key_hash, s.slot_num).astype(np.int32), "position": base + n * INDEX_ENTRY_SIZE}
