"""The local, unsealed tiered index of a running broker (`<storePathRootDir>/tiered_index_file/
<beginTimestamp>`): the keys dispatched to the tier that are not yet compacted into an INDEX
segment. TieredMessageStore's queryMessage searches these files beside the tier's segments
(IndexStoreService.timeStoreTable holds both), so rmqstore does too. Read as
IndexStoreFile.queryAsyncFromUnsealedFile reads them; the layout is engine/format/tiered_layout.py.

Neither hashSlotMaxCount nor indexItemMaxCount is stored. The broker's settings (or their
defaults) are tried first; otherwise the slot count is found from the file itself: the newest
item (number indexItemCount) must be the head of its slot's chain, and every chain together must
reach every item exactly once."""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import ConfigError, StoreError
from engine.format import tiered_layout as L

MAX_GEOMETRY_TRIES = 8     # slot counts given the full chain check when the head check leaves several


@dataclass
class LocalIndexFile:
    path: Path
    magic: int
    begin_timestamp: int      # the file's name (IndexStoreFile(storeConfig, timestamp))
    end_timestamp: int
    hash_slot_count: int
    item_count: int
    slots: int | None         # hashSlotMaxCount (None: not found; the file is not searched)
    data: bytes | mmap.mmap

    def to_json(self) -> dict:
        return {"name": self.path.name, "size": len(self.data), "magic": self.magic,
                "sealed": self.magic == L.END_MAGIC, "beginTimestamp": self.begin_timestamp,
                "endTimestamp": self.end_timestamp, "hashSlotCount": self.hash_slot_count,
                "indexItemCount": self.item_count, "hashSlotMaxCount": self.slots, "local": True}

    def _item(self, index: int) -> tuple | None:
        pos = L.local_item_position(self.slots, index)
        if pos + L.LOCAL_INDEX_ITEM_SIZE > len(self.data):
            return None
        return L.LOCAL_INDEX_ITEM.unpack_from(self.data, pos)

    def _head(self, hash_code: int) -> int:
        return max(L.LOCAL_SLOT.unpack_from(self.data, L.INDEX_HEADER_SIZE + L.slot_of(hash_code, self.slots)
                                            * L.INDEX_SLOT_SIZE)[0], 0)

    def items(self, hash_code: int, begin: int, end: int, max_count: int) -> list[tuple]:
        """queryAsyncFromUnsealedFile: the slot's chain (at most 512 items) newest first, the
        items with this hash and a store time in [begin, end]; it stops past max_count."""
        if not self.slots or hash_code < 0:
            return []
        out, left, index = [], L.LOCAL_MAX_QUERY, self._head(hash_code)
        while left > 0 and 0 < index <= self.item_count:
            item = self._item(index)
            if item is None:
                break
            ts = item[5] * 1000 + self.begin_timestamp
            if item[0] == hash_code and begin <= ts <= end:
                out.append(item[:6])
                if len(out) > max_count:
                    break
            index, left = item[6], left - 1
        return out

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()


def _reaches_every_item(data, slots: int, count: int) -> bool:
    """Every chain from every slot, together, visits items 1..count each exactly once."""
    seen = np.zeros(count + 1, dtype=bool)
    heads = np.frombuffer(data, dtype=">i4", count=2 * slots, offset=L.INDEX_HEADER_SIZE)[::2]
    for index in heads[heads > 0].tolist():
        steps = 0
        while 0 < index <= count and steps <= count:
            if seen[index]:
                return False
            seen[index] = True
            index = L.LOCAL_INDEX_ITEM.unpack_from(data, L.local_item_position(slots, index))[6]
            steps += 1
        if index != 0:
            return False
    return bool(seen[1:].all())


HEAD_CHECKS = 16            # the newest items each checked to be in their slot's chain
CANDIDATES_PER_STEP = 1 << 20
FULL_WALK_MAX_ITEMS = 1 << 21   # the full chain check is a Python walk: on files up to this many items


