"""Compacted topics in the CLI: `get` answers with the compacted view the broker serves
(`--broker`) or with both the view and the full queue, labelled; `info` marks the topics;
`check` verifies each compaction log against its compactionCq."""
from __future__ import annotations

import json

from engine.cli.output import emit, safe
from engine.store.compaction import compacted_topic, compacted_view, compaction_of, mark_compacted
from engine.store.compaction_check import check_compaction


def compacted_get(store, args, message_rows) -> int | None:
    """`get` on a compacted topic; None for any other topic (the normal path answers):
    engine.store.compaction.compacted_view."""
    if not compacted_topic(store, args.topic):
        return None
    view, where = compacted_view(store, args.topic, args.queue, args.offset, args.count, broker=args.broker)
    head = (f"compacted view of {safe(args.topic)}/{args.queue} (cleanup.policy=COMPACTION: what the broker's "
            f"getMessage serves, {where})\n"
            f"status {view.status}  next {view.nextBeginOffset}  queue offsets [{view.minOffset}, {view.maxOffset})\n"
            + message_rows(view.messages) + "".join(f"\nskipped queue offset {q}: {w}" for q, w in view.skipped))
    vj = dict(view.to_json(), compacted=True, source=where)
    if args.broker:
        emit(args, vj, head)
        return 0
    full = store.get_message(args.topic, args.queue, args.offset, args.count)
    fj = full.to_json()
    fj["compactedView"] = vj
    emit(args, fj, head + f"\n\nfull queue (the ConsumeQueue: every message put, before compaction)\n"
         f"status {full.status}  next {full.nextBeginOffset}  queue offsets [{full.minOffset}, {full.maxOffset})\n"
         + message_rows(full.messages))
    return 0


def mark_info(store, info: dict) -> dict:
    """info's queues of compacted topics gain `compacted`, the info `compaction`."""
    cs = compaction_of(store)
    if cs is None:
        return info
    mark_compacted(store, info.get("queues", []))
    info["compaction"] = cs.info()
    return info


def check_report(store, report: dict) -> dict:
    """check's report with the compaction logs verified against their CQs."""
    cs = compaction_of(store)
    if cs is None:
        return report
    extra = check_compaction(cs, store)
    report["compactionUnits"] = extra["units"]
    report["problems"] = report["problems"] + extra["problems"]
    report["problemCount"] = report["problemCount"] + len(extra["problems"])
    report["notes"] = report.get("notes", []) + extra["notes"]
    report["ok"] = report["ok"] and not extra["problems"]
    return report


def dumps(d: dict) -> str:
    return json.dumps(d, ensure_ascii=False)
