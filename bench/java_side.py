"""java: the same workloads against RocketMQ's own DefaultMessageStore (4.9.7), side by side.

Only with `--java-lib DIR` (`make bench JAVA_LIB=DIR`): DIR holds RocketMQ's jars (the lib/
folder of a binary distribution). bench/java/StoreBench.java is compiled against them into
build/javabench and run with `java -cp`; it prints one JSON object per line. The ruler
(bench/README.md, "The rules"): the same work on both sides (messages built and batches
encoded inside the clock on both), every field read in the headline decode, each side warmed
to a steady state (bench/steady.py) and timed over windows of at least MIN_SECS, appends of at
least MIN_APPEND messages into a store that has rolled a commitlog file, key queries on
stores RocketMQ wrote (>= 1 GiB of commitlog, random keys and UNIQ_KEYs, load 0.5 / 2 / 4,
every hit a distinct message across the log) walked in place; SETS sets run in turns, who
goes first alternating; each row's value is ours, baselineValue Java's (the median set
each), ratio rmqstore / Java, the sets' ranges beside them."""
from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from .common import Row, log, row
from .java_driver import (BUILD, HERE, JavaSideError, compile_driver, disk_room, java_command, java_major,  # noqa: F401
                          parse_lines, run_java)
from .steady import steady

TOPIC, TAG, QUEUES, BODY, BATCH = "BenchTopic", "TagA", 4, 1024, 32
SETS = 5                        # interleaved sets per row; the row reports their median
MIN_SECS = 5.0                  # every timed window, each side
WARM_SECS = 20.0                # warm until steady, or this long
MIN_APPEND = 1_000_000          # messages per append set, after the store rolled a commitlog file
PASS_MESSAGES = 65_536          # one append pass (as the driver's PASS_MESSAGES)
SCRATCH_MESSAGES = 40_960       # the store each process writes before the measured one
LOADS = (0.5, 2, 4)
ACTIVE_LOAD = 2                 # the store-being-written-to row
QUERY_KEYS = 100_000            # keys per query pass, each a distinct message
QUERY_LOG_BYTES = 1_100_000_000  # commitlog of each key-query store (> 1 GiB: two files)
WALK_MESSAGES = 262_144         # the store the get-page and decode rows walk (RocketMQ writes it)
SLOTS, INDEX_NUM = 5_000_000, 20_000_000   # default index file
STORES = Path(os.environ.get("RMQSTORE_BENCH_JAVA_STORES", "/tmp/rmqstore-java-stores"))
BASELINE = "RocketMQ DefaultMessageStore"


# ---- ratios -----------------------------------------------------------------------------

def turns(s: int) -> tuple[str, str]:
    """Who runs first in set s: ours in even sets, Java's in odd ones."""
    return ("rmqstore", "java") if s % 2 == 0 else ("java", "rmqstore")


def count_of(m: dict) -> int:
    return m.get("messages", m.get("queries", 0))


def rate(m: dict) -> float:
    """Messages (or queries) per second of one measurement."""
    return count_of(m) / m["seconds"]


def spread(ms: list[dict]) -> tuple[float, list[float], list[float]]:
    """The median rate of the sets, [lowest, highest], every set's rate."""
    rates = [rate(m) for m in ms]
    return statistics.median(rates), [round(min(rates), 1), round(max(rates), 1)], [round(r, 1) for r in rates]


# issue 30's targets on the fair rows (the median sets' ratio rmqstore / Java); other rows are reported
TARGETS = ((r"append 1KiB, one message per call$", 1.3), (r"append 1KiB, batches of 32$", 2.0),
           (r"get-page 1KiB \(32-message pages\)$", 1.3), (r"decode 1KiB, every field$", 1.0),
           (r"key-query (offsets|messages) load [0-9.]+$", 1.0),
           (r"key-query (offsets|messages) load [0-9.]+, chain copies$", 1.5))


def target_of(name: str) -> float | None:
    """The ratio a java row must reach (None: the row is reported only)."""
    return next((t for pat, t in TARGETS if re.search(pat, name)), None)


