"""`rmqstore timers STORE`: the 5.x timer store, read-only.

* default: one object per timer message (its rmq_sys_wheel_timer records joined by UNIQ_KEY),
  sorted by fire time, with status (pending / delivered), the commitlog offsets of its wheel
  records and of its delivered copy, its timerlog units and wheel slot; `--from/--to` filter
  on the fire time, `--status` on the status;
* `--wheel`: the occupied wheel slots (`--at T`: what TimerWheel.getSlot answers for T);
* `--units`: every timerlog unit and blank record, file by file.

`--json` prints one JSON document: an array of messages, slots or units (`--at`: one object).
A store without a timer store is an error (exit 2)."""
from __future__ import annotations

import json
import sys

from engine.cli.output import CliError, cancel_on_sigint, cancelled, emit, fmt_time, safe, stderr_progress, table
from engine.format.text import parse_time
from engine.format.timer_layout import unit_kind
from engine.store.timer_store import DELIVERED, PENDING, unit_json
from engine.tasks import Cancelled, CancelToken, run


def register(add, commands: dict) -> None:
    sp = add("timers", "timer messages of a 5.x timer store (timerlog, timerwheel, timercheck)")
    sp.add_argument("--from", dest="fire_from", metavar="T", help="earliest fire time (ms or ISO-8601)")
    sp.add_argument("--to", dest="fire_to", metavar="T", help="latest fire time (ms or ISO-8601)")
    sp.add_argument("--status", choices=[PENDING, DELIVERED], help="only pending or only delivered messages")
    mode = sp.add_mutually_exclusive_group()
    mode.add_argument("--wheel", action="store_true", help="the occupied wheel slots instead")
    mode.add_argument("--units", action="store_true", help="every timerlog unit instead")
    sp.add_argument("--at", metavar="T", help="with --wheel: the slot TimerWheel.getSlot returns for time T")
    commands["timers"] = cmd_timers


def timer_store(store):
    ts = store.timer
    if ts is None:
        raise CliError(f"no timer store in {store.root} (no timerlog folder or timerwheel file; "
                       "5.x brokers write one with timerWheelEnable=true)")
    return ts


def cmd_timers(store, args) -> int:
    ts = timer_store(store)
    if args.at is not None and not args.wheel:
        raise CliError("--at goes with --wheel")
    rc = _wheel(ts, args) if args.wheel else _units(ts, args) if args.units else _messages(store, ts, args)
    if not args.json:
        for w in ts.warnings:
            print(f"warning: {safe(w)}", file=sys.stderr)
    return rc


def _messages(store, ts, args) -> int:
    lo = parse_time(args.fire_from) if args.fire_from else None
    hi = parse_time(args.fire_to) if args.fire_to else None
    cancel = CancelToken()
    try:
        with cancel_on_sigint(cancel):
            msgs = run(ts.messages_task(store, cancel), None if args.json else stderr_progress())
    except Cancelled:
        return cancelled("timers")
    chosen = [m for m in msgs if (args.status is None or m.status == args.status)
              and (lo is None or (m.fireTime is not None and m.fireTime >= lo))
              and (hi is None or (m.fireTime is not None and m.fireTime <= hi))]
    out = [m.to_json(ts.precision_ms, ts.slots) for m in chosen]
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    pending = sum(m.status == PENDING for m in msgs)
    head = [_summary_line(ts), f"{len(msgs)} timer messages: {pending} pending, {len(msgs) - pending} delivered"
            + (f"; {len(out)} shown" if len(out) != len(msgs) else "")]
    rows = [[fmt_time(o["fireTime"]), o["status"], o["stage"], o["rollTimes"], o["realTopic"] or "-",
             "-" if o["realQueueId"] is None else o["realQueueId"],
             " ".join(map(str, o["wheelCommitLogOffsets"])),
             "-" if o["deliveredCommitLogOffset"] is None else o["deliveredCommitLogOffset"],
             "-" if o["wheelSlot"] is None else o["wheelSlot"],
             " ".join(str(u["timerlogPos"]) for u in o["timerlogUnits"]) or "-"] for o in out]
    lines = table(rows, ["FIRE TIME", "STATUS", "STAGE", "ROLLS", "REAL TOPIC", "QID", "WHEEL RECORDS", "DELIVERED",
                         "SLOT", "TIMERLOG UNITS"]).split("\n")
    width = max(len(x) for x in lines)
    keys = ["UNIQ_KEY"] + [safe(o["uniqKey"] or "-") for o in out]      # last and whole: never clipped
    print("\n".join(head) + "\n\n" + "\n".join(f"{x.ljust(width)}  {k}" for x, k in zip(lines, keys)))
    return 0


def _summary_line(ts) -> str:
    s = ts.summary()
    cp = ts.checkpoint
    clock = f"read clock {fmt_time(cp.lastReadTimeMs)}" if cp is not None else "no timercheck"
    return (f"timer store: precision {s['precisionMs']} ms ({s['precisionSource']}); timerlog "
            f"{len(s['timerlogFiles'])} file(s) of {s['timerlogFileSize']} bytes, {s['timerlogUnits']} units; "
            f"wheel {s['wheelOccupiedSlots']} of {s['wheelSlots']} slots used; {clock}")


def _wheel(ts, args) -> int:
    if args.at is not None:
        t = parse_time(args.at)
        slot = ts.get_slot(t)
        if slot is None:
            raise CliError(f"no timerwheel file in {ts.root}")
        obj = {"queriedTimeMs": t, "slot": ts.slot_of(t), **slot.to_json()}
        emit(args, obj, f"getSlot({t}) = slot {obj['slot']}: " + (
            "empty" if slot.empty else f"time {fmt_time(slot.timeMs)} firstPos {slot.firstPos} "
                                       f"lastPos {slot.lastPos} num {slot.num}"))
        return 0
    slots = ts.wheel_slots()
    if args.json:
        print(json.dumps(slots))
        return 0
    rows = [[s["slot"], fmt_time(s["timeMs"]), s["firstPos"], s["lastPos"], s["num"], len(s["chain"]),
             "-" if s["processed"] is None else ("processed" if s["processed"] else "pending"),
             "" if s["current"] else "foreign lap"] for s in slots]
    print(_summary_line(ts) + "\n\n" + table(rows, ["SLOT", "TIME", "FIRSTPOS", "LASTPOS", "NUM", "CHAIN",
                                                    "STATE", "NOTE"]))
    return 0


def _units(ts, args) -> int:
    log = ts.timerlog
    out = []
    if log is not None:
        units = log.units
        for f in log.files:
            mine = units[(units["pos"] >= f.file_from_offset) & (units["pos"] < f.file_from_offset + f.file_size)]
            out.extend({"file": f.name, **unit_json(u, ts.precision_ms, ts.slots)} for u in mine)
            if f.blank_at is not None:
                out.append({"file": f.name, "timerlogPos": f.blank_at, "size": f.blank_size, "blank": True})
    if args.json:
        print(json.dumps(out))
        return 0
    rows = [[u["file"], u["timerlogPos"], "blank" if u.get("blank") else unit_kind(u["magic"]), u["size"],
             u.get("prevPos", ""), fmt_time(u["currWriteTimeMs"]) if "currWriteTimeMs" in u else "",
             u.get("delayTime", ""), u.get("offsetPy", ""), u.get("sizePy", ""), u.get("slot", "")] for u in out]
    print(safe(_summary_line(ts)) + "\n\n" + table(rows, ["FILE", "POS", "KIND", "SIZE", "PREVPOS", "WRITE TIME",
                                                          "DELAY", "OFFSETPY", "SIZEPY", "SLOT"]))
    return 0
