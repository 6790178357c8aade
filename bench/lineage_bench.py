"""lineage: `rmqstore lineage` (engine.analysis.lineage) on a big store, under 50 ms a query.

The store: N plain messages written like the big store (bench/big_store.py: 4 topics x 4
queues, batches of 32, 160-byte bodies, default file sizes), then the `lineage` fixture's 855
records replayed after them with the store's writer (same topics, queues, properties, bodies,
sysFlags and reconsumeTimes; a commit copy's preparedTransactionOffset and ORIGIN_MESSAGE_ID
moved to the new offsets; the system queues start empty, so halves keep their queue offsets and
op bodies stay right), and the fixture's consumerOffset.json. Kept under
$RMQSTORE_BENCH_LINEAGE (default /tmp/rmqstore-lineage-N) with a marker written last.

Timed, on the store opened read-only: a query from each of the 855 replayed records (each life
asked from every one of its records: retries with 34 records, transactions through the op
queue), and from 1,000 plain messages of the bulk, each a fresh `lineage(store, offset=...)`
(its consumer offsets read again), and by the UNIQ_KEY of each of the 482 lives. Figures: p50 / p99 / max ms.

    python -m bench.lineage_bench [MESSAGES]     # default 10,000,000; prints JSON, writes
                                                 # bench/results/lineage.json"""
from __future__ import annotations

import json
import lzma
import os
import random
import shutil
import sys
import time
from pathlib import Path

from engine import MessageStore
from engine.analysis.lineage import lineage
from engine.format.message import MessageDraft, parse_host
from engine.format.msgid import decode_offset_msg_id

from .big_store import BATCH, BODY, QUEUES, STEP
from .common import Row, log, row
from .workload import Workload, create_store, put_batches

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures"
MARKER = "rmqstore-bench-lineage.json"
TARGET_MS = 50.0


def root_for(messages: int) -> Path:
    return Path(os.environ.get("RMQSTORE_BENCH_LINEAGE", f"/tmp/rmqstore-lineage-{messages}"))


def _host(text: str) -> bytes:
    addr, port = parse_host(text)
    return addr + port.to_bytes(4, "big", signed=True)


def replay(store, doc: dict) -> dict[int, int]:
    """The fixture's records appended in commitlog order: old offset -> new offset."""
    moved: dict[int, int] = {}
    put = store.writer.put
    for r in doc["records"]:
        props = dict(r["properties"])
        origin = props.get("ORIGIN_MESSAGE_ID")
        if origin:
            old = decode_offset_msg_id(origin)[2]
            if old in moved:
                props["ORIGIN_MESSAGE_ID"] = store.look_message_by_offset(moved[old]).msgId
        prep = moved.get(r["preparedTransactionOffset"], 0) if r["preparedTransactionOffset"] else 0
        d = MessageDraft(topic=r["topic"], body=r["body"].encode("utf-8"), queueId=r["queueId"], flag=r["flag"],
                         properties=props, sysFlag=r["sysFlag"], bornTimestamp=r["bornTimestamp"],
                         bornHost=_host(r["bornHost"]), storeHost=_host(r["storeHost"]),
                         reconsumeTimes=r["reconsumeTimes"], preparedTransactionOffset=prep)
        moved[r["commitLogOffset"]] = put([d])[0].commitLogOffset
    return moved


