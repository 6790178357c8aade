"""CLI commands that open the store read-write: send, recover, rebuild; and `check`, which
verifies a store without writing (what recovery would cut, CQ/index consistency)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.errors import StoreError
from engine.format.text import render_template as template


def register(add, commands: dict, write_commands: set, prepare: dict) -> None:
    sp = add("init", "make a new, empty store in STORE (a missing or empty folder); sizes from --set/--config")
    commands["init"] = None  # handled before opening
    sp = add("send", "append a test message (opens the store read-write)")
    sp.add_argument("topic", help="topic name ([%%|a-zA-Z0-9_-], at most 127 characters)")
    sp.add_argument("--queue", type=int, default=None, help="queue id (default: round robin over the topic's queues)")
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
    sp.add_argument("--flush", choices=["sync", "async"], default=None,
                    help="sync: msync before each acknowledgement (default: the store's flushDiskType)")
    commands["send"] = cmd_send
    write_commands.add("send")
    prepare["send"] = prepare_send
    sp = add("recover", "run RocketMQ's recovery (normal or abnormal, as the abort file says) and report it")
    sp.add_argument("--dry-run", action="store_true", help="report what recovery would do; change nothing")
    commands["recover"] = None  # handled before opening (it may be a dry run)
    sp = add("demo", "create a realistic demo store in STORE (a new folder)")
    sp.add_argument("--messages", type=int, default=12000)
    sp.add_argument("--seed", type=int, default=7, help="the same seed writes the same messages (times aside)")
    sp.add_argument("--progress", action="store_true",
                    help="progress on stderr (count, rate, ETA) even when stderr is not a terminal")
    commands["demo"] = None  # handled before opening
    sp = add("rebuild", "rebuild ConsumeQueue and index files from the commitlog")
    sp.add_argument("--yes", action="store_true", help="do not ask")
    sp.add_argument("--overwrite-geometry", action="store_true",
                    help="--set sizes for the rebuilt files (mappedFileSizeConsumeQueue, maxHashSlotNum, maxIndexNum) "
                         "that differ from the ConsumeQueue or index files there: replace those files with files of "
                         "the new sizes (without this flag rebuild refuses them and changes nothing)")
    commands["rebuild"] = None  # handled before opening
    sp = add("check", "verify a store without writing: torn tails, CRCs, CQ and index consistency")
    sp.add_argument("--progress", action="store_true",
                    help="progress on stderr (phase, percent, MB/s) even when stderr is not a terminal")
    commands["check"] = cmd_check


def run_demo(args, cfg) -> int:
    """`rmqstore demo STORE`: progress on stderr when it is a terminal or --progress is given,
    never on stdout (which carries only the result, or its JSON)."""
    from engine.cli.output import CliError, cancel_on_sigint, cancelled, emit, rate_progress
    from engine.store.demo import demo_task
    from engine.tasks import CancelToken, Cancelled, run
    root = Path(args.store)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise CliError(f"{root} exists and is not an empty folder")
    if args.messages < 0:
        raise CliError(f"--messages must be 0 or more, got {args.messages}")
    if args.seed < 0:
        raise CliError(f"--seed must be 0 or more, got {args.seed}")
    show = args.progress or sys.stderr.isatty()
    cancel = CancelToken()   # Ctrl-C cancels between two chunks of messages
    try:
        with cancel_on_sigint(cancel):
            run(demo_task(root, args.messages, args.seed, config=cfg, cancel=cancel), rate_progress() if show else None)
    except Cancelled:
        return cancelled("demo", f"nothing is left of the store it was writing in {root}")
    emit(args, {"store": str(root), "messages": args.messages, "seed": args.seed},
         f"demo store written to {root}")
    return 0


def _props(pairs: list[str]) -> dict:
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise StoreError(f"--prop expects K=V, got {p!r}")
        out[k] = v
    return out


def init_store(root: Path, cfg) -> dict:
    """A new, empty store: the folders, checkpoint, lock and config files RocketMQ makes at its
    first start, plus STORE_SETTINGS_FILE with the sizes (no data file exists until a message)."""
    from engine.config import STORE_SETTINGS_FILE, StoreConfig
    from engine.store.message_store import MessageStore
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise StoreError("exists and is not an empty folder; init makes new stores only", path=str(root))
    cfg = cfg or StoreConfig()
    outside = {"storePathRootDir", "storePathCommitLog"} & cfg.explicit
    if outside:
        raise StoreError(f"{', '.join(sorted(outside))} would put files outside the store; not allowed here")
    cfg.validate()
    root.mkdir(parents=True, exist_ok=True)
    (root / STORE_SETTINGS_FILE).write_text(cfg.store_settings_text(), encoding="utf-8")
    with MessageStore.create(root, cfg) as store:
        sizes = {k: getattr(store.cfg, k) for k in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
                                                    "maxHashSlotNum", "maxIndexNum")}
    return {"store": str(root), **sizes}


def _read_bounded(path: str, limit: int) -> bytes:
    """A body file (or '-' for stdin) of at most `limit` bytes; /dev/zero and the like end at once."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            p = Path(path)
            if p.is_dir():
                raise StoreError("--body-file is a folder", path=path)
            with open(p, "rb") as fh:
                data = fh.read(limit + 1)
    except OSError as e:
        raise StoreError(f"cannot read --body-file: {e.strerror}", path=path) from None
    if len(data) > limit:
        raise StoreError(f"--body-file is larger than maxMessageSize ({limit} bytes)", path=path)
    return data


