"""Filters pushed into the rocketmq data source and columns pruned: a DataFrame's where() on
topic, queueId, tags, keys, storeTimestamp, commitLogOffset is evaluated by the reader before
anything else is decoded, and a job that needs one column decodes one (the reader's stats)."""
import pytest

from conftest import manifest
from engine.scan.api import JobParams, run_job
from engine.scan.spark_source import read_stats
from scan_support import small, spark  # noqa: F401

pytestmark = pytest.mark.spark


def _reader(spark, small, stats, **opts):
    r = spark.read.format("rocketmq").option("statsDir", str(stats))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(str(small.root))


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_where_queue_id_reads_only_that_queue(spark, small, tmp_path):
    msgs = manifest("small")["messages"]
    want = sorted(m["phyOffset"] for m in msgs if m["queueId"] == 1)
    stats = tmp_path / "q"
    stats.mkdir()
    df = _reader(spark, small, stats).where("queueId = 1").select("commitLogOffset")
    assert "Filter (" not in _plan(df)                   # Spark keeps nothing of it: the reader does it all
    got = sorted(r.commitLogOffset for r in df.collect())
    assert got == want
    st = read_stats(str(stats))
    assert st["records"] == len(msgs)                   # every header of the slices read ...
    assert st["rows"] == len(want)                      # ... only queue 1's records decoded
    assert st["bytes"] == sum(m["totalSize"] for m in msgs if m["queueId"] == 1)


def test_every_pushable_filter_is_exact(spark, small, tmp_path):
    msgs = manifest("small")["messages"]
    ts = sorted(m["storeTimestamp"] for m in msgs)
    t0, t1 = ts[len(ts) // 4], ts[3 * len(ts) // 4]
    off = sorted(m["phyOffset"] for m in msgs)
    o0, o1 = off[100], off[900]
    cases = [
        ("topic = 'TopicTx' AND queueId IN (1, 2)", lambda m: m["topic"] == "TopicTx" and m["queueId"] in (1, 2)),
        ("tags = 'TagA'", lambda m: m["tags"] == "TagA"),
        ("tags IN ('TagA', 'TagB')", lambda m: m["tags"] in ("TagA", "TagB")),
        ("keys = 'order-dup-001'", lambda m: m["keys"] == "order-dup-001"),
        (f"storeTimestamp >= {t0} AND storeTimestamp < {t1}", lambda m: t0 <= m["storeTimestamp"] < t1),
        (f"commitLogOffset > {o0} AND commitLogOffset <= {o1}", lambda m: o0 < m["phyOffset"] <= o1),
    ]
    for i, (where, pred) in enumerate(cases):
        stats = tmp_path / str(i)
        stats.mkdir()
        df = _reader(spark, small, stats).where(where)
        got = sorted(r.commitLogOffset for r in df.select("commitLogOffset").collect())
        want = sorted(m["phyOffset"] for m in msgs if pred(m))
        assert got == want and want, where
        st = read_stats(str(stats))
        assert st["rows"] == len(want), where
        if "commitLogOffset" in where:    # slices outside the range are not read at all
            assert st["records"] < len(msgs)


def test_pruned_columns(spark, small, tmp_path):
    n = len(manifest("small")["messages"])
    for i, df in enumerate([lambda s: _reader(spark, small, s, columns="topic"),
                            lambda s: spark.read.format("rocketmq").schema("topic string")
                            .option("statsDir", str(s)).load(str(small.root))]):
        stats = tmp_path / f"c{i}"
        stats.mkdir()
        frame = df(stats)
        assert frame.columns == ["topic"] and frame.count() == n
        assert read_stats(str(stats))["columns"] == ["topic"]
    stats = tmp_path / "job"
    stats.mkdir()
    run_job(small, "size-histogram", JobParams(stats_dir=str(stats)), engine="spark", spark=spark)
    st = read_stats(str(stats))
    assert st["columns"] == ["storeSize"] and st["rows"] == n    # a one-column job decodes one column
    with pytest.raises(Exception, match="unknown rocketmq columns"):
        spark.read.format("rocketmq").schema("nope string").load(str(small.root)).count()


def test_partitions_follow_the_cluster_parallelism(spark, small):
    """Without minPartitions a read aims at 3 tasks per core of the cluster
    (defaultParallelism), whatever this machine's CPU count."""
    from engine.scan.spark_session import register_sources
    from engine.scan.spark_source import register
    want = 3 * spark.sparkContext.defaultParallelism
    assert want <= spark.read.format("rocketmq").load(str(small.root)).rdd.getNumPartitions() <= 2 * want
    try:
        register(spark, 1)
        assert spark.read.format("rocketmq").load(str(small.root)).rdd.getNumPartitions() <= 2
    finally:
        register_sources(spark)
