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
from engine.format.body_decode import decoded_preview
from engine.format.inner_batch import InnerBatchError, decode_inner

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
    innerIndex: int = -1     # BatchCQ: the message's position in its record's inner batch
    batchSize: int = 0       # BatchCQ: inner messages in that record

    @property
    def ok(self) -> bool:
        return self.status == OK


def row_of(q: int, phy: int, size: int, tags_code: int, msg: Message | None, why: str = WHY_INVALID) -> QueueRow:
    """The row of unit q: the message the engine read there, or the engine's reason `why`
    (a getMessage skip reason) when it read none."""
    if msg is None:
        status = _STATUS.get(why, INVALID)
        return QueueRow(q, phy, size, tags_code, status, preview=_PREVIEW[status])
    compressed = bool(msg.sysFlag & COMPRESSED_FLAG)
    text = preview(msg.body, compressed=compressed)
    if compressed or text.startswith("hex: "):   # a binary body: its decoded value when it has one
        text = decoded_preview(msg.body, msg.sysFlag) or text
    return QueueRow(q, phy, size, tags_code, OK, msg.storeTimestamp, msg.tags or "", msg.keys or "",
                    msg.msgId, msg.uniqKey or "", len(msg.body), text)


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
        if store.find_batch_queue(topic, queue_id) is not None:
            for lo in range(start, end, page):
                yield from batch_rows_with_messages(store, topic, queue_id, lo, min(end, lo + page))
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
    if store.find_queue(topic, queue_id) is None and store.find_batch_queue(topic, queue_id) is not None:
        return batch_rows(store, topic, queue_id, start, end)
    return [r for r, _ in iter_rows_with_messages(store, topic, queue_id, start, end)]


def batch_rows(store, topic: str, queue_id: int, start: int, end: int) -> list[QueueRow]:
    """A BatchCQ queue: one row per inner message (queue offsets count inner messages; each
    has its own UNIQ_KEY, keys, tags and body, which is what a search for a lost message
    needs), with the record that holds it (commitlog offset, size, store time, msgId)."""
    return [r for r, _ in batch_rows_with_messages(store, topic, queue_id, start, end)]


def batch_rows_with_messages(store, topic: str, queue_id: int, start: int, end: int) -> list[tuple]:
    """(row, message) pairs of a BatchCQ queue: the message is the inner message (an engine
    InnerMessage: tags, keys, UNIQ_KEY, properties, body), or the record for a plain one."""
    out = []
    for b in store.inner_messages(topic, queue_id, start, end):
        u, rec = b.unit, b.record
        i, n = b.queueOffset - u["msgBaseOffset"], u["batchSize"]
        if rec is None:
            status = EXPIRED if b.why == WHY_EXPIRED else INVALID
            out.append((QueueRow(b.queueOffset, u["commitLogOffset"], u["size"], u["tagsCode"], status,
                                 preview=_PREVIEW[status], innerIndex=i, batchSize=n), None))
            continue
        body = b.body
        tag = f"[{i + 1}/{n}] " if b.inner is not None else ""
        out.append((QueueRow(b.queueOffset, u["commitLogOffset"], u["size"], u["tagsCode"], OK, rec.storeTimestamp,
                             b.tags or "", b.keys or "", rec.msgId, b.uniqKey or "", len(body),
                             tag + (b.why or preview(body)), i if b.inner is not None else -1, n),
                    b.inner if b.inner is not None else (rec if not b.why else None)))
    return out


def read_message(store, phy: int, size: int, topic: str | None = None, queue_id: int | None = None,
                 queue_offset: int | None = None) -> Message | None:
    """The message of an ok row (the detail view): the record at `phy`, if it is one of `size`
    (a tier's commit-log offsets are per queue: there the row's queue says which log)."""
    if size <= 0:
        return None
    in_queue = getattr(store, "message_in_queue", None)
    m = (in_queue(topic, queue_id, phy, size, queue_offset) if in_queue and topic is not None
         else store.look_message_by_offset(phy))
    return m if m is not None and m.storeSize == size else None


def inner_at(m: Message, index: int):
    """The inner message `index` of an inner-batch record (None for -1 or a damaged batch)."""
    if index < 0:
        return None
    try:
        inner = decode_inner(m.body, m.queueOffset)
    except InnerBatchError:
        return None
    return inner[index] if index < len(inner) else None
