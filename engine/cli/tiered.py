"""The CLI over a tier folder (engine.store.tiered): `info`, `get`, `query-key` and `check`
answer from the tier's segments; the other commands say they need a store."""
from __future__ import annotations

import json
from pathlib import Path

from engine.cli.output import CliError, fmt_time, table
from engine.store import tiered

TIER_COMMANDS = {"info", "get", "cq", "query-key", "check", "msgid", "uniq", "time"}


def take_tier_settings(args) -> dict:
    """The --set keys that choose within a tier (brokerName, brokerClusterName, ...) are not
    MessageStoreConfig settings: taken out of args.set before the store settings are read."""
    keep, out = [], {}
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if sep and key.strip() in tiered.TIER_KEYS:
            out[key.strip()] = value.strip()
        else:
            keep.append(item)
    if hasattr(args, "set"):
        args.set = keep
    return out


def run_if_tier(args, settings: dict, commands: dict) -> int | None:
    """Run the command on a tier folder; None when args.store is not one."""
    store_arg = getattr(args, "store", None)
    if store_arg is None or not tiered.is_tier_folder(Path(store_arg)):
        if settings.get("brokerName") or settings.get("brokerClusterName"):
            raise CliError("--set brokerName / brokerClusterName choose a broker within a tier folder; "
                           f"{store_arg} is not one")
        return None
    if args.command not in TIER_COMMANDS:
        raise CliError(f"`{args.command}` needs a store; a tier folder answers {', '.join(sorted(TIER_COMMANDS))}")
    with tiered.TieredStore.open(store_arg, settings) as store:
        if args.command == "info":
            return cmd_tier_info(store, args)
        if args.command == "check":
            return cmd_tier_check(store, args)
        return commands[args.command](store, args)


def cmd_tier_info(store, args) -> int:
    info = store.info()
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return 0
    others = [f"{b['cluster']}/{b['broker']}" for b in info["brokers"] if b["broker"] != store.broker
              or b["cluster"] != store.cluster]
    out = [f"tier       {info['root']}  (read-only; RocketMQ tiered storage, POSIX provider)",
           f"broker     {store.cluster}/{store.broker}  at {info['folder']}"
           + (f"  (also in the tier: {', '.join(others)})" if others else ""),
           f"metadata   {info['metadata'] or 'none found beside the tier (topic ids from the index items)'}", "",
           table([[q["topic"], q["queueId"], q["minOffset"], q["maxOffset"], q["maxOffset"] - q["minOffset"],
                   f"[{q['commitLogMinOffset']}, {q['commitLogMaxOffset']})", q["commitLogSegments"],
                   q["consumeQueueSegments"], "" if q["topicId"] is None else q["topicId"]] for q in info["queues"]],
                 ["TOPIC", "QUEUE", "MIN", "MAX", "COUNT", "TIERED COMMITLOG", "CL SEGS", "CQ SEGS", "TOPICID"]), "",
           table([[("local " if f.get("local") else "") + f["name"], fmt_time(f["beginTimestamp"]),
                   fmt_time(f["endTimestamp"]), f["hashSlotMaxCount"], f["hashSlotCount"], f["indexItemCount"],
                   "yes" if f["sealed"] else "no"]
                  for f in info["indexFiles"] + info["localIndexFiles"]],
                 ["INDEX SEGMENT", "BEGIN", "END", "SLOTS", "SLOTS USED", "ITEMS", "SEALED"])]
    out += [f"warning: {w}" for w in info["warnings"]]
    print("\n".join(out))
    return 0


def cmd_tier_check(store, args) -> int:
    from engine.store.tiered_check import check_tier
    report = check_tier(store)
    if args.json:
        print(json.dumps(report))
        return 0 if report["ok"] else 1
    print(f"{'OK' if report['ok'] else 'PROBLEMS'}: {report['messages']} messages, {report['cqUnits']} CQ units, "
          f"{report['indexEntries']} index items checked"
          + (f"; {report['problemCount']} problems" if report["problemCount"] else ""))
    for p in report["problems"]:
        print(f"  {p['kind']}: {p['detail']} ({_where(p)})")
    for p in report["notes"]:
        print(f"  note: {p['kind']}: {p['detail']} ({_where(p)})")
    return 0 if report["ok"] else 1