def prepare_send(args, cfg) -> None:
    """Every argument checked before the store is opened read-write: a refused send changes
    not one byte (the store is probed read-only for its sizes and limits)."""
    from engine.store.message_store import MessageStore
    from engine.format.properties import KEYS, TAGS
    from engine.store.writer import validate_message
    root = Path(args.store)
    if not root.exists() or (root.is_dir() and not any(root.iterdir())):
        raise StoreError(f"no store here; make one with `rmqstore init {root}`", path=str(root))
    if args.count < 1:
        raise StoreError(f"--count must be at least 1, got {args.count}")
    props = _props(args.prop)
    with MessageStore.open(root, cfg, read_only=True, served_view=False) as probe:   # the files as they are
        from engine.store.generation import write_defaults
        pcfg = write_defaults(probe.cfg, probe.generation())  # the form a read-write open will write
    levels = len(pcfg.delay_level_millis)
    if not 0 <= args.delay <= levels:
        raise StoreError(f"--delay must be a level in 0..{levels} (0 = none), got {args.delay}")
    if args.body_file:
        args.body_bytes = _read_bounded(args.body_file, pcfg.maxMessageSize)
    body = args.body_bytes if args.body_file else (template(args.body, 0, args.count) or "").encode("utf-8")
    extra = {TAGS: template(args.tags, 0, args.count) or "", KEYS: template(args.keys, 0, args.count) or ""}
    validate_message(pcfg, args.topic, len(body), args.queue, args.flag, args.delay,
                     {**props, **{k: v for k, v in extra.items() if v}}, producer=True, user_properties=props)


def cmd_send(store, args) -> int:
    """Each line is printed only after its message is stored (and, under sync flush, msynced);
    the recovery the read-write open ran, when it did anything, is said first (stderr)."""
    said = store.recovery.summary(store.recovery_plan) if store.recovery is not None else None
    if said:
        print(f"recovery: {said}", file=sys.stderr, flush=True)
    if args.body_file:
        raw = args.body_bytes  # read (bounded) by prepare_send
        body_of = lambda i: raw  # noqa: E731
    else:
        body_of = lambda i: (template(args.body, i, args.count) or "").encode("utf-8")  # noqa: E731
    if args.flush:
        store.cfg.flushDiskType = "SYNC_FLUSH" if args.flush == "sync" else "ASYNC_FLUSH"
    props = _props(args.prop)

    def report(r):
        if args.json:
            print(json.dumps({"status": r.status, "msgId": r.msgId, "uniqKey": r.uniqKey, "topic": r.topic,
                              "commitLogOffset": r.commitLogOffset, "queueId": r.queueId,
                              "queueOffset": r.queueOffset, "storeTimestamp": r.storeTimestamp}), flush=True)
        else:
            print(f"{r.status}  {r.topic}/{r.queueId}@{r.queueOffset}  commitlog offset {r.commitLogOffset}  "
                  f"msgId {r.msgId}  UNIQ_KEY {r.uniqKey}", flush=True)

    if args.batch:
        for r in store.put_messages(args.topic, [body_of(i) for i in range(args.count)], args.queue,
                                    args.tags, template(args.keys, 0, args.count), user_properties=props):
            report(r)
        return 0
    for i in range(args.count):
        report(store.put_message(args.topic, body_of(i), args.queue, template(args.tags, i, args.count), template(args.keys, i, args.count),
                                 None, args.flag, delay_level=args.delay,
                                 user_properties={k: template(v, i, args.count) for k, v in props.items()}))
    return 0


