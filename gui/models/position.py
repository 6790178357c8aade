"""Where a message lives on disk (no Qt): its commitlog file and offset in it, its
ConsumeQueue unit, and the index entries that point at it."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine import Message
from engine.format.cq_unit import CQ_UNIT_SIZE
from engine.format.inner_batch import INNER_BATCH_FLAG, InnerBatchError, decode_inner
from engine.format.javahash import index_key, index_key_hash


@dataclass
class IndexHit:
    file: str
    entry: int
    slot: int
    key: str
    timestamp: int


@dataclass
class Position:
    commitlog_file: str | None
    offset_in_file: int | None
    cq_file: str | None = None
    cq_position: int | None = None
    cq_unit: tuple[int, int, int] | None = None   # commitLogOffset, size, tagsCode
    cq_matches: bool = False
    index_hits: list[IndexHit] = field(default_factory=list)
    index_keys_tried: list[str] = field(default_factory=list)
    lmq: dict | None = None            # store.lmq_dispatch: the LMQ queues the record reached
    batch_unit: dict | None = None     # BatchCQ: the 46-byte unit holding the record
    inner: list | None = None          # BatchCQ: the record's inner messages (InnerMessage)
    inner_error: str = ""
    dledger: dict | None = None   # a DLedger store: the entry around the message (index, term, pos, ...)


def commitlog_location(store, offset: int) -> tuple[str | None, int | None]:
    f = store.commitlog.queue.find(offset)
    if f is None:
        return None, None
    return f.path.name, offset - f.file_from_offset


def cq_location(store, m: Message) -> tuple[str | None, int | None, tuple | None, bool]:
    cq = store.find_queue(m.topic, m.queueId)
    if cq is None or not (cq.min_offset <= m.queueOffset < cq.max_offset):
        return None, None, None, False
    f = cq.file_for(m.queueOffset)
    unit = cq.unit(m.queueOffset)
    pos = m.queueOffset * CQ_UNIT_SIZE - f.file_from_offset if f is not None else None
    return (f.path.name if f is not None else None), pos, unit, bool(unit and unit[0] == m.commitLogOffset)


def index_hits(store, m: Message) -> tuple[list[IndexHit], list[str]]:
    """Entries of every index file whose chain for one of the message's keys (KEYS tokens,
    UNIQ_KEY) holds this commitlog offset: RocketMQ's own walk, no full scan."""
    keys = list(dict.fromkeys(m.key_list + ([m.uniqKey] if m.uniqKey else [])))
    hits: list[IndexHit] = []
    files = store.index.files if store.index is not None else []
    for key in keys:
        k = index_key(m.topic, key)
        h = index_key_hash(k)
        for f in files:
            slot = f.slot_of(k)
            for step in f.chain(slot):
                if step.commitLogOffset == m.commitLogOffset and step.keyHash == h:
                    hits.append(IndexHit(f.name, step.index, slot, key, step.timestamp))
    return hits, keys


def batch_location(store, m: Message, p: Position) -> None:
    """A record of a BatchCQ topic: its unit and its inner messages."""
    if store.find_batch_queue(m.topic, m.queueId) is None and not m.sysFlag & INNER_BATCH_FLAG:
        return
    units = store.batch_units(m.topic, m.queueId, m.queueOffset, 1)
    p.batch_unit = units[0] if units and units[0]["commitLogOffset"] == m.commitLogOffset else None
    if m.sysFlag & INNER_BATCH_FLAG:
        try:
            p.inner = decode_inner(m.body, m.queueOffset)
        except InnerBatchError as e:
            p.inner_error = str(e)


def locate(store, m: Message, with_index: bool = True) -> Position:
    name, off = commitlog_location(store, m.commitLogOffset)
    p = Position(name, off)
    p.cq_file, p.cq_position, p.cq_unit, p.cq_matches = cq_location(store, m)
    p.lmq = store.lmq_dispatch(m)
    batch_location(store, m, p)
    p.dledger = store.dledger_entry(m.commitLogOffset)   # None: not a DLedger log
    if with_index:
        p.index_hits, p.index_keys_tried = index_hits(store, m)
    return p
