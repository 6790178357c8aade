"""`rmqstore`: the command line over engine.MessageStore.

Human output by default (aligned columns, local times with the zone shown); `--json` for
scripts (shapes are a contract: fields may be added, never renamed). Every failure is one
line on stderr naming the file and offset involved, exit code 2."""
from __future__ import annotations

import argparse
import json
import os
import sys

from engine import __version__
from engine.config import StoreConfig, load_store_config
from engine.errors import StoreError
from engine.store.index_file import LONG_MAX
from engine.store.message_store import MessageStore
from engine.store.page_reader import set_aside_damage
from engine.format.msgid import looks_like_msg_id
from engine.format.text import parse_time, preview  # the GUI's rules too: one definition each
from engine.cli.output import (EXIT_CANCELLED, EXIT_ERROR, CliError, OneLineParser, add_body_options,  # noqa: F401
                               body_schemas, cancelled, decode_into, decoded_lines, emit, fmt_time, nonneg, positive,
                               safe, stderr_progress, table)
from engine.tasks import Cancelled


def message_rows(msgs) -> str:
    rows = [[m.topic, m.queueId, m.queueOffset, m.commitLogOffset, fmt_time(m.storeTimestamp), m.tags or "",
             m.keys or "", m.storeSize, m.msgId, preview(m.body)] for m in msgs]
    return table(rows, ["TOPIC", "QUEUE", "QOFFSET", "PHYOFFSET", "STORED", "TAGS", "KEYS", "SIZE", "MSGID", "BODY"])


def with_dledger(store: MessageStore, out: dict, msgs) -> dict:
    """A DLedger store's messages gain `dledger`: the entry around each (index, term, pos, ...)."""
    for j, m in zip(out["messages"], msgs):
        e = store.dledger_entry(m.commitLogOffset)   # None: not a DLedger log
        if e is not None:
            j["dledger"] = e
    return out


def _files_kind(d: dict | None, n: int) -> str:
    if not d:
        return ""
    old = len(d.get("oldCommitlogFiles") or [])
    return f"({old} old commitlog + {n - old} DLedger data) " if old else "DLedger data "


def dledger_line(d: dict) -> str:
    cp = d["checkpoint"] or {}
    return (f"dledger    {d['folder']} (selfId {d['selfId']})  term {d['currTerm']}  voteLeader {d['voteLeader'] or '-'}  "
            f"entries [{d['ledgerBeginIndex']}, {d['ledgerEndIndex']}]  committed {d['committedIndex']}  "
            f"checkpoint endIndex {cp.get('endIndex')} committedIndex {cp.get('committedIndex')}"
            + (f"\n           mixed: {len(d['oldCommitlogFiles'])} old commitlog file(s) below offset "
               f"{d['dividedCommitlogOffset']}, DLedger from there" if d.get("oldCommitlogFiles") else ""))


# ---- commands --------------------------------------------------------------------------
def cmd_info(store: MessageStore, args) -> int:
    from engine.cli.compaction import mark_info
    info = mark_info(store, store.info())  # compacted topics marked
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return 0
    cl = info["commitlog"]
    out = [f"store      {info['root']}  ({'read-only' if store.read_only else 'read-write'})",
           f"abort      {'present: the last run did not shut down cleanly' if info['abort'] else 'absent'}",
           f"commitlog  offsets [{cl['minOffset']}, {cl['maxOffset']})  in {len(cl['files'])} "
           f"{_files_kind(info.get('dledger'), len(cl['files']))}file(s) of {store.cfg.mappedFileSizeCommitLog} bytes",
           *([dledger_line(info["dledger"])] if info.get("dledger") else []),
           f"generation {generation_line(info['generation'])}",
           f"checkpoint physic {fmt_time(info['checkpoint']['physicMsgTimestamp'])}  "
           f"logics {fmt_time(info['checkpoint']['logicsMsgTimestamp'])}  "
           f"index {fmt_time(info['checkpoint']['indexMsgTimestamp'])}", ""]
    cqs = info.get("consumeQueueStore") or {}
    if cqs.get("storeType") == "defaultRocksDB":
        out[-1:-1] = [f"consume queues in RocksDB (storeType=defaultRocksDB, read-only) at {cqs['path']}; "
                      f"dispatch committed up to commitlog offset {cqs['committedMaxPhyOffset']}"]
    out.append(table([[q["topic"], q["queueId"], q["minOffset"], q["maxOffset"], q["maxOffset"] - q["minOffset"],
                       ("LMQ" if q.get("lmq") else q.get("cqType", "SimpleCQ")) + (" COMPACTED" if q.get("compacted") else "")]
                      for q in info["queues"]], ["TOPIC", "QUEUE", "MIN", "MAX", "COUNT", "KIND"]))
    out.append("")
    out.append(table([[f["name"], fmt_time(f["beginTimestamp"]), fmt_time(f["endTimestamp"]), f["beginPhyOffset"],
                       f["endPhyOffset"], f["hashSlotCount"], f["indexCount"]] for f in info["indexFiles"]],
                     ["INDEX FILE", "BEGIN", "END", "BEGIN PHY", "END PHY", "SLOTS USED", "INDEX COUNT"]))
    for w in info["warnings"]:
        out.append(f"warning: {w}")
    print("\n".join(out))
    return 0


