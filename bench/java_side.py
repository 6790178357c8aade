"""java: the same workloads against RocketMQ's own DefaultMessageStore (4.9.7), side by side.

Only with `--java-lib DIR` (`make bench JAVA_LIB=DIR`): DIR holds RocketMQ's jars (the lib/
folder of a binary distribution). bench/java/StoreBench.java is compiled against them into
build/javabench and run with `java -cp`; it prints one JSON object per line. Both sides write
the same message shape (1 KiB body, tag, key, UNIQ_KEY, CLUSTER, 4 queues, default file sizes)
and run in turns SETS times, who goes first alternating (A B, B A, A B: both see the same
machine drift, neither always runs after the other); each row's value is ours, baselineValue
Java's (best set each), ratio rmqstore / Java."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from .common import Row, log, row

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "StoreBench.java"
BUILD = HERE.parent / "build" / "javabench"
TOPIC, TAG, QUEUES, BODY, BATCH = "BenchTopic", "TagA", 4, 1024, 32
SETS = 3
LOADS = (0.5, 2, 4)
QUERY_MESSAGES = 4096          # the messages the index entries point at (entry i -> message i % this)
BASELINE = "RocketMQ DefaultMessageStore"
JAVA_WARM_APPENDS = 40_960     # into a scratch store before each timed Java append (the JIT)


class JavaSideError(RuntimeError):
    """The Java side could not be built or run (the message says why)."""


# ---- the Java process -----------------------------------------------------------------

def java_major(java: str = "java") -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise JavaSideError(f"cannot read the Java version from: {out.strip()[:200]}")
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 else major   # "1.8.0_x" is Java 8


def compile_driver(lib: Path, out: Path = BUILD) -> Path:
    """javac StoreBench.java against lib/* into `out`; returns `out`."""
    lib = Path(lib)
    if not lib.is_dir() or not list(lib.glob("rocketmq*.jar")):
        raise JavaSideError(f"JAVA_LIB={lib}: no rocketmq*.jar there (use the lib/ folder of a RocketMQ "
                            "4.9.7 binary distribution, see bench/README.md)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise JavaSideError("the Java side needs a JDK (javac and java on PATH)")
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", f"{lib}{os.sep}*", "-d", str(out),
                        str(SOURCE)], capture_output=True, text=True)
    if r.returncode != 0:
        raise JavaSideError(f"javac StoreBench.java against {lib} failed:\n{r.stderr.strip()[-2000:]}")
    return out


def java_command(lib: Path, classes: Path = BUILD) -> list[str]:
    cmd = ["java", "-Xms1g", "-Xmx2g"]
    if java_major() >= 9:  # RocketMQ 4.9 maps files through sun.nio.ch and unmaps by reflection
        cmd += ["--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED"]
    return cmd + ["-cp", f"{classes}{os.pathsep}{Path(lib)}{os.sep}*", "StoreBench"]


def parse_lines(text: str) -> list[dict]:
    """The driver's JSON objects, one a line; anything else on stdout (a logger) is skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and "workload" in d:
                out.append(d)
    return out


def run_java(cmd: list[str], *args, timeout: float = 600) -> dict[str, dict]:
    """Run one driver workload; its JSON lines by workload name."""
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    lines = parse_lines(r.stdout)
    if r.returncode != 0 or not lines:
        raise JavaSideError(f"StoreBench {' '.join(map(str, args))} exited {r.returncode}:\n"
                            f"{(r.stderr or r.stdout).strip()[-2000:]}")
    return {d["workload"]: d for d in lines}


# ---- ratios -----------------------------------------------------------------------------

def turns(s: int) -> tuple[str, str]:
    """Who runs first in set s: ours in even sets, Java's in odd ones."""
    return ("rmqstore", "java") if s % 2 == 0 else ("java", "rmqstore")


def rate(m: dict) -> float:
    """Messages (or queries) per second of one measurement."""
    return m.get("messages", m.get("queries", 0)) / m["seconds"]


def pair_row(name: str, ours: list[dict], java: list[dict], unit: str, **extra) -> Row:
    """A side-by-side row: best set of each side, ratio ours / Java (throughput: higher is
    better for us); p50/p99 latencies (lowest set) and their ratios when both sides have them."""
    o, j = max(rate(m) for m in ours), max(rate(m) for m in java)
    if all("p50Us" in m for m in ours + java):
        for q in ("p50Us", "p99Us"):
            ov, jv = min(m[q] for m in ours), min(m[q] for m in java)
            extra[q] = round(ov, 2)
            extra["java" + q[0].upper() + q[1:]] = round(jv, 2)
            extra[q[:3] + "Ratio"] = round(ov / jv, 3) if jv else None   # ours / Java: lower is better
    java_info = java[0]
    return row(name, o, unit, BASELINE + " " + str(java_info.get("rocketmq", "?")), j, target="reported",
               oursSets=[round(rate(m), 1) for m in ours], javaSets=[round(rate(m), 1) for m in java],
               javaVersion=java_info.get("java"), **extra)


# ---- our side ---------------------------------------------------------------------------

def _bodies() -> list[bytes]:
    return [os.urandom(BODY) for _ in range(32)]


def ours_append(root: Path, n: int, batch: int) -> dict:
    """n messages (batch 1: put_message; 32: put_messages) into a fresh default store; our
    dispatch to the ConsumeQueue and the index is done when the put returns."""
    from .workload import create_store
    bodies = _bodies()
    store = create_store(root)
    if batch == 1:
        work = [(bodies[i % 32], i % QUEUES, [f"k{i:09d}"]) for i in range(n)]
        put = store.put_message
        t = time.perf_counter()
        for body, q, keys in work:
            put(TOPIC, body, q, TAG, keys)
    else:
        work = [([bodies[(b * batch + j) % 32] for j in range(batch)], b % QUEUES, [f"b{b:09d}"])
                for b in range(n // batch)]
        put = store.put_messages
        t = time.perf_counter()
        for bs, q, keys in work:
            put(TOPIC, bs, q, TAG, keys)
    secs = time.perf_counter() - t
    nbytes = store.commitlog.max_offset
    msgs = sum(store.find_queue(TOPIC, q).max_offset for q in range(QUEUES))
    store.close()
    return {"seconds": secs, "messages": msgs, "bytes": nbytes}


def _walk_once(store, decode: bool) -> dict:
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
            if decode:
                for m in msgs:
                    acc += m.storeTimestamp + len(m.body) + m.queueOffset
            n += len(msgs)
            nbytes += r.bufferTotalSize
            off = r.nextBeginOffset
    return {"seconds": time.perf_counter() - t, "messages": n, "bytes": nbytes}


def ours_walk(root: Path, reps: int) -> dict[str, dict]:
    from engine import MessageStore
    out = {}
    with MessageStore.open(root) as store:
        for name, decode in (("page", False), ("decode", True)):
            _walk_once(store, decode)  # warm, as the Java side does
            out[name] = min((_walk_once(store, decode) for _ in range(reps)), key=lambda m: m["seconds"])
    return out


def _lat(store, keys: list[str], messages: bool) -> dict:
    """Key queries over `keys`, as the Java driver times them: throughput from one pass with a
    clock read around the whole pass (a read per query would count as query time, 2x more of
    it in Python than in Java), then p50/p99 from a second pass with a read around each query.
    The loops are written out with the calls bound once and no Python frame of their own per
    query, as the Java driver's loop (which the JIT inlines) holds its IndexService and store."""
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
    secs = time.perf_counter() - t
    ns = time.perf_counter_ns
    lat = []
    for k in keys:
        a = ns()
        if messages:
            qm(topic, k, 0, hi, 64, raw=True)
        else:
            qo(topic, k, 64, 0, hi)
        lat.append(ns() - a)
    lat.sort()
    return {"seconds": secs, "queries": len(keys), "hits": hits,
            "p50Us": lat[len(lat) // 2] / 1000, "p99Us": lat[int(len(lat) * 0.99)] / 1000}


BATCH_KEYS = 1000   # keys per query_offsets call in the batched figure (as bench/query.py's)


def _batched(store, keys: list[str], per: int = BATCH_KEYS) -> dict:
    """The same keys through the batched API (IndexService.query_offsets, `per` keys a call,
    their cache misses overlapped) as one timed pass. Java has no batched call: this figure
    is set against its single-query rate."""
    from engine.store.index_file import LONG_MAX
    qb = store.index.query_offsets
    topic, hi = TOPIC, LONG_MAX
    hits = 0
    t = time.perf_counter()
    for i in range(0, len(keys), per):
        for offs in qb(topic, keys[i:i + per], 64, 0, hi):
            hits += len(offs)
    return {"seconds": time.perf_counter() - t, "queries": len(keys), "hits": hits}


def ours_query(root: Path, keys: list[str]) -> dict[str, dict]:
    from engine import MessageStore
    out = {}
    with MessageStore.open(root) as store:
        for name, messages in (("query-offsets", False), ("query-messages", True)):   # walked in the file
            _lat(store, keys, messages)  # warm
            out[name + "-in-place"] = _lat(store, keys, messages)
        _batched(store, keys)  # warm
        out["query-offsets-batch"] = _batched(store, keys)
        out["accelerate"] = store.index.accelerate()   # the chain copy (engine/store/index_accel.py)
        if not out["accelerate"]["built"]:
            raise JavaSideError(f"no chain copy built: {out['accelerate']}")
        for name, messages in (("query-offsets", False), ("query-messages", True)):
            _lat(store, keys, messages)  # warm
            out[name] = _lat(store, keys, messages)
    return out


def _best_vs_java(ours: list[dict], java: list[dict]) -> tuple[float, float | None, list[float]]:
    """Our best set's rate, its ratio to Java's best set, and every set's rate."""
    o, j = max(rate(m) for m in ours), max(rate(m) for m in java)
    return o, (round(o / j, 3) if j else None), [round(rate(m), 1) for m in ours]


def batch_fields(batch: list[dict], java: list[dict]) -> dict:
    """The batched figure's fields on the key-query offsets row: its best set, and its ratio
    to Java's best single-query set (the row's baseline)."""
    b, ratio, sets = _best_vs_java(batch, java)
    return {"batchQueriesPerSecond": round(b), "batchRatio": ratio, "batchSets": sets,
            "batchCall": f"IndexService.query_offsets, {BATCH_KEYS} keys a call"}


def in_place_fields(ours: list[dict], java: list[dict]) -> dict:
    """The same queries walked in the file (before IndexService.accelerate): best set, ratio
    to Java's best set, p50."""
    o, ratio, sets = _best_vs_java(ours, java)
    return {"inPlaceQueriesPerSecond": round(o), "inPlaceRatio": ratio, "inPlaceSets": sets,
            "inPlaceP50Us": round(min(m["p50Us"] for m in ours), 2)}


def copy_fields(runs: list[dict]) -> dict:
    """What IndexService.accelerate took to make the chain copy the main figures use."""
    return {"chainCopySeconds": max(r["seconds"] for r in runs), "chainCopyBytes": runs[0]["bytes"]}


def build_query_store(root: Path, load: float) -> int:
    """A default store holding QUERY_MESSAGES messages and one default-size index file at
    `load` entries per slot (keys K0000000000...), entry i pointing at message i % QUERY_MESSAGES.
    Both sides open this very store. Returns the number of keys in the index."""
    from engine import StoreConfig
    from engine.config import INDEX_HEADER_SIZE
    from engine.store.index_file import INDEX_ENTRY_DTYPE

    from . import index_gen
    from .workload import create_store
    cfg = StoreConfig()
    slots, index_num = cfg.maxHashSlotNum, cfg.maxIndexNum
    n = min(int(load * slots), index_num - 1)
    store = create_store(root)
    bodies = _bodies()
    offsets = []
    for b in range(QUERY_MESSAGES // BATCH):
        rs = store.put_messages(TOPIC, [bodies[j] for j in range(BATCH)], b % QUEUES, TAG, [f"b{b:09d}"])
        offsets += [r.commitLogOffset for r in rs]
    store.close()
    shutil.rmtree(root / "index")
    (root / "index").mkdir()
    path = root / "index" / "20260101000000000"
    index_gen.build(path, TOPIC, n, slots, index_num)
    mm = np.memmap(path, dtype=INDEX_ENTRY_DTYPE, mode="r+", offset=INDEX_HEADER_SIZE + slots * 4, shape=(n + 1,))
    mm["commitLogOffset"][1:] = np.asarray(offsets, dtype=np.int64)[np.arange(n) % QUERY_MESSAGES]
    mm.flush()
    del mm
    return n


# ---- the section ------------------------------------------------------------------------

def run(ctx) -> list[Row]:
    try:
        return _run(ctx)
    except (JavaSideError, subprocess.TimeoutExpired) as e:  # the other sections' figures still count
        log(f"java side failed: {e}")
        return [row("java-side", None, "", target="reported", missing=str(e)[:2000])]


def _run(ctx) -> list[Row]:
    lib = Path(ctx.java_lib)
    log(f"java side: compiling bench/java/StoreBench.java against {lib}")
    cmd = java_command(lib, compile_driver(lib))
    # messages per append set, queries per pass, index loads (a test passes tiny ones)
    n, nq, loads = getattr(ctx, "java_sizes", None) or ((20_480, 20_000, LOADS) if ctx.quick
                                                        else (102_400, 100_000, LOADS))
    rows: list[Row] = []
    base = ctx.tmp / "java-side"
    base.mkdir(parents=True, exist_ok=True)

    # a small warm store of ours first (imports, first mappings), as the JVM warms its own
    shutil.rmtree(base / "warm", ignore_errors=True)
    ours_append(base / "warm", min(n, 2048), 1)
    shutil.rmtree(base / "warm")
    walk_roots = {}
    for label, batch in (("one message per call", 1), ("batches of 32", BATCH)):
        ours, java = [], []
        for s in range(SETS):
            for side in turns(s):
                root = base / f"append-{batch}-{side}-{s}"
                log(f"java side: append {label}, set {s + 1}/{SETS}, {side}: {n} messages")
                if side == "rmqstore":
                    ours.append(ours_append(root, n, batch))
                else:
                    java.append(run_java(cmd, "append", root, n, batch, JAVA_WARM_APPENDS)["append"])
                if batch == BATCH and s == SETS - 1:
                    walk_roots[side] = root
                else:
                    shutil.rmtree(root, ignore_errors=True)
        rows.append(pair_row(f"java-side append 1KiB, {label}", ours, java, "msg/s", messages=n,
                             bytesPerMessage=round(ours[0]["bytes"] / ours[0]["messages"], 1),
                             javaBytesPerMessage=round(java[0]["bytes"] / java[0]["messages"], 1),
                             timedUntil="ConsumeQueue and index dispatched",
                             # Java dispatches on its reput thread: when its last put returned
                             javaPutsReturnedMsgPerSecond=round(max((m["messages"] / m["putsReturnedSeconds"]
                                                                     for m in java if m.get("putsReturnedSeconds")),
                                                                    default=0))))

    walks: dict[str, list] = {"page": [[], []], "decode": [[], []]}
    for s in range(SETS):
        log(f"java side: get-page and decode, set {s + 1}/{SETS}")
        for side in turns(s):
            if side == "rmqstore":
                for k, v in ours_walk(walk_roots["rmqstore"], ctx.reps).items():
                    walks[k][0].append(v)
            else:
                for k, v in run_java(cmd, "walk", walk_roots["java"], ctx.reps).items():
                    walks[k][1].append(v)
    rows.append(pair_row("java-side get-page 1KiB (32-message pages)", *walks["page"], "msg/s",
                         ourCall="get_message(broker=True)", javaCall="getMessage (buffers)"))
    rows.append(pair_row("java-side decode 1KiB (pages + an object per message)", *walks["decode"], "msg/s",
                         ourCall="get_message(broker=True), a Message per message",
                         javaCall="getMessage + MessageDecoder.decode per message"))
    for root in walk_roots.values():
        shutil.rmtree(root, ignore_errors=True)

    import random

    from . import index_gen
    rnd = random.Random(11)
    for load in loads:
        root = base / f"query-{load}"
        log(f"java side: key-query load {load}: building the index")
        n_keys = build_query_store(root, load)
        keys = [index_gen.key_of(rnd.randrange(n_keys)) for _ in range(nq)]
        key_file = base / "keys.txt"
        key_file.write_text("\n".join(keys) + "\n")
        res = {k: ([], []) for k in ("query-offsets", "query-messages", "query-offsets-in-place",
                                     "query-messages-in-place", "query-offsets-batch", "accelerate")}
        for s in range(SETS):
            log(f"java side: key-query load {load}, set {s + 1}/{SETS}: {nq} keys")
            for side in turns(s):
                answers = ours_query(root, keys) if side == "rmqstore" else run_java(cmd, "query", root, key_file)
                for k, v in answers.items():
                    res[k][side == "java"].append(v)
        copy = copy_fields(res["accelerate"][0])
        rows.append(pair_row(f"java-side key-query offsets load {load:g}", *res["query-offsets"], "queries/s",
                             ourCall="IndexService.query_offset (chain copy)", javaCall="IndexService.queryOffset",
                             queries=nq, **batch_fields(res["query-offsets-batch"][0], res["query-offsets"][1]),
                             **in_place_fields(res["query-offsets-in-place"][0], res["query-offsets"][1]), **copy))
        rows.append(pair_row(f"java-side key-query messages load {load:g}", *res["query-messages"], "queries/s",
                             ourCall="query_message(raw=True) (chain copy)", javaCall="DefaultMessageStore.queryMessage",
                             queries=nq, **in_place_fields(res["query-messages-in-place"][0], res["query-messages"][1]),
                             **copy))
        shutil.rmtree(root, ignore_errors=True)
    return rows
