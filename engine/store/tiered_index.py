"""The INDEX segments of a tier: each one compacted index file (IndexStoreFile in state UPLOAD),
read as queryAsyncFromSegmentFile reads it. Layout: engine/format/tiered_layout.py."""
from __future__ import annotations

import os
from dataclasses import dataclass

from engine.errors import StoreError
from engine.format import tiered_layout as L


@dataclass
class IndexSegment:
    """One compacted, uploaded index file (IndexStoreFile in state UPLOAD)."""
    segment: object     # engine.store.tiered.Segment: path, base, size
    magic: int
    begin_timestamp: int
    end_timestamp: int
    hash_slot_count: int
    item_count: int
    slots: int | None   # hashSlotMaxCount, from the file size

    def to_json(self) -> dict:
        return {"name": self.segment.path.name, "baseOffset": self.segment.base, "size": self.segment.size,
                "magic": self.magic, "sealed": self.magic == L.END_MAGIC, "beginTimestamp": self.begin_timestamp,
                "endTimestamp": self.end_timestamp, "hashSlotCount": self.hash_slot_count,
                "indexItemCount": self.item_count, "hashSlotMaxCount": self.slots}

    def read(self, pos: int, n: int) -> bytes:
        with open(self.segment.path, "rb") as f:
            return os.pread(f.fileno(), n, pos)

    def items(self, hash_code: int, begin: int, end: int, max_count: int) -> list[tuple]:
        """queryAsyncFromSegmentFile: the slot's items with this hash and a store time in
        [begin, end], at most max_count."""
        if not self.slots or hash_code < 0:
            return []
        pos = L.INDEX_HEADER_SIZE + L.slot_of(hash_code, self.slots) * L.INDEX_SLOT_SIZE
        slot = self.read(pos, L.INDEX_SLOT_SIZE)
        if len(slot) < L.INDEX_SLOT_SIZE:
            return []
        start, length = L.INDEX_SLOT.unpack(slot)
        length = min(length, L.MAX_ITEMS_READ)
        if start <= 0 or length <= 0:
            return []
        data = self.read(start, length)
        if len(data) != length or length % L.INDEX_ITEM_SIZE:
            return []
        out = []
        for i in range(0, length, L.INDEX_ITEM_SIZE):
            item = L.INDEX_ITEM.unpack_from(data, i)
            ts = item[5] * 1000 + self.begin_timestamp
            if item[0] == hash_code and begin <= ts <= end and len(out) < max_count:
                out.append(item)
        return out

    def all_items(self) -> list[tuple[int, tuple]]:
        """(slot, item) for every item, slot by slot."""
        out = []
        if not self.slots:
            return out
        table = self.read(L.INDEX_HEADER_SIZE, self.slots * L.INDEX_SLOT_SIZE)
        for s in range(self.slots):
            start, length = L.INDEX_SLOT.unpack_from(table, s * L.INDEX_SLOT_SIZE)
            if start > 0 and length > 0:
                data = self.read(start, length)
                for i in range(0, len(data) - L.INDEX_ITEM_SIZE + 1, L.INDEX_ITEM_SIZE):
                    out.append((s, L.INDEX_ITEM.unpack_from(data, i)))
        return out


def open_index_segment(seg) -> IndexSegment:
    with open(seg.path, "rb") as f:
        head = f.read(L.INDEX_HEADER_SIZE + L.INDEX_SLOT_SIZE)
    if len(head) < L.INDEX_HEADER_SIZE:
        raise StoreError("index segment shorter than its 28-byte header", path=str(seg.path))
    magic, begin, end, used, count = L.INDEX_HEADER.unpack_from(head)
    first = L.INDEX_SLOT.unpack_from(head, L.INDEX_HEADER_SIZE)[0] if \
        len(head) >= L.INDEX_HEADER_SIZE + L.INDEX_SLOT_SIZE else None
    return IndexSegment(seg, magic, begin, end, used, count, L.slot_count(seg.size, count, first))