def generation_line(gen: dict) -> str:
    """`4.x  (the first sign that decided it; N more)`: the full evidence is in --json."""
    signs = [e["detail"] for e in gen["evidence"] if e["points"] == gen["version"]]
    more = f"; {len(signs) - 1} more sign(s)" if len(signs) > 1 else ""
    return f"{gen['version']}  ({signs[0] + more if signs else 'nothing decides it'})" + \
        ("  [signs of both generations]" if gen.get("mixed") else "")


def cmd_dump(store: MessageStore, args) -> int:
    count = 0
    for off, r in store.walk(args.__dict__["from"], None):
        if r.message is None:
            if r.status.value not in ("end-of-file",):
                print(f"warning: {r.status.value} record at commitlog offset {off}: {r.reason}", file=sys.stderr)
            continue
        m = r.message
        if args.json:
            j = m.to_json()
            e = store.dledger_entry(m.commitLogOffset)   # None: not a DLedger log
            if e is not None:
                j["dledger"] = e
            print(json.dumps(j, ensure_ascii=False))
        else:
            print(f"{m.commitLogOffset:>12}  {safe(m.topic)}/{m.queueId}@{m.queueOffset}  {fmt_time(m.storeTimestamp)}  "
                  f"size={m.storeSize} tags={safe(m.tags or '')} keys={safe(m.keys or '')} msgId={m.msgId}  "
                  f"{preview(m.body)}")
        count += 1
        if args.count and count >= args.count:
            break
    return 0


def require_queue(store: MessageStore, topic: str, queue: int) -> None:
    """A topic or queue the store does not have is an error a user should see, not an empty
    queue (RocketMQ itself answers NO_MESSAGE_IN_QUEUE for both)."""
    if store.queue_bounds(topic, queue) is not None:
        return
    queues = sorted({q for t, q in list(store.queues) + list(store.batch_queues) if t == topic})
    if not queues:
        raise CliError(f"no topic {safe(topic)!r} in {store.root}")
    raise CliError(f"topic {safe(topic)!r} has no queue {queue} (its queues: {', '.join(map(str, queues))})")


def cmd_get(store: MessageStore, args) -> int:
    """--broker answers what the broker answers, also for a queue the store never created
    (getMessage's findConsumeQueue creates it empty: NO_MESSAGE_IN_QUEUE, next 0); without
    --broker such a queue is an error that names the queues the topic has."""
    from engine.cli.compaction import compacted_get  # cleanup.policy=COMPACTION: the compacted view
    if (rc := compacted_get(store, args, message_rows)) is not None:
        return rc
    absent = store.queue_bounds(args.topic, args.queue) is None
    if not args.broker:
        require_queue(store, args.topic, args.queue)
    schemas = body_schemas(args)
    r = store.get_message(args.topic, args.queue, args.offset, args.count, broker=args.broker)
    if args.broker:
        r = set_aside_damage(r, store.find_queue(args.topic, args.queue), args.offset)
    rows = inner_rows(r.innerMessages) if r.innerMessages is not None else message_rows(r.messages)
    out = r.to_json() if not args.json else get_json(store, r, args.offset, args, schemas)
    decoded = decode_into(args, out["messages"], r.messages, schemas) if args.json or args.decoded else []
    human = (f"status {r.status}  next {r.nextBeginOffset}  queue offsets [{r.minOffset}, {r.maxOffset})\n"
             + (f"(the store has no queue {safe(args.topic)}/{args.queue}: the broker creates it empty on a "
                "pull and answers as above)\n" if absent else "")
             + rows + "".join(f"\nskipped queue offset {q}: {why}" for q, why in r.skipped)
             + "".join(f"\ndamaged (the broker hands it out as is): {d['reason']}" for d in r.damaged or ())
             + ("\n" + decoded_lines(decoded, r.messages) if decoded else ""))
    emit(args, with_dledger(store, out, r.messages), human)
    return 0