def _where(p: dict) -> str:
    return p["file"] + (f", offset {p['offset']}" if p["offset"] is not None else "")


PLUGIN = "TieredMessageStore"   # messageStorePlugIn=org.apache.rocketmq.tieredstore.TieredMessageStore


def tier_settings_of(args, settings: dict) -> dict:
    """The tier keys in force: --config's broker.conf (only when it plugs in TieredMessageStore,
    or names tieredStoreFilePath), then --set over them."""
    from engine.config import read_properties
    path = getattr(args, "sub_config", None) or getattr(args, "config", None)
    out = {}
    if path:
        props = read_properties(path)
        if PLUGIN in props.get("messageStorePlugIn", "") or props.get("tieredStoreFilePath"):
            out = {k: props[k] for k in tiered.TIER_KEYS if props.get(k)}
    out.update(settings)
    return out


def run_with_tier(store, args, settings: dict, commands: dict) -> int:
    """The command on the store, with its tier when tieredStoreFilePath is given: reads as
    TieredMessageStore's (local first, then the tier as tieredStorageLevel says)."""
    if args.command not in ("get", "query-key", "info"):  # writes (send, ...) and the rest: the local store
        return commands[args.command](store, args)
    settings = tier_settings_of(args, settings)
    path = settings.get("tieredStoreFilePath")
    if not path:
        return commands[args.command](store, args)
    from engine.store.tiered_view import StoreWithTier, parse_level
    try:
        level = parse_level(settings.get("tieredStorageLevel"))
    except ValueError as e:
        raise CliError(str(e)) from None
    view = StoreWithTier(store, tiered.TieredStore.open(path, settings), level)
    rc = commands[args.command](view, args)
    if args.command == "get" and not args.json and view.last_source:
        print(f"(read from the {view.last_source})")
    if args.command == "info" and not args.json:
        print_where(view.info()["tier"])
    return rc


def print_where(t: dict) -> None:
    """Which queue offsets live where: the local store's, the tier's, and what a read takes
    from the tier at this tieredStorageLevel."""
    print(f"\ntier       {t['cluster']}/{t['broker']} at {t['folder']}  (tieredStorageLevel={t['tieredStorageLevel']})")
    print(table([[q["topic"], q["queueId"], "" if q["local"] is None else f"[{q['local'][0]}, {q['local'][1]})",
                  f"[{q['tier'][0]}, {q['tier'][1]})",
                  "none" if q["readFromTier"] is None else f"[{q['readFromTier'][0]}, {q['readFromTier'][1]})"]
                 for q in t["queues"]], ["TOPIC", "QUEUE", "LOCAL OFFSETS", "TIER OFFSETS", "READ FROM THE TIER"]))


def open_scan_member(path: str, cfg, args, settings: dict):
    """A store for `rmqstore scan`: a tier folder on its own, a store with its tier when
    tieredStoreFilePath is given (--set or --config), else the store as scans open it."""
    from engine.scan.api import open_scan_store
    if tiered.is_tier_folder(Path(path)):
        return tiered.TieredStore.open(path, settings)
    if settings.get("brokerName") or settings.get("brokerClusterName"):
        raise CliError("--set brokerName / brokerClusterName choose a broker within a tier folder; "
                       f"{path} is not one")
    store = open_scan_store(path, cfg)
    settings = tier_settings_of(args, settings)
    if not settings.get("tieredStoreFilePath"):
        return store
    from engine.store.tiered_view import StoreWithTier, parse_level
    try:
        return StoreWithTier(store, tiered.TieredStore.open(settings["tieredStoreFilePath"], settings),
                             parse_level(settings.get("tieredStorageLevel")))
    except BaseException:
        store.close()
        raise