def _progress_printer(name: str):
    """Progress on stderr when it is a terminal (a task's Progress: phase and percent)."""
    if not sys.stderr.isatty():
        return None
    return lambda p: print(f"\r{name}: {p.phase} {int(100 * p.fraction)}%   ", end="", file=sys.stderr, flush=True)


def _clear_progress() -> None:
    if sys.stderr.isatty():
        print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)


def recover(root: Path, cfg, dry_run: bool) -> dict:
    """A dry run is the plan of a read-only open (engine.store.recovery.plan, the same plan a
    read-only open applies in memory); otherwise the store is opened read-write, which plans
    and applies recovery. `plan` in the answer is the plan that was (or would be) applied."""
    from engine.cli.output import cancel_on_sigint
    from engine.store.message_store import MessageStore
    from engine.store.recovery import records_reach
    from engine.tasks import CancelToken, run
    with MessageStore.open(root, cfg, read_only=True, served_view=False) as probe:   # the files as they are
        cfg = probe.cfg
        before = records_reach(probe.commitlog)
        index_before = {f.name for f in probe.index.files} | {path.name for path, _ in probe.index.refused}
        plan = probe.recovery_plan
        end = probe.max_offset
    if dry_run:
        abnormal, deleted, queues = plan.abnormal, plan.files_deleted, [c.name for c in plan.queue_cuts]
        index_rebuilt = sorted(set(plan.index_files_deleted) | {e.file for e in plan.index_files_extended if e.deleted})
    else:
        cancel = CancelToken()   # Ctrl-C: the open closes what it opened; the next open recovers again
        try:
            with cancel_on_sigint(cancel):
                s = run(MessageStore.open_task(root, cfg, read_only=False, cancel=cancel), _progress_printer("recover"))
        finally:
            _clear_progress()
        with s:
            r, plan = s.recovery, s.recovery_plan
            end = s.max_offset
            abnormal, deleted, queues = r.abnormal, r.commitlog.deleted_files, r.truncated_queues
            index_rebuilt = sorted(set(r.deleted_index_files) | ({f.name for f in s.index.files} - index_before))
    return {"abnormal": abnormal, "dryRun": dry_run, "commitlogMaxOffsetBefore": before,
            "commitlogMaxOffset": end, "truncatedBytes": max(0, before - end) if before else 0,
            "filesDeleted": deleted, "queuesTruncated": queues, "indexFilesRebuilt": index_rebuilt,
            "indexFilesExtended": [e.file for e in plan.index_files_extended],
            "startFile": plan.scan.start_file, "stopReason": plan.scan.stop_reason, "plan": plan.to_json(),
            "planText": plan.lines()}