def get_json(store: MessageStore, r, offset: int, args=None, schemas=None) -> dict:
    """get --json: the page, plus each record's LMQ dispatch (positions from the LMQ CQs) and,
    on a BatchCQ queue, the inner message at the requested offset with its record (and its
    body decoded)."""
    j = r.to_json()
    for m, mj in zip(r.messages, j["messages"]):
        d = store.lmq_dispatch(m)
        if d is not None:
            mj["lmqDispatch"] = d
    if r.innerMessages is not None:
        at = [b for b in r.innerMessages if b.queueOffset == offset]
        j["innerMessage"] = at[0].to_json() if at else None
        if at:
            from engine.format.body_decode import decode_body
            j["innerMessage"]["decodedBody"] = decode_body(
                at[0].body, 0, schemas, getattr(args, "body_format", None)).to_json()
    return j


def inner_rows(batched) -> str:
    rows = [[b.queueOffset, b.unit["msgBaseOffset"], b.unit["batchSize"], b.unit["commitLogOffset"],
             fmt_time(b.record.storeTimestamp) if b.record else "", b.tags or "", b.keys or "", b.uniqKey or "",
             preview(b.body) if b.record else b.why] for b in batched]
    return table(rows, ["QOFFSET", "BASE", "BATCH", "PHYOFFSET", "STORED", "TAGS", "KEYS", "UNIQ_KEY", "BODY"])


def cmd_cq(store: MessageStore, args) -> int:
    require_queue(store, args.topic, args.queue)
    if (args.__dict__["from"] or 0) < 0 or args.count < 0:
        raise CliError("--from and --count must not be negative")
    cq = store.find_queue(args.topic, args.queue)
    if cq is None:  # a BatchCQ queue: its 46-byte units, from the one containing --from
        units = store.batch_units(args.topic, args.queue, args.__dict__["from"], args.count)
        if not args.json:
            print(table([[u["msgBaseOffset"], u["batchSize"], u["commitLogOffset"], u["size"], u["tagsCode"],
                          fmt_time(u["storeTimestamp"]), u["compactedOffset"]] for u in units],
                        ["BASE", "BATCH", "PHYOFFSET", "SIZE", "TAGSCODE", "STORED", "COMPACTED"]))
        for u in units if args.json else ():
            print(json.dumps(u))
        return 0
    start = cq.min_offset if args.__dict__["from"] is None else args.__dict__["from"]
    end = cq.max_offset if not args.count else min(cq.max_offset, start + args.count)
    if not args.json:
        print(f"{'OFFSET':>10}  {'PHYOFFSET':>12}  {'SIZE':>10}  TAGSCODE")
    step = 65536
    timed = getattr(cq, "units_with_times", None)  # RocksDB units keep their store time
    for a in range(start, end, step):
        units = timed(a, min(end, a + step)) if timed else cq.units(a, min(end, a + step))
        for i, (phy, size, tags, *t) in enumerate(units.tolist()):
            if args.json:
                print(json.dumps({"offset": a + i, "commitLogOffset": phy, "phyOffset": phy, "size": size, "tagsCode": tags,
                                  **({"storeTimestamp": t[0]} if t else {})}))
            else:
                print(f"{a + i:>10}  {phy:>12}  {size:>10}  {tags}" + (f"  {fmt_time(t[0])}" if t else ""))
    return 0


