"""The Spark data sources and jobs on one real local SparkSession, against the conformance
manifests and against the local scanner (the oracle)."""
import json
import math
import threading
import time

import pyarrow.parquet as pq
import pytest

from conftest import manifest
from engine import MessageStore
from engine.scan.columns import row_json
from engine.scan.filters import MessageFilter
from engine.scan.api import JobParams, run_job
from engine.tasks import Cancelled as ScanCancelled
from engine.tasks import CancelToken
from scan_support import plant_cq_defect, small, spark, v5  # noqa: F401

pytestmark = pytest.mark.spark


def same_rows(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], float) or isinstance(y[k], float):
                assert math.isclose(x[k], y[k], rel_tol=1e-12), (k, x, y)
            else:
                assert x[k] == y[k], (k, x, y)


def test_message_source_rows_are_the_messages(spark, small, v5):
    for store in (small, v5):
        rows = spark.read.format("rocketmq").load(str(store.root)).orderBy("commitLogOffset").collect()
        got = [row_json(r.asDict()) for r in rows]
        assert got == [m.to_json() for m in store.iter_messages()]


def test_message_source_options(spark, small):
    df = (spark.read.format("rocketmq").option("columns", "topic,queueId,storeSize").option("TOPIC", "TopicTx")
          .option("queueId", "1,2").option("mappedFileSizeCommitLog", "65536").load(str(small.root)))
    assert df.columns == ["topic", "queueId", "storeSize"]
    exp = [m for m in manifest("small")["messages"] if m["topic"] == "TopicTx" and m["queueId"] in (1, 2)]
    rows = df.collect()
    assert len(rows) == len(exp) and sum(r.storeSize for r in rows) == sum(m["totalSize"] for m in exp)
    tagged = spark.read.format("rocketmq").option("tags", "TagA || TagB").option("splitBytes", "16384").load(str(small.root))
    assert tagged.rdd.getNumPartitions() > 2 * 12
    packed = spark.read.format("rocketmq").option("minPartitions", "3").option("columns", "storeSize").load(str(small.root))
    assert packed.rdd.getNumPartitions() <= 4      # 12 small files packed into about 3 tasks
    assert packed.count() == len(manifest("small")["messages"])
    assert tagged.count() == sum(1 for m in manifest("small")["messages"] if m["tags"] in ("TagA", "TagB"))


def test_cq_source_equals_the_manifest(spark, small):
    rows = spark.read.format("rocketmq-cq").load(str(small.root)).collect()
    got = {(r.topic, r.queueId, r.queueOffset, r.phyOffset, r.size, r.tagsCode) for r in rows}
    exp = {(q["topic"], q["queueId"], u[0], u[1], u[2], u[3]) for q in manifest("small")["consume_queues"]
           for u in q["units"]}
    assert got == exp and len(rows) == len(exp)
    r = rows[0]
    assert r.file == f"consumequeue/{r.topic}/{r.queueId}/{(r.queueOffset * 20 // 1000) * 1000:020d}"
    assert r.position == r.queueOffset * 20 % 1000


def test_index_source_equals_the_manifest(spark, small):
    rows = spark.read.format("rocketmq-index").load(str(small.root)).collect()
    got = {(r.file.split("/")[-1], r["index"], r.keyHash, r.phyOffset, r.timeDiff, r.prevIndex) for r in rows}
    exp = {(f["name"], *e) for f in manifest("small")["index_files"] for e in f["entries"]}
    assert got == exp and len(rows) == len(exp)
    assert all(r.slot == r.keyHash % 64 and r.position == 40 + 64 * 4 + 20 * r["index"] for r in rows)


# the jobs test_scan_engines does not run on small (topic-stats, by queue too, traffic by 1 s,
# size-histogram, duplicates per topic and consistency it runs there, asserting the same and more)
JOBS = [("top-keys", JobParams()), ("top-tags", JobParams(limit=7)),
        ("filter", JobParams(filter=MessageFilter.build(key="order-dup-001"))),
        ("filter", JobParams(filter=MessageFilter.build(topics=["Orders_v2-EU"], body="lorem|SKU"), limit=3))]


