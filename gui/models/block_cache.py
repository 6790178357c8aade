"""A sparse, bounded cache of fixed-size row blocks (DB4S RowCache, ViTables leaf buffer).

Keys are absolute positions (for a queue: queue offsets); block b holds positions
[b*size, (b+1)*size). A block may be shorter than `size` at the ends of the range. Blocks
are evicted least-recently-used first. Blocks being loaded are marked pending so a burst of
paint requests asks for each block once. No Qt: the table model drives it."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence


class BlockCache:
    def __init__(self, block_size: int = 128, max_blocks: int = 64):
        if block_size <= 0 or max_blocks <= 0:
            raise ValueError("block_size and max_blocks must be positive")
        self.block_size = block_size
        self.max_blocks = max_blocks
        self._blocks: OrderedDict[int, tuple[int, Sequence[Any]]] = OrderedDict()
        self._pending: set[int] = set()

    def __len__(self) -> int:
        return len(self._blocks)

    def block_of(self, key: int) -> int:
        return key // self.block_size

    def block_range(self, block: int) -> tuple[int, int]:
        return block * self.block_size, (block + 1) * self.block_size

    def get(self, key: int) -> Any | None:
        b = key // self.block_size
        entry = self._blocks.get(b)
        if entry is None:
            return None
        self._blocks.move_to_end(b)
        start, rows = entry
        i = key - start
        return rows[i] if 0 <= i < len(rows) else None

    def has_block(self, block: int) -> bool:
        return block in self._blocks

    def is_pending(self, block: int) -> bool:
        return block in self._pending

    def missing(self, first_key: int, last_key: int) -> list[int]:
        """Blocks covering [first_key, last_key] that are neither cached nor pending."""
        if last_key < first_key:
            return []
        lo, hi = first_key // self.block_size, last_key // self.block_size
        return [b for b in range(lo, hi + 1) if b not in self._blocks and b not in self._pending]

    def mark_pending(self, block: int) -> None:
        self._pending.add(block)

    def cancel_pending(self, block: int) -> None:
        self._pending.discard(block)

    def put(self, block: int, start: int, rows: Sequence[Any]) -> None:
        """Store the rows of `block`, the first of which is at position `start`."""
        lo, hi = self.block_range(block)
        if not (lo <= start and start + len(rows) <= hi):
            raise ValueError(f"rows [{start}, {start + len(rows)}) do not fit block {block} [{lo}, {hi})")
        self._pending.discard(block)
        self._blocks[block] = (start, rows)
        self._blocks.move_to_end(block)
        while len(self._blocks) > self.max_blocks:
            self._blocks.popitem(last=False)

    def blocks(self) -> list[int]:
        return sorted(self._blocks)

    def loaded_span(self) -> tuple[int, int] | None:
        """(first, last + 1) positions of the contiguous run around the newest block, or None."""
        if not self._blocks:
            return None
        newest = next(reversed(self._blocks))
        lo = hi = newest
        while lo - 1 in self._blocks:
            lo -= 1
        while hi + 1 in self._blocks:
            hi += 1
        start = self._blocks[lo][0]
        end_start, end_rows = self._blocks[hi]
        return start, end_start + len(end_rows)

    def clear(self) -> None:
        self._blocks.clear()
        self._pending.clear()

    def drop_block(self, block: int) -> None:
        self._blocks.pop(block, None)
        self._pending.discard(block)
