"""Rows of the message table, read from one ConsumeQueue (no Qt).

A row is what the table shows for one queue offset: the CQ unit (commitlog offset, size,
tagsCode) and, from the commitlog record, store time, tags, keys, msgId and a preview made
from the first bytes of the body. Rows never keep whole bodies.

The records come from the engine's getMessage pages (MessageStore.get_message: the compiled
page reader when it is built), one page per block of rows, and so does the verdict on each
unit: a unit the page skipped carries the engine's reason (filler, expired, invalid); the
GUI does not classify units itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from engine import WHY_EXPIRED, WHY_FILLER, WHY_INVALID, Message

from ..body_format import preview
from ..consts import COMPRESSED_FLAG

OK, FILLER, EXPIRED, INVALID = "ok", "filler", "expired", "invalid"
_STATUS = {WHY_FILLER: FILLER, WHY_EXPIRED: EXPIRED, WHY_INVALID: INVALID}
_PREVIEW = {FILLER: "(filler unit: the queue starts later)",
            EXPIRED: "(record expired: its commitlog file was deleted)",
            INVALID: "(no valid record of this size at this commitlog offset)"}


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


def row_of(q: int, phy: int, size: int, tags_code: int, msg: Message | None, why: str = WHY_INVALID) -> QueueRow:
    """The row of unit q: the message the engine read there, or the engine's reason `why`
    (a getMessage skip reason) when it read none."""
    if msg is None:
        status = _STATUS.get(why, INVALID)
        return QueueRow(q, phy, size, tags_code, status, preview=_PREVIEW[status])
    return QueueRow(q, phy, size, tags_code, OK, msg.storeTimestamp, msg.tags or "", msg.keys or "",
                    msg.msgId, msg.uniqKey or "", len(msg.body),
                    preview(msg.body, compressed=bool(msg.sysFlag & COMPRESSED_FLAG)))


def page_rows(store, topic: str, queue_id: int, q: int, end: int, res=None
              ) -> tuple[list[tuple[QueueRow, Message | None]], int]:
    """(rows with their messages, next queue offset) for units [q, end) from one getMessage
    page (`res`: one the caller read from q already). The page takes the units in order and
    names every unit it skipped, so its messages are the units it did not skip, in order."""
    cq = store.find_queue(topic, queue_id)
    if cq is None or q >= end:
        return [], q
    if res is None:
        res = store.get_message(topic, queue_id, q, end - q)
    nxt = min(res.nextBeginOffset, end) if res.nextBeginOffset > q else q
    units = cq.units(q, nxt)
    phys, sizes, codes = units["commitLogOffset"].tolist(), units["size"].tolist(), units["tagsCode"].tolist()
    skipped = dict(res.skipped)
    msgs = res.messages
    out, i = [], 0
    for k in range(len(phys)):
        why = skipped.get(q + k)
        m = None
        if why is None and i < len(msgs):
            m = msgs[i]
            i += 1
        out.append((row_of(q + k, phys[k], sizes[k], codes[k], m, why or WHY_INVALID), m))
    return out, q + len(phys)


def iter_rows_with_messages(store, topic: str, queue_id: int, start: int, end: int, page: int = 1024
                            ) -> Iterator[tuple[QueueRow, Message | None]]:
    """(row, message) for queue offsets [start, end) clamped to the queue, a page at a time."""
    cq = store.find_queue(topic, queue_id)
    if cq is None:
        return
    q = max(start, cq.min_offset)
    end = min(end, cq.max_offset)
    while q < end:
        rows, nxt = page_rows(store, topic, queue_id, q, min(end, q + page))
        if nxt <= q:
            return
        yield from rows
        q = nxt


def read_rows(store, topic: str, queue_id: int, start: int, end: int) -> list[QueueRow]:
    """Rows for queue offsets [start, end) clamped to the queue (a block of the table)."""
    return [r for r, _ in iter_rows_with_messages(store, topic, queue_id, start, end)]


def read_message(store, phy: int, size: int) -> Message | None:
    """The message of an ok row (the detail view): the record at `phy`, if it is one of `size`."""
    if size <= 0:
        return None
    m = store.look_message_by_offset(phy)
    return m if m is not None and m.storeSize == size else None