def confirm_rebuild(root: Path, yes: bool) -> None:
    """rebuild deletes every ConsumeQueue and index file before re-dispatching: it asks on a
    terminal, and without one it needs --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise StoreError("rebuild rewrites every ConsumeQueue and index file; no terminal to ask, so give --yes",
                         path=str(root))
    answer = input(f"Rebuild the ConsumeQueues and the index of {root} from its commitlog? "
                   "Every consumequeue/ and index/ file is deleted first. [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise StoreError("rebuild not confirmed; nothing was changed", path=str(root))


def rebuild(root: Path, cfg, overwrite_geometry: bool = False) -> dict:
    """engine.store.rebuild.rebuild_task, with progress on a terminal. Ctrl-C cancels it
    (engine.cli.output.cancel_on_sigint) before anything is deleted, or during the re-dispatch,
    which the next read-write open continues: the Cancelled raised says which."""
    from engine.cli.output import cancel_on_sigint
    from engine.store.rebuild import rebuild_task
    from engine.tasks import Cancelled, CancelToken, run
    cancel = CancelToken()
    shown = _progress_printer("rebuild")
    moved = [False]   # past the plan: the old queues and index are gone

    def on_progress(p) -> None:
        moved[0] = moved[0] or p.phase != "plan"
        if shown is not None:
            shown(p)
    try:
        with cancel_on_sigint(cancel):
            return run(rebuild_task(root, cfg, cancel, overwrite_geometry=overwrite_geometry), on_progress)
    except Cancelled:
        if moved[0]:
            raise Cancelled("the ConsumeQueues and the index are rebuilt in part; the next read-write open "
                            "(or rebuild) re-dispatches the rest from the commitlog") from None
        raise Cancelled("nothing was changed") from None
    finally:
        _clear_progress()


def check_progress(tty: bool, every: float = 1.0):
    """check's progress on stderr: the phase, percent of the commitlog read and its MB/s; on a
    terminal one line kept current, otherwise a line about every `every` seconds and one per
    phase. Never on stdout (--json stays parseable)."""
    import time
    t0 = time.monotonic()
    last = [0.0, ""]

    def show(p) -> None:
        now = time.monotonic()
        if p.unit == "bytes":
            rate = p.done / max(now - t0, 1e-6) / 1e6
            text = f"check: {p.phase} {int(100 * p.fraction)}% ({p.done / 1e6:,.0f} of {p.total / 1e6:,.0f} MB, " \
                f"{rate:,.0f} MB/s)"
        else:
            text = f"check: {p.phase} {p.done}/{p.total}"
        if not tty and p.phase == last[1] and now - last[0] < every:
            return
        last[:] = [now, p.phase]
        sys.stderr.write(f"\r{text[:78]:<78}" if tty else text + "\n")
        sys.stderr.flush()
    return show


def cmd_check(store, args) -> int:
    import time
    from engine.analysis.check import check_task
    from engine.cli.output import cancel_on_sigint, cancelled
    from engine.tasks import Cancelled, CancelToken, run
    tty = sys.stderr.isatty()
    show = tty or getattr(args, "progress", False)
    t0 = time.monotonic()
    cancel = CancelToken()
    try:
        with cancel_on_sigint(cancel):
            report = run(check_task(store, cancel=cancel), check_progress(tty) if show else None)
    except Cancelled:
        return cancelled("check", "nothing was written")
    from engine.cli.compaction import check_report
    report = check_report(store, report)  # compaction logs against their CQs
    if tty:
        print("\r" + " " * 79 + "\r", end="", file=sys.stderr, flush=True)
    elif show:
        print(f"check: done in {time.monotonic() - t0:.2f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(report))
    else:
        pending = report.get("recoveryPending", [])
        kinds = list(dict.fromkeys(p["kind"] for p in pending))
        verdict = "OK" if report["ok"] else "PROBLEMS"
        if pending:
            verdict += f" (recovery pending: {', '.join(kinds)})"
        print(f"{verdict}: {report['messages']} messages, "
              f"{report['cqUnits']} CQ units, {report['indexEntries']} index entries"
              + (f", {report['dledgerEntries']} DLedger entries" if "dledgerEntries" in report else "")
              + (f", {report['compactionUnits']} compaction-log units" if "compactionUnits" in report else "") + " checked"
              + (f"; {report['problemCount']} problems" if report["problemCount"] else "")
              + (f", first {len(report['problems'])} shown" if report["problemCount"] > len(report["problems"]) else ""))
        print(f"  crc rule: {report['crcRule']} (by the store's generation)")
        for p in report["problems"]:
            print(f"  {p['kind']}: {p['detail']} ({_where(p)})")
        if pending:
            who = ("the broker's restart does this; rmqstore opens a store with RocksDB queues read-only"
                   if not getattr(store.queue_store, "recovered_here", True)
                   else "`rmqstore recover` or the next read-write open does this")
            print(f"  recovery pending (a killed writer's leftovers; {who}):")
        for p in pending:
            print(f"    {p['kind']}: {p['detail']} ({_where(p)}) -> {p['recovery']}")
        for p in report.get("notes", []):
            print(f"  note: {p['kind']}: {p['detail']} ({_where(p)})")
    return 0 if report["ok"] else 1


def _where(p: dict) -> str:
    return p["file"] + (f", offset {p['offset']}" if p["offset"] is not None else "")


def print_recover_result(args, out: dict) -> int:
    if args.json:
        print(json.dumps({k: v for k, v in out.items() if k != "planText"}))
        return 0
    print(("recovery plan (dry run: nothing written)" if out["dryRun"] else "recovery plan (applied)") + ":")
    for line in out["planText"]:
        print(f"  {line}")
    for k, v in out.items():
        if k not in ("plan", "planText"):
            print(f"{k:26} {v}")
    return 0