def cmd_query_key(store: MessageStore, args) -> int:
    begin = parse_time(args.begin) if args.begin else 0
    end = parse_time(args.end) if args.end else LONG_MAX
    if args.raw and args.max == 0:  # --max 0 means "no cap" with or without --raw
        r = store.query_message(args.topic, args.key, begin, end, LONG_MAX, raw=True, cap=0)
    else:
        r = store.query_message(args.topic, args.key, begin, end, args.max, raw=args.raw)
    out = r.to_json()
    decoded = decode_into(args, out["messages"], r.messages, body_schemas(args)) if args.json or args.decoded else []
    human = message_rows(r.messages) + ("\n(truncated: more matches exist; raise --max or use --max 0)"
                                        if r.truncated else "")
    if r.index_lost:  # a crashed DLedger store: hits only in index files RocketMQ's restart deletes
        human += (f"\nINDEX LOST BY ROCKETMQ at {', '.join(map(str, sorted(r.index_lost)))}: RocketMQ's restart "
                  "deletes the index file holding them and never re-indexes them (--raw answers as RocketMQ does)")
    if decoded:
        human += "\n" + decoded_lines(decoded, r.messages)
    emit(args, with_dledger(store, out, r.messages), human)
    return 0


def cmd_msgid(store: MessageStore, args) -> int:
    if not looks_like_msg_id(args.id.strip()):
        raise CliError(f"malformed msgId {safe(args.id)!r}: an offset msgId or a UNIQ_KEY is 32 hex digits "
                       "(IPv4 hosts) or 56 (IPv6)")
    kind, msgs = store.lookup_id(args.id)
    if not msgs and store.batch_queues:  # an inner message of a 5.x BatchCQ batch (never indexed)
        inner = store.find_inner(args.id.strip().upper())
        if inner:
            emit(args, {"kind": "inner", "messages": [b.record.to_json() for b in inner],
                        "innerMessages": [b.to_json() for b in inner]},
                 f"{args.id} is the UNIQ_KEY of an inner message of a batch\n" + inner_rows(inner))
            return 0
    out = {"kind": kind, "messages": [m.to_json() for m in msgs]}
    decoded = decode_into(args, out["messages"], msgs, body_schemas(args)) if args.json or args.decoded else []
    emit(args, with_dledger(store, out, msgs),
         f"{args.id} is {'an offset msgId' if kind == 'offset' else 'a UNIQ_KEY' if kind == 'uniq' else 'not found'}\n"
         + message_rows(msgs) + ("\n" + decoded_lines(decoded, msgs) if decoded else ""))
    return 0 if msgs else 1


def cmd_uniq(store: MessageStore, args) -> int:
    msgs = store.query_uniq(args.topic, args.key)
    out = {"kind": "uniq", "messages": [m.to_json() for m in msgs]}
    decoded = decode_into(args, out["messages"], msgs, body_schemas(args)) if args.json or args.decoded else []
    emit(args, with_dledger(store, out, msgs), message_rows(msgs) + ("\n" + decoded_lines(decoded, msgs) if decoded else ""))
    return 0 if msgs else 1


def cmd_time(store: MessageStore, args) -> int:
    """--broker answers getOffsetInQueueByTime also for a queue the store never created (its
    findConsumeQueue creates it empty: 0); without it such a queue is an error, as for get."""
    ts = parse_time(args.time)
    if not args.broker:
        require_queue(store, args.topic, args.queue)
    try:
        off, rule, why = store.offset_by_time(args.topic, args.queue, ts, args.rule, args.boundary)
    except ValueError as e:
        raise CliError(str(e)) from None
    by = "given" if why == "flag" else f"the store's generation, {store.generation().version}"
    emit(args, {"offset": off, "timestamp": ts, "rule": rule, "ruleSource": why},
         f"{off}    (queue offset for {fmt_time(ts)})\nrule       {rule} ({by})")
    return 0


COMMANDS = {"info": cmd_info, "dump": cmd_dump, "get": cmd_get, "cq": cmd_cq, "query-key": cmd_query_key,
            "msgid": cmd_msgid, "uniq": cmd_uniq, "time": cmd_time}
