"""CLI commands that open the store read-write: send, recover, rebuild; and `check`, which
verifies a store without writing (what recovery would cut, CQ/index consistency)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from .errors import StoreError


def register(add, commands: dict, write_commands: set) -> None:
    sp = add("send", "append a test message (opens the store read-write)")
    sp.add_argument("topic")
    sp.add_argument("--queue", type=int, default=None)
    sp.add_argument("--tags")
    sp.add_argument("--keys", help='space-separated keys, e.g. "K1 K2"')
    sp.add_argument("--prop", action="append", default=[], metavar="K=V")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--body", help="body text (UTF-8)")
    g.add_argument("--body-file", help="body bytes from a file ('-' = stdin)")
    sp.add_argument("--count", type=int, default=1, help="send this many (body gets a #n suffix)")
    sp.add_argument("--batch", action="store_true", help="send the --count messages as one batch")
    sp.add_argument("--delay", type=int, default=0, help="delay level (1..18)")
    sp.add_argument("--flag", type=int, default=0)
    sp.add_argument("--sync", action="store_true", help="SYNC_FLUSH: msync before acknowledging")
    commands["send"] = cmd_send
    write_commands.add("send")
    add("recover", "open read-write once: run RocketMQ's recovery and shut down cleanly")
    commands["recover"] = cmd_recover
    write_commands.add("recover")
    sp = add("rebuild", "rebuild ConsumeQueue and index files from the commitlog")
    sp.add_argument("--yes", action="store_true", help="do not ask")
    commands["rebuild"] = None  # handled before opening
    add("check", "verify a store without writing: torn tails, CRCs, CQ and index consistency")
    commands["check"] = cmd_check


def _props(pairs: list[str]) -> dict:
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise StoreError(f"--prop expects K=V, got {p!r}")
        out[k] = v
    return out


def cmd_send(store, args) -> int:
    if args.body_file:
        body = sys.stdin.buffer.read() if args.body_file == "-" else Path(args.body_file).read_bytes()
    else:
        body = (args.body or "").encode("utf-8")
    if args.sync:
        store.cfg.flushDiskType = "SYNC_FLUSH"
    props = _props(args.prop)
    bodies = [body if args.count == 1 else body + f" #{i}".encode() for i in range(args.count)]
    if args.batch:
        results = store.put_messages(args.topic, bodies, args.queue, args.tags, args.keys, props)
    else:
        results = [store.put_message(args.topic, b, args.queue, args.tags, args.keys, props, args.flag,
                                     delay_level=args.delay) for b in bodies]
    if args.json:
        out = {"status": "PUT_OK", "results": [r.to_json() for r in results]}
        out.update(results[0].to_json() if len(results) == 1 else {})
        print(json.dumps(out))
    else:
        for r in results:
            print(f"{r.status}  {r.topic}/{r.queueId}@{r.queueOffset}  commitlog offset {r.commitLogOffset}  "
                  f"msgId {r.msgId}  UNIQ_KEY {r.uniqKey}")
    return 0


def cmd_recover(store, args) -> int:
    r = store.recovery
    out = {"abnormal": r.abnormal, "startFile": r.commitlog.start_file, "endOffset": r.commitlog.end_offset,
           "stopReason": r.commitlog.stop_reason, "deletedCommitlogFiles": r.commitlog.deleted_files,
           "deletedIndexFiles": r.deleted_index_files, "truncatedQueues": r.truncated_queues,
           "dispatched": r.dispatched}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:22} {v}")
    return 0


def rebuild(root: Path, cfg) -> dict:
    """§12.7: drop CQs and index, then recovery re-dispatches every record."""
    from .message_store import MessageStore
    with MessageStore.open(root, cfg, read_only=True) as probe:  # validates the store first
        cfg = probe.cfg
    for d in ("consumequeue", "consumequeue_ext", "index"):
        shutil.rmtree(root / d, ignore_errors=True)
    with MessageStore.open(root, cfg, read_only=False) as s:
        return {"dispatched": s.recovery.dispatched, "queues": len(s.queues), "indexFiles": len(s.index.files)}


def cmd_check(store, args) -> int:
    from .check import check_store
    report = check_store(store)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{'OK' if report['ok'] else 'PROBLEMS'}: {report['messages']} messages, "
              f"{report['cqUnits']} CQ units, {report['indexEntries']} index entries checked")
        for p in report["problems"]:
            print(f"  {p['kind']}: {p['detail']} ({p['file']}, offset {p['offset']})")
    return 0 if report["ok"] else 1