def pair_row(name: str, ours: list[dict], java: list[dict], unit: str, fields_read: str = "n/a",
             accel: str = "n/a", load: dict | None = None, **extra) -> Row:
    """A side-by-side row: the median set of each side, ratio ours / Java (throughput: higher
    is better for us), each side's range and sets; messagesPerSet the fewest messages (or
    queries) a timed set held, warmSeconds the longest warm; p50/p99 latencies (median set)
    and their ratios when both sides have them."""
    o, o_range, o_sets = spread(ours)
    j, j_range, j_sets = spread(java)
    if all("p50Us" in m for m in ours + java):
        for q in ("p50Us", "p99Us"):
            ov, jv = statistics.median(m[q] for m in ours), statistics.median(m[q] for m in java)
            extra[q] = round(ov, 2)
            extra["java" + q[0].upper() + q[1:]] = round(jv, 2)
            extra[q[:3] + "Ratio"] = round(ov / jv, 3) if jv else None   # ours / Java: lower is better
    java_info = java[0]
    warm = [m.get("warmSeconds", 0.0) for m in ours + java]
    target = target_of(name)
    return row(name, o, unit, BASELINE + " " + str(java_info.get("rocketmq", "?")), j, target_ratio=target,
               target=None if target else "reported",
               fieldsRead=fields_read, accel=accel, statistic=f"median of {len(ours)} interleaved sets",
               messagesPerSet=min(count_of(m) for m in ours + java),
               warmSeconds=round(max(warm), 2),
               oursWarmSeconds=[round(m.get("warmSeconds", 0.0), 2) for m in ours],
               javaWarmSeconds=[round(m.get("warmSeconds", 0.0), 2) for m in java],
               oursRange=o_range, javaRange=j_range, oursSets=o_sets, javaSets=j_sets,
               loadAverage=(load or {}).get("start"), loadAverageEnd=(load or {}).get("end"),
               javaVersion=java_info.get("java"), **extra)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---- our side ---------------------------------------------------------------------------

def _bodies() -> list[bytes]:
    import random
    r = random.Random(7)
    return [r.randbytes(BODY) for _ in range(32)]


