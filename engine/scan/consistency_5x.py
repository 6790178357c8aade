"""Consistency of the 5.x queues beside the classic CQ (engine.scan.consistency's rules):

- LMQ (multi-dispatch): every record whose INNER_MULTI_DISPATCH dispatch would write (5.3.3's
  rules: engine.format.lmq.dispatch_plan) must have a unit with its (PHYSICALOFFSET, TOTALSIZE,
  tagsCode) in each named LMQ's queue 0, and every LMQ unit must be such a record's. Units are
  matched by commitlog offset, not by the queue offset the record carries: RocketMQ's own
  counter runs ahead of the queue after a "[bug]" record, so the property is no oracle.
  Checked when the store has LMQ queues or enableMultiDispatch is set.
- BatchCQ: records of BatchCQ topics belong in batchconsumequeue/, not consumequeue/ (the
  classic check leaves them out); each 46-byte unit must point at a record of its topic and
  queue with the unit's size, tagsCode, store time, base (INNER_BASE or queueOffset) and batch
  size (INNER_NUM or 1), and the units' bases must follow each other (base + batchSize)."""
from __future__ import annotations

import os

from engine.format import lmq as L
from engine.scan.consistency import diff_row, unit_dict
from engine.store.batch_consume_queue import unit_problems


def lmq_active(store) -> bool:
    return bool(store.cfg.enableMultiDispatch) or any(t.startswith(L.LMQ_PREFIX) for t, _ in store.queues)


def lmq_targets(topic: str, props_raw: str | None, props: dict | None = None) -> list[str]:
    """The LMQ queues (queue 0) a record's dispatch writes a unit to."""
    if not props_raw or L.INNER_MULTI_DISPATCH not in props_raw:
        return []
    if props is None:
        from engine.format.properties import parse_properties
        props = parse_properties(props_raw)
    return lmq_targets_of(topic, props)


def lmq_targets_of(topic: str, props: dict | None) -> list[str]:
    if not props or L.INNER_MULTI_DISPATCH not in props:
        return []
    pairs, problem = L.dispatch_plan(topic, props, True, True)
    return [n for n, _ in pairs if L.is_lmq(n)] if problem is None else []


def lmq_problems(expected: dict, actual: dict, cq_size: int) -> list[dict]:
    """expected: {(lmq, phy): (size, tagsCode, commitLogOffset)}; actual: {(lmq, phy):
    (queueOffset, size, tagsCode, file, position)} (units at or above the commitlog min)."""
    rows = []
    for (lmq, phy), (size, tags, clo) in expected.items():
        a = actual.get((lmq, phy))
        if a is None:
            d = os.path.join("consumequeue", lmq, str(L.LMQ_QUEUE_ID))
            rows.append(diff_row(structure="consumequeue", problem="LMQ unit missing", file=d, topic=lmq,
                                 queueId=L.LMQ_QUEUE_ID, commitLogOffset=clo, expected=unit_dict(phy, size, tags)))
        elif (a[1], a[2]) != (size, tags):
            rows.append(diff_row(structure="consumequeue", problem="unit differs", file=a[3], fileOffset=a[4],
                                 topic=lmq, queueId=L.LMQ_QUEUE_ID, queueOffset=a[0], commitLogOffset=clo,
                                 expected=unit_dict(phy, size, tags), actual=unit_dict(phy, a[1], a[2])))
    for (lmq, phy), a in actual.items():
        if (lmq, phy) not in expected:
            rows.append(diff_row(structure="consumequeue", problem="unit without record", file=a[3], fileOffset=a[4],
                                 topic=lmq, queueId=L.LMQ_QUEUE_ID, queueOffset=a[0], commitLogOffset=phy,
                                 actual=unit_dict(phy, a[1], a[2])))
    return rows


def batch_problems(store, cl_min: int) -> list[dict]:
    """Every BatchCQ unit against the record it points at, and the bases' continuity."""
    return [diff_row(structure="batchconsumequeue", **p) for p in unit_problems(store, cl_min)]