@pytest.mark.parametrize("job,params", JOBS, ids=[f"{j}-{i}" for i, (j, _) in enumerate(JOBS)])
def test_spark_equals_local_on_small(spark, small, job, params):
    a = run_job(small, job, params, engine="local")
    b = run_job(small, job, params, engine="spark", spark=spark)
    same_rows(b.rows, a.rows)
    assert (b.truncated, b.engine, b.master) == (a.truncated, "spark", "local[2]")


def test_topic_stats_on_spark_equal_the_v5_manifest(spark, v5):
    rows = run_job(v5, "topic-stats", engine="spark", spark=spark).rows
    exp = {}
    for m in manifest("v5")["messages"]:
        e = exp.setdefault(m["topic"], [0, 0, 1 << 62, 0])
        e[0] += 1
        e[1] += m["totalSize"]
        e[2] = min(e[2], m["storeTimestamp"])
        e[3] = max(e[3], m["storeTimestamp"])
    assert {r["topic"]: [r["messages"], r["bytes"], r["firstStoreTimestamp"], r["lastStoreTimestamp"]]
            for r in rows} == exp
    same_rows(rows, run_job(v5, "topic-stats", engine="local").rows)


def test_spark_consistency_good_and_planted(spark, v5, fixture_copy):
    assert run_job(v5, "consistency", engine="spark", spark=spark).rows == []
    root = fixture_copy("small")
    rel, pos = plant_cq_defect(root, topic="Orders_v2-EU", queue_id=2, queue_offset=61, size=12345)
    with MessageStore.open(root) as store:
        rows = run_job(store, "consistency", engine="spark", spark=spark).rows
    assert len(rows) == 1
    r = rows[0]
    assert (r["problem"], r["file"], r["fileOffset"], r["queueOffset"]) == ("unit differs", rel, pos, 61)
    assert rel.endswith("00000000000000001000") and pos == 220 and r["actual"]["size"] == 12345


def test_spark_export_round_trips(spark, small, tmp_path):
    out = tmp_path / "parquet"
    r = run_job(small, "export", JobParams(format="parquet", out=str(out)), engine="spark", spark=spark).rows[0]
    assert r["rows"] == 2339 and r["files"] >= 1
    t = pq.read_table(out).sort_by("commitLogOffset")
    back = [row_json({**x, "properties": dict(x["properties"])}) for x in t.to_pylist()]
    assert back == [m.to_json() for m in small.iter_messages()]
    js = tmp_path / "jsonl"
    flt = MessageFilter.build(key="order-dup-001")
    r = run_job(small, "export", JobParams(format="jsonl", out=str(js), filter=flt), engine="spark", spark=spark).rows[0]
    lines = [json.loads(x) for p in sorted(js.glob("part-*")) for x in p.read_text().splitlines()]
    local = run_job(small, "filter", JobParams(filter=flt), engine="local").rows
    assert r["rows"] == len(lines) == len(local)
    assert sorted(lines, key=lambda x: x["commitLogOffset"]) == local


def test_progress_and_cancel_leave_the_session_usable(spark, small):
    """A job slowed down per block (hundreds of tasks) is cancelled from another thread
    within a few seconds; the same session then runs the next job."""
    tok = CancelToken()
    seen, box = [], {}
    params = JobParams(split_bytes=4096, throttle_ms=400)

    def work():
        try:
            box["result"] = run_job(small, "topic-stats", params, engine="spark", spark=spark,
                                    progress=seen.append, cancel=tok)
        except BaseException as e:
            box["error"] = e
    t = threading.Thread(target=work)
    t.start()
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.done > 0 for p in seen):
        time.sleep(0.05)
    assert any(p.done > 0 for p in seen), "no task finished"
    running = [p for p in seen if p.total][-1]
    assert running.total >= 100 and running.stages[0].total >= 100
    t0 = time.time()
    tok.cancel()
    t.join(30)
    took = time.time() - t0
    assert not t.is_alive() and isinstance(box.get("error"), ScanCancelled), box
    assert took < 5, took
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    rows = run_job(small, "top-tags", JobParams(limit=3), engine="spark", spark=spark).rows
    assert len(rows) == 3