WRITE_COMMANDS: set[str] = set()
PREPARE: dict = {}  # command -> check(args, cfg) run before a store is opened read-write
SCAN_BROKEN: list[str] = []  # why engine.scan could not be imported


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--config", dest="sub_config", metavar="FILE", help="broker.conf-style store settings")
    common.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a store setting by its RocketMQ name, e.g. mappedFileSizeCommitLog=65536")
    p = argparse.ArgumentParser(prog="rmqstore", description="Read and write Apache RocketMQ message stores.")
    p.add_argument("--version", action="version", version=f"rmqstore {__version__}")
    p.add_argument("--config", metavar="FILE", help="broker.conf-style store settings")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)

    def add(name, help_):
        sp = sub.add_parser(name, help=help_, parents=[common])
        sp.add_argument("store", metavar="STORE", help="store root folder")
        return sp

    add("info", "store overview: config, files, queues, index files")
    sp = add("dump", "every record in commitlog order (JSON Lines with --json)")
    sp.add_argument("--from", type=nonneg, default=None, metavar="PHYOFFSET")
    sp.add_argument("--count", type=nonneg, default=0, help="0 = all")
    sp = add("get", "messages of a queue from a queue offset")
    _topic_queue(sp)
    sp.add_argument("offset", type=int, help="queue offset of the first message (0 = the queue's start)")
    sp.add_argument("--count", type=positive, default=32, help="messages to read (default 32)")
    sp.add_argument("--broker", action="store_true", help="exactly the broker's page (stops at CQ file end)")
    add_body_options(sp)
    sp = add("cq", "ConsumeQueue units (JSON Lines with --json)")
    _topic_queue(sp)
    sp.add_argument("--from", type=nonneg, default=None, metavar="O", help="first queue offset (default: the queue's min)")
    sp.add_argument("--count", type=nonneg, default=0, help="units to show (0 = all)")
    sp = add("query-key", "messages by key within a time range")
    sp.add_argument("topic", help="topic the message was stored under")
    sp.add_argument("key", help="one of the message's KEYS, or its UNIQ_KEY")
    sp.add_argument("--begin", metavar="TIME", help=f"earliest store time: {TIME_FORMATS}")
    sp.add_argument("--end", metavar="TIME", help=f"latest store time: {TIME_FORMATS}")
    sp.add_argument("--max", type=nonneg, default=64, help="cap (0 = none)")
    sp.add_argument("--raw", action="store_true", help="RocketMQ's own hash-only answer")
    add_body_options(sp)
    sp = add("msgid", "look up an offset msgId or a UNIQ_KEY")
    sp.add_argument("id", help="an offset msgId or a UNIQ_KEY: 32 hex digits (IPv4 hosts) or 56 (IPv6)")
    add_body_options(sp)
    sp = add("uniq", "messages by UNIQ_KEY")
    sp.add_argument("topic", help="topic the message was stored under")
    sp.add_argument("key", help="the UNIQ_KEY (32 or 56 hex digits)")
    add_body_options(sp)
    sp = add("time", "queue offset for a store time")
    _topic_queue(sp)
    sp.add_argument("time", help=f"store time: {TIME_FORMATS}")
    sp.add_argument("--boundary", choices=["lower", "upper"], default=None,
                    help="5.x rule: first message at or after T (lower) / last at or before T (upper)")
    sp.add_argument("--rule", choices=["4.9", "5.x"], default=None,
                    help="time-lookup rule (default: the store's generation; 4.9 for 4.x and unknown stores)")
    sp.add_argument("--broker", action="store_true",
                    help="answer as the broker also for a queue the store never created (0)")
    _add_optional_commands(sub, add)
    return p


TIME_FORMATS = "epoch milliseconds, or ISO-8601 such as 2026-11-25T08:00:00+08:00 (local zone if none)"


def _topic_queue(sp) -> None:
    sp.add_argument("topic", help="topic name")
    sp.add_argument("queue", type=nonneg, help="queue id (0, 1, ...)")