def ensure(messages: int) -> tuple[Path, dict]:
    root = root_for(messages)
    try:
        d = json.loads((root / MARKER).read_text())
        if d.get("complete") and d.get("messages") == messages:
            return root, d
    except (OSError, ValueError):
        pass
    shutil.rmtree(root, ignore_errors=True)
    log(f"lineage bench: writing {messages:,} messages to {root}")
    wl = Workload((BODY,))
    store = create_store(root)
    t = time.perf_counter()
    batches, b = messages // BATCH, 0
    while b < batches:
        n = min(STEP, batches - b)
        put_batches(store, wl, b, n, BATCH, QUEUES)
        b += n
        if b % 20_000 < STEP:
            log(f"lineage bench: {b * BATCH:,} messages")
    with lzma.open(FIXTURES / "lineage.manifest.json.xz", "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    moved = replay(store, doc)
    secs = time.perf_counter() - t
    offsets: dict = {}
    for tg, queues in doc["consumerOffsets"].items():
        offsets[tg] = {int(q): o for q, o in queues.items()}
    from engine.format.config_json import store_config_json
    store_config_json(root / "config", "consumerOffset.json", {"offsetTable": offsets})
    d = {"complete": True, "messages": batches * BATCH, "replayed": len(moved), "commitlogBytes": store.commitlog.max_offset,
         "indexFiles": len(store.index.files), "writeSeconds": round(secs, 1),
         "moved": {str(k): v for k, v in moved.items()}}
    store.close()
    (root / MARKER).write_text(json.dumps(d) + "\n")
    log(f"lineage bench: {d['messages']:,} + {len(moved)} records, {d['commitlogBytes'] / 1e9:.2f} GB in {secs:.0f} s")
    return root, d


def _pcts(ms: list[float]) -> dict:
    s = sorted(ms)
    return {"n": len(s), "p50": round(s[len(s) // 2], 3), "p99": round(s[min(len(s) - 1, len(s) * 99 // 100)], 3),
            "max": round(s[-1], 3)}


def run_queries(root: Path, marker: dict) -> dict:
    moved = {int(k): v for k, v in marker["moved"].items()}
    with lzma.open(FIXTURES / "lineage.manifest.json.xz", "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    out = {}
    with MessageStore.open(root) as store:
        lives_ok = 0
        for want in doc["lifecycles"].values():   # correctness on the big store first (untimed)
            got = lineage(store, offset=moved[want["originalOffset"]])[0]
            lives_ok += [r["role"] for r in got["records"]] == want["roles"] and got["finalState"] == want["finalState"]
        out["livesMatchingTheManifest"] = f"{lives_ok}/{len(doc['lifecycles'])}"
        ms = []
        for off in moved.values():
            t = time.perf_counter()
            lineage(store, offset=off)
            ms.append((time.perf_counter() - t) * 1000)
        out["fixtureRecords"] = _pcts(ms)
        rnd = random.Random(5)
        cq = [store.find_queue(t, q) for t, q in store.queues if not t.startswith(("%", "RMQ_", "SCHEDULE"))]
        cq = [c for c in cq if c.max_offset > 0]
        ms = []
        for _ in range(1000):
            c = rnd.choice(cq)
            u = c.unit(rnd.randrange(c.min_offset, c.max_offset))
            t = time.perf_counter()
            lineage(store, offset=u[0])
            ms.append((time.perf_counter() - t) * 1000)
        out["bulkMessages"] = _pcts(ms)
        ms = []
        for want in doc["lifecycles"].values():
            t = time.perf_counter()
            lineage(store, uniq=want["uniqKey"])
            ms.append((time.perf_counter() - t) * 1000)
        out["byUniqKey"] = _pcts(ms)
    return out


def run(ctx) -> list[Row]:
    """The bench section `lineage` (python -m bench --only lineage): 10M messages (1M with --quick)."""
    messages = 1_000_000 if ctx.quick else 10_000_000
    root, marker = ensure(messages)
    res = run_queries(root, marker)
    n = marker["messages"] + marker["replayed"]
    out = []
    for k, what in (("fixtureRecords", "from each record of the fixture's lives"), ("bulkMessages", "from plain messages"),
                    ("byUniqKey", "by UNIQ_KEY")):
        out.append(row(f"lineage query {what}, {n:,}-message store, p99", res[k]["p99"], "ms", better="lower",
                       target=f"< {TARGET_MS:g} ms", met=res[k]["p99"] < TARGET_MS, p50=res[k]["p50"], max=res[k]["max"],
                       livesMatchingTheManifest=res["livesMatchingTheManifest"]))
    return out


def main(argv: list[str]) -> int:
    messages = int(argv[0]) if argv else 10_000_000
    root, marker = ensure(messages)
    res = {"messages": marker["messages"] + marker["replayed"], "commitlogBytes": marker["commitlogBytes"],
           "writeSeconds": marker["writeSeconds"], **run_queries(root, marker)}
    worst = max(res[k]["p99"] for k in ("fixtureRecords", "bulkMessages", "byUniqKey"))
    res["target"] = f"p99 < {TARGET_MS:g} ms"
    res["met"] = worst < TARGET_MS
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "lineage.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