def _be32(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    b = [u8[pos + k].astype(np.int64) for k in range(4)]
    v = (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def _heads_hold(u8: np.ndarray, slots: np.ndarray, count: int) -> np.ndarray:
    """For each slot count: the newest item heads its slot, and each of the HEAD_CHECKS newest
    items is under a head at least as new (a chain only holds items older than its head)."""
    ok = np.ones(len(slots), dtype=bool)
    for k in range(count, max(0, count - HEAD_CHECKS), -1):
        h = _be32(u8, L.INDEX_HEADER_SIZE + slots * L.INDEX_SLOT_SIZE + k * L.LOCAL_INDEX_ITEM_SIZE)
        good = h >= 0
        head = np.zeros(len(slots), dtype=np.int64)
        head[good] = _be32(u8, L.INDEX_HEADER_SIZE + (h[good] % slots[good]) * L.INDEX_SLOT_SIZE)
        ok &= good & ((head == count) if k == count else ((head >= k) & (head <= count)))
    return ok


def find_slots(data, count: int, hints: tuple = ()) -> int | None:
    """hashSlotMaxCount of a local index file of `count` items: a hinted (settings / default)
    geometry that fits the size and whose newest items sit in their chains, else the one slot
    count the size allows whose chains hold (checked on every item when the file is small)."""
    size = len(data)
    if count <= 0:
        return next((s for s, n in hints if L.local_index_size(s, n) == size), None)
    u8 = np.frombuffer(data, dtype=np.uint8)
    for s, n in hints:
        if L.local_index_size(s, n) == size and count < n and _heads_hold(u8, np.array([s]), count)[0]:
            return s
    room = size - L.INDEX_HEADER_SIZE - (count + 1) * L.LOCAL_INDEX_ITEM_SIZE
    if room < L.INDEX_SLOT_SIZE or (size - L.INDEX_HEADER_SIZE) % L.INDEX_SLOT_SIZE:
        return None
    rest = (size - L.INDEX_HEADER_SIZE) // L.INDEX_SLOT_SIZE   # 8 x slots + 32 x items: slots = rest (mod 4)
    cands: list[int] = []
    for first in range(rest % 4 or 4, room // L.INDEX_SLOT_SIZE + 1, 4 * CANDIDATES_PER_STEP):
        slots = np.arange(first, min(first + 4 * CANDIDATES_PER_STEP, room // L.INDEX_SLOT_SIZE + 1), 4,
                          dtype=np.int64)
        cands += slots[_heads_hold(u8, slots, count)].tolist()
        if len(cands) > MAX_GEOMETRY_TRIES:
            return None            # too many fit: the file does not say which
    if len(cands) > 1 and count <= FULL_WALK_MAX_ITEMS:
        cands = [s for s in cands if _reaches_every_item(data, s, count)]
    return cands[0] if len(cands) == 1 else None


def open_local_index(path: Path, hints: tuple = ()) -> LocalIndexFile:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < L.INDEX_HEADER_SIZE:
            raise StoreError("local tiered index file shorter than its 28-byte header", path=str(path))
        data = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    magic, _begin, end, used, count = L.INDEX_HEADER.unpack_from(data)
    if magic not in (L.BEGIN_MAGIC, L.END_MAGIC):
        data.close()
        raise StoreError(f"not a tiered index file (magic {magic:#x})", path=str(path), offset=0)
    return LocalIndexFile(path, magic, int(path.name), end, used, count, find_slots(data, count, hints), data)


def local_index_files(folder: Path, hints: tuple = ()) -> tuple[list[LocalIndexFile], list[str]]:
    """The numeric-named files of a tiered_index_file folder (the `compacting` folder is the
    broker's scratch space, deleted at its start), and what could not be read."""
    files, warnings = [], []
    try:
        entries = [e for e in os.scandir(folder) if e.is_file() and e.name.isdigit()]
    except OSError:
        return files, warnings
    for e in sorted(entries, key=lambda e: e.name):
        try:
            f = open_local_index(Path(e.path), hints)
        except (StoreError, OSError, ValueError) as err:
            warnings.append(f"local tiered index {e.path}: {err}")
            continue
        if f.slots is None and f.item_count > 0:
            warnings.append(f"local tiered index {e.path}: its slot count is neither the settings' "
                            "(tieredStoreIndexFileMaxHashSlotNum / MaxIndexNum) nor found from its chains; not searched")
        files.append(f)
    return files, warnings


def geometry_of(settings: dict, where) -> tuple:
    """((tieredStoreIndexFileMaxHashSlotNum, tieredStoreIndexFileMaxIndexNum),) when both are set."""
    try:
        return ((int(settings["tieredStoreIndexFileMaxHashSlotNum"]), int(settings["tieredStoreIndexFileMaxIndexNum"])),)
    except KeyError:
        return ()
    except (TypeError, ValueError):
        raise ConfigError("tieredStoreIndexFileMaxHashSlotNum / tieredStoreIndexFileMaxIndexNum must be numbers",
                          path=str(where)) from None