class Appender:
    """Our append passes, as the driver's appendPass: messages built (and batches encoded, in
    put_messages) inside the clock; our dispatch to the ConsumeQueue and the index is done when
    the put returns."""

    def __init__(self, store, batch: int):
        self.store, self.batch, self.next = store, batch, 0
        self.bodies = _bodies()

    def __call__(self, count: int = PASS_MESSAGES) -> dict:
        store, bodies, topic, tag, i = self.store, self.bodies, TOPIC, TAG, self.next
        before = store.commitlog.max_offset
        if self.batch == 1:
            put = store.put_message
            t = time.perf_counter()
            for i in range(i, i + count):
                put(topic, bodies[i & 31], i & 3, tag, [f"k{i:09d}"])
            secs = time.perf_counter() - t
            self.next = i + 1
        else:
            put, n = store.put_messages, self.batch
            t = time.perf_counter()
            for b in range(i, i + count // n):
                put(topic, [bodies[(b * n + j) & 31] for j in range(n)], b & 3, tag, [f"b{b:09d}"])
            secs = time.perf_counter() - t
            self.next = i + count // n
        return {"seconds": secs, "messages": count // self.batch * self.batch,
                "bytes": store.commitlog.max_offset - before}


def ours_append(root: Path, batch: int, min_messages: int = MIN_APPEND, min_secs: float = MIN_SECS,
                warm_secs: float = WARM_SECS, roll: bool = True, pass_messages: int = PASS_MESSAGES) -> dict:
    """A scratch store first (this process has written a store before the measured one), then
    `root`: warmed until steady and until it has rolled a commitlog file, then the window."""
    from .workload import create_store
    scratch = create_store(Path(str(root) + "-scratch"))
    Appender(scratch, batch)(SCRATCH_MESSAGES if roll else pass_messages)
    scratch.close()
    shutil.rmtree(Path(str(root) + "-scratch"), ignore_errors=True)
    store = create_store(root)
    size = store.cfg.mappedFileSizeCommitLog
    app = Appender(store, batch)
    out = steady(lambda: app(pass_messages), min_secs, min_messages, warm_secs,
                 ready=lambda: not roll or store.commitlog.max_offset > size)
    out["storeBytesBefore"] = store.commitlog.max_offset - out["bytes"]
    store.close()
    return out


def _walk_once(store, mode: str) -> dict:
    """Every queue in 32-message pages; mode "page": the pages only; "all": every field
    MessageDecoder.decode fills read from each message; "none": the Message objects made,
    only their fixed-head integers touched (no lazily built field)."""
    get = store.get_message
    n = nbytes = acc = 0
    t = time.perf_counter()
    for q in range(QUEUES):
        off = store.find_queue(TOPIC, q).min_offset
        while True:
            r = get(TOPIC, q, off, 32, broker=True)
            if r.status != "FOUND":
                break
            msgs = r.messages
            if mode == "all":
                for m in msgs:
                    acc += (m.storeSize + m.bodyCRC + m.queueId + m.flag + m.queueOffset + m.commitLogOffset
                            + m.sysFlag + m.bornTimestamp + len(m.bornHost) + m.storeTimestamp + len(m.storeHost)
                            + m.reconsumeTimes + m.preparedTransactionOffset + len(m.body) + len(m.topic)
                            + len(m.properties) + len(m.msgId))
            elif mode == "none":
                for m in msgs:
                    acc += m.storeTimestamp + m.queueOffset
            n += len(msgs)
            nbytes += r.bufferTotalSize
            off = r.nextBeginOffset
    if n == 0:
        raise JavaSideError(f"nothing to walk in {store.root}")
    return {"seconds": time.perf_counter() - t, "messages": n, "bytes": nbytes}


WALK_MODES = {"page": "page", "decode": "all", "decode-lazy": "none"}


def ours_walk(root: Path, min_secs: float = MIN_SECS, warm_secs: float = WARM_SECS) -> dict[str, dict]:
    from engine import MessageStore
    out = {}
    with MessageStore.open(root) as store:
        for name, mode in WALK_MODES.items():
            out[name] = steady(lambda: _walk_once(store, mode), min_secs, 0, warm_secs)
    return out


def _query_pass(store, keys: list[str], messages: bool) -> dict:
    """Every key once, one clock read around the pass (as the driver's)."""
    from engine.store.index_file import LONG_MAX
    qo, qm = store.index.query_offset, store.query_message
    topic, hi = TOPIC, LONG_MAX
    hits = 0
    t = time.perf_counter()
    if messages:
        for k in keys:
            hits += len(qm(topic, k, 0, hi, 64, raw=True).messages)
    else:
        for k in keys:
            hits += len(qo(topic, k, 64, 0, hi)[0])
    return {"seconds": time.perf_counter() - t, "queries": len(keys), "hits": hits}


def _latencies(store, keys: list[str], messages: bool) -> dict:
    """p50/p99 from a pass with a clock read around each query (apart from the window, where
    a read per query would count as query time, 2x more of it in Python than in Java)."""
    from engine.store.index_file import LONG_MAX
    qo, qm = store.index.query_offset, store.query_message
    ns = time.perf_counter_ns
    lat = []
    for k in keys:
        a = ns()
        if messages:
            qm(TOPIC, k, 0, LONG_MAX, 64, raw=True)
        else:
            qo(TOPIC, k, 64, 0, LONG_MAX)
        lat.append(ns() - a)
    lat.sort()
    return {"p50Us": lat[len(lat) // 2] / 1000, "p99Us": lat[int(len(lat) * 0.99)] / 1000}


def _timed_queries(store, keys, messages, min_secs, warm_secs) -> dict:
    hits = _query_pass(store, keys, messages)["hits"]   # one pass's hits: both sides report it
    out = steady(lambda: _query_pass(store, keys, messages), min_secs, 0, warm_secs, count="queries")
    out["hitsInWindow"] = out.pop("hits", 0)
    out["hits"] = hits
    out.update(_latencies(store, keys, messages))
    return out


BATCH_KEYS = 1000   # keys per query_offsets call in the batched figure (as bench/query.py's)


def _batch_pass(store, keys: list[str], per: int = BATCH_KEYS) -> dict:
    """The same keys through the batched API (IndexService.query_offsets, `per` keys a call,
    their cache misses overlapped). Java has no batched call: set against its single rate."""
    from engine.store.index_file import LONG_MAX
    qb = store.index.query_offsets
    hits = 0
    t = time.perf_counter()
    for i in range(0, len(keys), per):
        for offs in qb(TOPIC, keys[i:i + per], 64, 0, LONG_MAX):
            hits += len(offs)
    return {"seconds": time.perf_counter() - t, "queries": len(keys), "hits": hits}


def ours_query(root: Path, keys: list[str], min_secs: float = MIN_SECS, warm_secs: float = WARM_SECS) -> dict:
    """In place (the headline), the batched call, then over the chain copies
    (IndexService.accelerate: its seconds and bytes reported, outside the clock)."""
    from engine import MessageStore
    out = {}
    with MessageStore.open(root) as store:
        for name, messages in (("query-offsets", False), ("query-messages", True)):
            out[name] = _timed_queries(store, keys, messages, min_secs, warm_secs)
        out["query-offsets-batch"] = steady(lambda: _batch_pass(store, keys), min_secs, 0, warm_secs, count="queries")
        out["accelerate"] = store.index.accelerate()   # the chain copy (engine/store/index_accel.py)
        if not out["accelerate"]["built"]:
            raise JavaSideError(f"no chain copy built: {out['accelerate']}")
        for name, messages in (("query-offsets", False), ("query-messages", True)):
            out[name + "-copy"] = _timed_queries(store, keys, messages, min_secs, warm_secs)
    return out


def ours_active(root: Path, keys: list[str], min_secs: float = MIN_SECS, warm_secs: float = WARM_SECS) -> dict:
    """The store opened read-write, its chain copies made, then one message written: the active
    index file gets an entry and its copy is no longer used; then the offsets queries."""
    from engine import MessageStore
    store = MessageStore.open(root, read_only=False)
    try:
        built = store.index.accelerate()
        store.put_message(TOPIC, _bodies()[0], 0, TAG, [f"w{time.time_ns() % 10 ** 9:09d}"])
        last = store.index.files[-1]
        used = last.accel is not None and last.accel.fresh(last)
        out = _timed_queries(store, keys, False, min_secs, warm_secs)
        out.update(copyUsedOnActiveFile=bool(used), copiesBuilt=len(built["built"]))
    finally:
        store.close()
    return out


# ---- the stores both sides read -------------------------------------------------------------

def query_store_plan(load: float, log_bytes: int = QUERY_LOG_BYTES, slots: int = SLOTS,
                     index_num: int = INDEX_NUM) -> tuple[int, int]:
    """(messages, index entries) for a key-query store at `load` entries per slot whose
    commitlog holds about `log_bytes`: each message a UNIQ_KEY and its share of random keys
    (16 hex digits and a space each, ~1,211 bytes a record without keys)."""
    entries = min(int(load * slots), index_num - 1)   # one file: its last entry fills it
    n = max(1, log_bytes // 1211)
    for _ in range(20):
        per = 1211 + 17 * max(0, entries - n) / n
        n = min(entries, int(log_bytes / per) + 1)
    return n, entries


def made_store(cmd, root: Path, n: int, entries: int, nq: int, seed: int) -> tuple[Path, dict]:
    """A store RocketMQ writes (the driver's mkstore), kept for later runs: reused when its
    marker says it was finished with the same parameters. Returns (key file, marker)."""
    marker, keys = root / "rmqstore-bench-java.json", root / "query-keys.txt"
    want = {"messages": n, "entries": entries, "queryKeys": nq, "seed": seed}
    if marker.exists():
        m = json.loads(marker.read_text())
        if all(m.get(k) == v for k, v in want.items()) and keys.exists():
            return keys, m
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    log(f"java side: RocketMQ writes {root} ({n:,} messages, {entries:,} index entries)")
    made = run_java(cmd, "mkstore", root, n, entries, seed, nq, root.parent / (root.name + ".keys"),
                    timeout=3600)["mkstore"]
    shutil.move(str(root.parent / (root.name + ".keys")), keys)
    marker.write_text(json.dumps(dict(want, bytes=made["bytes"], seconds=made["seconds"])) + "\n")
    return keys, json.loads(marker.read_text())


# ---- the section ------------------------------------------------------------------------

def run(ctx) -> list[Row]:
    try:
        return _run(ctx)
    except (JavaSideError, subprocess.TimeoutExpired) as e:  # the other sections' figures still count
        log(f"java side failed: {e}")
        return [row("java-side", None, "", target="reported", missing=str(e)[:2000])]


def sizes(ctx) -> dict:
    """The section's sizes; a test passes small ones (ctx.java_sizes, a dict of these keys)."""
    full = {"sets": SETS, "min_secs": MIN_SECS, "warm_secs": WARM_SECS, "min_append": MIN_APPEND,
            "pass_messages": PASS_MESSAGES, "roll": True, "walk_messages": WALK_MESSAGES,
            "query_keys": QUERY_KEYS, "log_bytes": QUERY_LOG_BYTES, "loads": LOADS, "stores": STORES}
    full.update(getattr(ctx, "java_sizes", None) or {})
    return full


def _interleave(sets: int, ours, java) -> tuple[list, list, dict]:
    """Run ours() and java() in turns, `sets` times; (ours' results, Java's, load averages)."""
    o, j, load = [], [], {"start": loadavg()}
    for s in range(sets):
        for side in turns(s):
            (o if side == "rmqstore" else j).append(ours(s) if side == "rmqstore" else java(s))
    load["end"] = loadavg()
    return o, j, load


def _run(ctx) -> list[Row]:
    lib = Path(ctx.java_lib)
    log(f"java side: compiling bench/java/StoreBench.java against {lib}")
    cmd = java_command(lib, compile_driver(lib))
    z = sizes(ctx)
    sets, secs, warm = z["sets"], z["min_secs"], z["warm_secs"]
    rows: list[Row] = []
    base = ctx.tmp / "java-side"
    base.mkdir(parents=True, exist_ok=True)
    disk_room(base)

    rows += append_rows(cmd, z, base)
    rows += walk_rows(cmd, z)

    for load_factor in z["loads"]:
        n, entries = query_store_plan(load_factor, z["log_bytes"])
        root = Path(z["stores"]) / f"query-load-{load_factor:g}-{n}"
        key_file, made = made_store(cmd, root, n, entries, min(z["query_keys"], n), 11)
        keys = key_file.read_text().split()
        log(f"java side: key-query load {load_factor:g} ({made['bytes']:,} bytes of commitlog), {len(keys):,} keys")
        o, j, load = _interleave(sets, lambda s: ours_query(root, keys, secs, warm),
                                 lambda s: run_java(cmd, "query", root, key_file, secs, warm))
        store_fields = {"queries": len(keys), "indexEntries": entries, "storeMessages": n,
                        "commitlogBytes": made["bytes"], "writtenBy": BASELINE + " (the driver's mkstore)"}
        acc = [m["accelerate"] for m in o]
        copy = {"buildSeconds": round(max(a["seconds"] for a in acc), 3), "bytes": acc[0]["bytes"]}
        rows.append(pair_row(f"java-side key-query offsets load {load_factor:g}", [m["query-offsets"] for m in o],
                             [m["query-offsets"] for m in j], "queries/s", "none", "in-place", load,
                             ourCall="IndexService.query_offset, walked in the file", javaCall="IndexService.queryOffset",
                             **batch_fields([m["query-offsets-batch"] for m in o], [m["query-offsets"] for m in j]),
                             **store_fields))
        rows.append(pair_row(f"java-side key-query messages load {load_factor:g}", [m["query-messages"] for m in o],
                             [m["query-messages"] for m in j], "queries/s", "none", "in-place", load,
                             ourCall="query_message(raw=True), walked in the file",
                             javaCall="DefaultMessageStore.queryMessage", **store_fields))
        for what, call in (("offsets", "IndexService.query_offset"), ("messages", "query_message(raw=True)")):
            rows.append(pair_row(f"java-side key-query {what} load {load_factor:g}, chain copies",
                                 [m[f"query-{what}-copy"] for m in o], [m[f"query-{what}"] for m in j], "queries/s",
                                 "none", "chain-copy", load, ourCall=f"{call} over IndexService.accelerate's copies",
                                 javaCall="the same Java figure as the in-place row (Java has no copy)",
                                 **copy, **store_fields))
        if load_factor == ACTIVE_LOAD or len(z["loads"]) == 1:
            log(f"java side: key-query load {load_factor:g} on a store being written to")
            o, j, load = _interleave(sets, lambda s: ours_active(root, keys, secs, warm),
                                     lambda s: run_java(cmd, "active", root, key_file, secs, warm)["active-offsets"])
            rows.append(pair_row(f"java-side key-query offsets load {load_factor:g}, active index file", o, j,
                                 "queries/s", "none", "in-place (copy dropped: the file took an entry)", load,
                                 ourCall="IndexService.query_offset after accelerate() and a put",
                                 javaCall="IndexService.queryOffset on a started store after a put",
                                 copyUsedOnActiveFile=any(m["copyUsedOnActiveFile"] for m in o), **store_fields))
    return rows


def append_rows(cmd: list[str], z: dict, base: Path) -> list[Row]:
    """The two append rows: single puts and batches of 32, in interleaved sets of fresh stores
    under `base` (each side warmed on a scratch store, then until steady and rolled)."""
    sets, secs, warm = z["sets"], z["min_secs"], z["warm_secs"]
    rows: list[Row] = []
    for label, batch in (("one message per call", 1), ("batches of 32", BATCH)):
        def ours(s, batch=batch):
            log(f"java side: append {label}, set {s + 1}/{sets}, rmqstore")
            root = base / f"append-{batch}-ours-{s}"
            try:
                return ours_append(root, batch, z["min_append"], secs, warm, z["roll"], z["pass_messages"])
            finally:
                shutil.rmtree(root, ignore_errors=True)

        def java(s, batch=batch):
            log(f"java side: append {label}, set {s + 1}/{sets}, java")
            root = base / f"append-{batch}-java-{s}"
            try:
                return run_java(cmd, "append", root, batch, z["min_append"], secs, warm,
                                1 if z["roll"] else 0)["append"]
            finally:
                shutil.rmtree(root, ignore_errors=True)

        o, j, load = _interleave(sets, ours, java)
        extra = {}
        if batch > 1:   # Java's batches encoded before the clock, as the old ruler timed them
            pre = [m["preEncodedMessages"] / m["preEncodedSeconds"] for m in j]
            extra = {"javaPreEncodedMsgPerSecond": round(statistics.median(pre)),
                     "javaPreEncodedRange": [round(min(pre)), round(max(pre))],
                     "ratioToPreEncoded": round(statistics.median(rate(m) for m in o) / statistics.median(pre), 3)}
        rows.append(pair_row(f"java-side append 1KiB, {label}", o, j, "msg/s", "n/a", "n/a", load,
                             bytesPerMessage=round(o[0]["bytes"] / o[0]["messages"], 1),
                             javaBytesPerMessage=round(j[0]["bytes"] / j[0]["messages"], 1),
                             storeBytesBeforeWindow=min(m["storeBytesBefore"] for m in o + j),
                             timedUntil="ConsumeQueue and index dispatched, every pass",
                             builtInClock="messages" + (" and batch encoding" if batch > 1 else ""), **extra))
    return rows


def walk_rows(cmd: list[str], z: dict) -> list[Row]:
    """The get-page and decode rows: a store RocketMQ wrote (a key and a UNIQ_KEY per message),
    walked in 32-message pages by both sides in interleaved sets."""
    sets, secs, warm = z["sets"], z["min_secs"], z["warm_secs"]
    rows: list[Row] = []
    walk_root = Path(z["stores"]) / f"walk-{z['walk_messages']}"
    made_store(cmd, walk_root, z["walk_messages"], 2 * z["walk_messages"], 1000, 13)
    walks: dict[str, tuple] = {}
    log("java side: get-page and decode")
    o, j, load = _interleave(sets, lambda s: ours_walk(walk_root, secs, warm),
                             lambda s: run_java(cmd, "walk", walk_root, secs, warm))
    for name in WALK_MODES:
        walks[name] = ([m[name] for m in o], [m["decode" if name == "decode-lazy" else name] for m in j])
    rows.append(pair_row("java-side get-page 1KiB (32-message pages)", *walks["page"], "msg/s", "none", "in-place",
                         load, ourCall="get_message(broker=True): CQ units to commitlog slices, no record read (as the broker)",
                         javaCall="getMessage (buffers)"))
    rows.append(pair_row("java-side decode 1KiB, every field", *walks["decode"], "msg/s", "all", "in-place", load,
                         ourCall="get_message(broker=True), every field MessageDecoder.decode fills read",
                         javaCall="getMessage + MessageDecoder.decode per message, every field read"))
    rows.append(pair_row("java-side decode 1KiB, lazy (no field built)", *walks["decode-lazy"], "msg/s", "none",
                         "in-place", load, ourCall="get_message(broker=True), Message objects, head integers only",
                         javaCall="getMessage + MessageDecoder.decode (Java has no lazy decode: the same as 'every field')"))
    return rows


def batch_fields(batch: list[dict], java: list[dict]) -> dict:
    """The batched figure's fields on the key-query offsets row: its median set, and its ratio
    to Java's median single-query set (the row's baseline)."""
    b, b_range, b_sets = spread(batch)
    j = spread(java)[0]
    return {"batchQueriesPerSecond": round(b), "batchRatio": round(b / j, 3) if j else None, "batchSets": b_sets,
            "batchRange": b_range, "batchCall": f"IndexService.query_offsets, {BATCH_KEYS} keys a call"}


def main(argv=None) -> int:
    """python -m bench.java_side --java-lib DIR [--rows walk|append] [--out FILE]: one group of
    rows alone (the walk: get-page and the decodes; or the appends), at the full sizes and
    rules, merged by name into FILE (a java-side results JSON whose other rows are kept)."""
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(prog="python -m bench.java_side")
    ap.add_argument("--java-lib", required=True)
    ap.add_argument("--rows", choices=("walk", "append"), default="walk")
    ap.add_argument("--out", default=str(HERE / "results" / "java-side.json"))
    a = ap.parse_args(argv)
    lib = Path(a.java_lib)
    cmd = java_command(lib, compile_driver(lib))
    z = sizes(type("Ctx", (), {"java_sizes": None})())
    if a.rows == "walk":
        made = walk_rows(cmd, z)
    else:
        with tempfile.TemporaryDirectory(prefix="rmqstore-java-append-") as tmp:
            made = append_rows(cmd, z, Path(tmp))
    new = {r.name: r.to_json() for r in made}
    out = Path(a.out)
    doc = json.loads(out.read_text()) if out.exists() else {"sections": ["java"], "results": []}
    names = list(new)
    doc["results"] = [new.pop(r["name"], r) for r in doc["results"]] + list(new.values())
    doc.setdefault("merged", []).append({"rows": names, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                         "by": f"python -m bench.java_side --rows {a.rows}"})
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for r in doc["results"]:
        if r["name"] in names:
            print(f"{r['name']}: ours {r['value']:,.0f}  java {r['baselineValue']:,.0f}  ratio {r['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
