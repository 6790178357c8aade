"""Rows of the message table, read from one ConsumeQueue (no Qt).

A row is what the table shows for one queue offset: the CQ unit (commitlog offset, size,
tagsCode) and, from the commitlog record, store time, tags, keys, msgId and a preview made
from the first bytes of the body. Rows never keep whole bodies."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from engine import Message

from ..body_format import preview
from ..consts import COMPRESSED_FLAG

OK, FILLER, EXPIRED, INVALID = "ok", "filler", "expired", "invalid"
FILLER_SIZE = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class QueueRow:
    queueOffset: int
    commitLogOffset: int
    size: int
    tagsCode: int
    status: str = OK
    storeTimestamp: int = -1
    tags: str = ""
    keys: str = ""
    msgId: str = ""
    uniqKey: str = ""
    bodyLength: int = 0
    preview: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK


def row_of(q: int, phy: int, size: int, tags_code: int, msg: Message | None, cl_min: int) -> QueueRow:
    if phy == 0 and size == FILLER_SIZE:
        return QueueRow(q, phy, size, tags_code, FILLER, preview="(filler unit: the queue starts later)")
    if msg is None:
        if phy < cl_min:
            return QueueRow(q, phy, size, tags_code, EXPIRED, preview="(record expired: its commitlog file was deleted)")
        return QueueRow(q, phy, size, tags_code, INVALID, preview="(no valid record of this size at this commitlog offset)")
    return QueueRow(q, phy, size, tags_code, OK, msg.storeTimestamp, msg.tags or "", msg.keys or "",
                    msg.msgId, msg.uniqKey or "", len(msg.body),
                    preview(msg.body, compressed=bool(msg.sysFlag & COMPRESSED_FLAG)))


def iter_units(store, topic: str, queue_id: int, start: int, end: int, chunk: int = 4096
               ) -> Iterator[tuple[int, int, int, int]]:
    """(queue offset, phyOffset, size, tagsCode) for every unit in [start, end), in chunks."""
    cq = store.find_queue(topic, queue_id)
    if cq is None:
        return
    q = max(start, cq.min_offset)
    end = min(end, cq.max_offset)
    while q < end:
        units = cq.units(q, min(end, q + chunk))
        if len(units) == 0:
            return
        phys = units["phyOffset"].tolist()
        sizes = units["size"].tolist()
        codes = units["tagsCode"].tolist()
        for i in range(len(phys)):
            yield q + i, phys[i], sizes[i], codes[i]
        q += len(phys)


def read_message(store, phy: int, size: int) -> Message | None:
    cl = store.commitlog
    if phy < cl.min_offset or (phy == 0 and size == FILLER_SIZE) or size <= 0:
        return None
    return cl.get_message(phy, size)


def read_rows(store, topic: str, queue_id: int, start: int, end: int) -> list[QueueRow]:
    """Rows for queue offsets [start, end) clamped to the queue: one CQ view slice plus one
    commitlog read per unit."""
    cl_min = store.commitlog.min_offset
    return [row_of(q, phy, size, code, read_message(store, phy, size), cl_min)
            for q, phy, size, code in iter_units(store, topic, queue_id, start, end)]


def iter_rows_with_messages(store, topic: str, queue_id: int, start: int, end: int
                            ) -> Iterator[tuple[QueueRow, Message | None]]:
    cl_min = store.commitlog.min_offset
    for q, phy, size, code in iter_units(store, topic, queue_id, start, end):
        m = read_message(store, phy, size)
        yield row_of(q, phy, size, code, m, cl_min), m