def _add_optional_commands(sub, add) -> None:
    """Commands living in other modules register here (write path, internals, scans)."""
    try:
        from engine.cli import write as cli_write
        cli_write.register(add, COMMANDS, WRITE_COMMANDS, PREPARE)
    except ImportError:
        pass
    from engine.cli import internals as cli_internals
    cli_internals.register(add, COMMANDS)
    from engine.cli import diff as cli_diff
    cli_diff.register(add, COMMANDS)
    from engine.cli import timers as cli_timers
    cli_timers.register(add, COMMANDS)
    from engine.cli import keys as cli_keys
    cli_keys.register(add, COMMANDS)
    from engine.cli import lineage as cli_lineage
    cli_lineage.register(add, COMMANDS)
    try:
        from engine.cli import scan as scan_cli
    except Exception as e:  # noqa: BLE001 - reported when `scan` is asked for, not hidden
        broken = f"{type(e).__name__}: {e}"
        sp = sub.add_parser("scan", help=f"whole-store scans (unavailable: {broken})")
        sp.add_argument("rest", nargs=argparse.REMAINDER)
        SCAN_BROKEN.append(broken)
        COMMANDS["scan"] = None
        return
    scan_cli.add_scan_parser(sub)
    COMMANDS["scan"] = None  # runs without opening the store here


def load_config(args) -> StoreConfig | None:
    return load_store_config(getattr(args, "sub_config", None) or args.config, getattr(args, "set", None))


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):   # a text a store holds that is not UTF-8 (a lone surrogate
        if hasattr(stream, "reconfigure"):    # from a decoder) is written as its \uXXXX escape: the
            stream.reconfigure(errors="backslashreplace")   # output stays UTF-8, and JSON stays JSON
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "scan":
            if SCAN_BROKEN:
                raise CliError(f"scans are unavailable: engine.scan failed to import ({SCAN_BROKEN[0]})")
            from engine.cli import scan as scan_cli
            return scan_cli.run_scan(args)
        from engine.cli import tiered as cli_tiered  # a tier folder opens on its own
        tier_settings = cli_tiered.take_tier_settings(args)
        cfg = load_config(args)
        tier_rc = cli_tiered.run_if_tier(args, tier_settings, COMMANDS)
        if tier_rc is not None:
            return tier_rc
        if args.command == "recover":
            from pathlib import Path
            from engine.cli.write import print_recover_result, recover
            try:
                out = recover(Path(args.store), cfg, args.dry_run)
            except Cancelled:
                return cancelled("recover", "the next read-write open (or recover) runs recovery again")
            return print_recover_result(args, out)
        if args.command == "init":
            from pathlib import Path
            from engine.cli.write import init_store
            out = init_store(Path(args.store), cfg)
            emit(args, out, f"new store in {out['store']}: commitlog files of {out['mappedFileSizeCommitLog']} bytes, "
                            f"CQ files of {out['mappedFileSizeConsumeQueue']} bytes, index files of "
                            f"{out['maxHashSlotNum']} slots / {out['maxIndexNum']} entries")
            return 0
        if args.command == "demo":
            from engine.cli.write import run_demo
            return run_demo(args, cfg)
        if args.command == "rebuild":
            from pathlib import Path
            from engine.cli.write import confirm_rebuild, rebuild
            confirm_rebuild(Path(args.store), args.yes)
            try:
                out = rebuild(Path(args.store), cfg, args.overwrite_geometry)
            except Cancelled as e:
                return cancelled("rebuild", e.message)
            emit(args, out, "rebuilt: " + ", ".join(f"{k} {v}" for k, v in out.items()))
            return 0
        read_only = args.command not in WRITE_COMMANDS
        if args.command in PREPARE:
            PREPARE[args.command](args, cfg)
        with MessageStore.open(args.store, config=cfg, read_only=read_only,
                               tolerant=args.command == "check") as store:
            return cli_tiered.run_with_tier(store, args, tier_settings, COMMANDS)  # the store alone without one
    except Cancelled:   # (each command that runs a task says what its cancel left; this is the net)
        return cancelled(args.command)
    except (StoreError, CliError) as e:
        print(f"rmqstore: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:   # Ctrl-C outside a task's cancel_on_sigint, or pressed twice
        return cancelled(args.command)
    except (OSError, ValueError) as e:
        print(f"rmqstore: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # noqa: BLE001 - a bug: still one line for the user (RMQSTORE_DEBUG=1 shows it)
        if os.environ.get("RMQSTORE_DEBUG"):
            raise
        print(f"rmqstore: internal error: {type(e).__name__}: {e} (set RMQSTORE_DEBUG=1 for details)",
              file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
