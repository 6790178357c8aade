"""LMQ multi-dispatch in the store: the put side (INNER_MULTI_QUEUE_OFFSET assigned under the
append lock), the dispatch side (a unit in each LMQ's ConsumeQueue) and the read side (which
LMQ queues a record reached, and where).

LMQ positions are read from the ConsumeQueues, never trusted from the property: RocketMQ
5.3.3 advances its LMQ counter even when dispatch drops a record (the "[bug]" length
mismatch), after which later units sit at the file's write position, not at the offset the
record carries. `positions` flags every such disagreement."""
from __future__ import annotations

import numpy as np

from engine.format import lmq as L
from engine.format.cq_unit import CQ_UNIT_SIZE


# ---- read side ------------------------------------------------------------------------------
def cq_offset_of(cq, phy: int) -> int | None:
    """The queue offset of the unit of `cq` pointing at commitlog offset `phy` (units are in
    commitlog order: a binary search per file, newest file first)."""
    if cq is None:
        return None
    if not cq.queue.files:  # a queue without files (RocksDB): its units in one read
        col = cq.units(cq.min_offset, cq.max_offset)["commitLogOffset"]
        i = int(np.searchsorted(col, phy, side="left"))
        return cq.min_offset + i if i < len(col) and int(col[i]) == phy else None
    for f in reversed(cq.queue.files):
        n = f.wrote_position // CQ_UNIT_SIZE
        if n <= 0:
            continue
        col = cq.view(f)["commitLogOffset"][:n]
        if int(col[0]) > phy:
            continue
        i = int(np.searchsorted(col, phy, side="left"))
        if i < n and int(col[i]) == phy:
            return f.file_from_offset // CQ_UNIT_SIZE + i
        return None
    return None


def positions(store, msg) -> dict | None:
    """What the record's LMQ dispatch produced, or None for a record without
    INNER_MULTI_DISPATCH: {"queues": [{lmqName, queueId, queueOffset (from the CQ, None when no
    unit points at the record), propertyOffset (the record's own element), dispatched,
    mismatch}], "problem": None | "[bug]" | "unparsable", "mismatch": bool}."""
    props = msg.properties
    names_s = props.get(L.INNER_MULTI_DISPATCH)
    if not names_s:
        return None
    names = L.java_split(names_s)
    offs = L.java_split(props.get(L.INNER_MULTI_QUEUE_OFFSET) or "")
    _, problem = L.dispatch_plan(msg.topic, props, True, True)
    if problem is None and len(names) != len(offs):
        problem = "[bug]"
    queues = []
    for k, name in enumerate(names):
        qid = L.queue_id_for(name, msg.queueId, True)
        elem = offs[k] if k < len(offs) else None
        try:
            prop_off = int(elem) if elem not in (None, "") else None
        except ValueError:
            prop_off = None
        at = cq_offset_of(store.find_queue(name, qid), msg.commitLogOffset) if "/" not in name else None
        queues.append({"lmqName": name, "isLmq": L.is_lmq(name), "queueId": qid, "queueOffset": at,
                       "propertyOffset": prop_off, "dispatched": at is not None,
                       "mismatch": at is not None and prop_off is not None and at != prop_off})
    return {"queues": queues, "problem": problem,
            "mismatch": any(q["mismatch"] for q in queues)}


# ---- put side -------------------------------------------------------------------------------
def wrap(writer, topic: str, props: dict) -> list[str] | None:
    """LmqDispatch.wrapLmqDispatch, under the append lock: sets INNER_MULTI_QUEUE_OFFSET in
    `props` from the LMQ counters; returns the names whose counters advance after the append
    (None when the record is not LMQ-dispatched)."""
    cfg = writer.cfg
    if not L.needs_wrap(topic, props):
        return None
    enable = bool(getattr(cfg, "enableLmq", False))
    names_s = props[L.INNER_MULTI_DISPATCH]
    props[L.INNER_MULTI_QUEUE_OFFSET] = L.wrap_offsets(names_s, lambda n: lmq_queue_offset(writer, n), enable)
    return L.lmq_names(names_s, enable)


def lmq_queue_offset(writer, name: str) -> int:
    """getLmqQueueOffset: the writer's counter (rebuilt from the CQ's max on open)."""
    return writer.queue_offsets.get((name, L.LMQ_QUEUE_ID), 0)


def advance(writer, names: list[str]) -> None:
    """LmqDispatch.updateLmqOffsets: +1 per name, whatever dispatch later does."""
    for n in names:
        k = (n, L.LMQ_QUEUE_ID)
        writer.queue_offsets[k] = writer.queue_offsets.get(k, 0) + 1


# ---- dispatch side --------------------------------------------------------------------------
def detect_multi_dispatch(cfg) -> None:
    """The store was written by a multi-dispatch broker (its LMQ queues, or a record carrying the
    INNER_MULTI_QUEUE_OFFSET only such a broker writes): dispatch as it did, unless a setting
    says otherwise."""
    for k in ("enableLmq", "enableMultiDispatch"):
        if k not in cfg.explicit and not getattr(cfg, k):
            setattr(cfg, k, True)
            cfg.detected.add(k)


def dispatch(store, msg) -> int:
    """ConsumeQueue.multiDispatchLmqQueue for one dispatched record: units written. A length
    mismatch dispatches none ("[bug]"); an unparsable offset (RocketMQ retries the record
    forever) stops at that name, with a warning instead of a hang."""
    cfg = store.cfg
    if not getattr(cfg, "enableMultiDispatch", False):
        if L.INNER_MULTI_QUEUE_OFFSET not in msg.properties:
            return 0
        detect_multi_dispatch(cfg)   # (the queues that told it may all be lost: RocksDB's after a crash)
        if not cfg.enableMultiDispatch:
            return 0
    enable = bool(getattr(cfg, "enableLmq", False))
    pairs, problem = L.dispatch_plan(msg.topic, msg.properties, True, enable)
    if problem == "unparsable":
        store.warnings.append(f"record at commitlog offset {msg.commitLogOffset}: INNER_MULTI_QUEUE_OFFSET "
                              f"{msg.properties.get(L.INNER_MULTI_QUEUE_OFFSET)!r} has an element that is not a "
                              "number; RocketMQ's dispatch would retry it forever; the LMQ units after it are not written")
    wrote = 0
    for name, off in pairs:
        qid = L.queue_id_for(name, msg.queueId, enable)
        cq = store.queue_for_write(name, qid)
        if cq is not None and cq.put_unit(msg.physicalOffsetField, msg.storeSize, msg.tagsCode, int(off),
                                          append_when_ahead=True, store_timestamp=msg.storeTimestamp):
            wrote += 1
    return wrote


def unit_offsets_of(cq, start: int, end: int, phys: list[int]) -> list[int]:
    """messageQueueOffset of a page read from units [start, end): the queue offset of the unit
    each returned record came from (the records are the page's, in unit order)."""
    units = cq.units(start, end)["commitLogOffset"].tolist()
    out, i = [], 0
    for k, p in enumerate(units):
        if i < len(phys) and p == phys[i]:
            out.append(start + k)
            i += 1
    return out
