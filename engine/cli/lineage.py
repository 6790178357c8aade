"""`rmqstore lineage STORE (--offset N | --msgid ID | --uniq-key K | --key K --topic T) [--json]`:
the whole life of the message a handle points at, from any of its records (a DLQ copy, an op
message, a delivered copy): its records in write order with their roles, its final state, and
per consumer group whether it was consumed (engine/analysis/lineage.py, docs/formats/lineage.md).

`--json`: {"lifecycles": [{"kind", "originalOffset", "finalState", "records": [...], "consumption",
"decodedBody"}]}: decodedBody is the body the message was sent with (its first record's), decoded
as `get` decodes one (the same --proto-desc/--proto-type, --avro-schema, --body-format; --decoded
prints it below a life in human output).
Exit code 0 when the handle found a life, 1 when it found none, 2 on an error."""
from __future__ import annotations

from engine.analysis.lineage import lineage
from engine.cli.output import (CliError, add_body_options, body_schemas, decode_into, decoded_lines, emit, fmt_time,
                               nonneg, safe, table)


def register(add, commands: dict) -> None:
    sp = add("lineage", "a message's whole life (delays, retries, DLQ, transactions, resends) from any of its records")
    h = sp.add_mutually_exclusive_group(required=True)
    h.add_argument("--offset", type=nonneg, metavar="N", help="commitlog offset of any of its records")
    h.add_argument("--msgid", metavar="ID", help="an offset msgId or a UNIQ_KEY")
    h.add_argument("--uniq-key", dest="uniq", metavar="K", help="the producer's UNIQ_KEY")
    h.add_argument("--key", metavar="K", help="one of its KEYS (with --topic)")
    sp.add_argument("--topic", metavar="T", help="with --key: the topic the record was stored under")
    add_body_options(sp)
    commands["lineage"] = cmd_lineage


def cmd_lineage(store, args) -> int:
    if args.key is not None and not args.topic:
        raise CliError("--key needs --topic (keys are indexed per topic)")
    if args.topic and args.key is None:
        raise CliError("--topic goes with --key")
    schemas = body_schemas(args)
    lives = lineage(store, offset=args.offset, msgid=args.msgid, uniq=args.uniq, key=args.key, topic=args.topic)
    shown = []   # per life: ([DecodedBody], [message]) of its first record (retry and DLQ copies carry its body)
    for life in lives:
        m = store.look_message_by_offset(life["originalOffset"]) if args.json or args.decoded else None
        shown.append((decode_into(args, [life], [m], schemas), [m]) if m is not None else ([], []))
    emit(args, {"lifecycles": lives}, "\n\n".join(
        human(life) + ("\n" + decoded_lines(*s) if s[0] else "") for life, s in zip(lives, shown))
        or "no message found")
    return 0 if lives else 1


def human(life: dict) -> str:
    head = (f"{life['kind']} life of {safe(life['topic'])} (uniqKey {life['uniqKey'] or '-'}, keys "
            f"{safe(life['keys'] or '-')}): {life['finalState']}")
    extra = [f"{k} {life[k] if k != 'dueTimestamp' else fmt_time(life[k])}"
             for k in ("group", "retries", "delayLevel", "dueTimestamp", "txAction") if life.get(k) is not None]
    rows = []
    for r in life["records"]:
        note = []
        for k in ("attempt", "group", "delayLevel", "txAction"):
            if r.get(k) is not None:
                note.append(f"{k} {r[k]}")
        if r.get("dueTimestamp"):
            note.append(f"due {fmt_time(r['dueTimestamp'])}")
        if r.get("lmq"):
            note.append("lmq " + ",".join(q["queue"] for q in r["lmq"]))
        rows.append([r["commitLogOffset"], r["role"], safe(r["topic"]), r["queueId"], r["queueOffset"],
                     fmt_time(r["storeTimestamp"]), " ".join(note)])
    cons = [f"  {safe(g)}: " + {True: "consumed", False: "not consumed", None: "-"}[c["consumed"]]
            for g, c in life["consumption"].items()]
    return "\n".join([head] + (["  " + ", ".join(extra)] if extra else [])
                     + [table(rows, ["PHYOFFSET", "ROLE", "TOPIC", "QUEUE", "QOFFSET", "STORED", ""])]
                     + (["consumption:"] + cons if cons else []))
