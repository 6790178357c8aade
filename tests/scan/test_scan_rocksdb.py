"""Spark on a RocksDB-CQ store (v5_rocksdb_cq): the commitlog source reads every record; the
ConsumeQueue source reads the units from the RocksDB folder."""
from __future__ import annotations

import pytest

from conftest import manifest, unpack
from scan_support import spark  # noqa: F401

pytestmark = pytest.mark.spark


def test_commitlog_and_cq_sources_read_it(spark):  # noqa: F811
    root = str(unpack("v5_rocksdb_cq"))
    rows = spark.read.format("rocketmq").option("columns", "topic,queueId,queueOffset").load(root).collect()
    want = {(m["topic"], m["queueId"], m["queueOffset"]) for m in manifest("v5_rocksdb_cq")["messages"]}
    assert {(r.topic, r.queueId, r.queueOffset) for r in rows} == want and len(rows) == 400
    cq = spark.read.format("rocketmq-cq").load(root).collect()
    want = {(q["topic"], q["queueId"], u[0], u[2], u[3], u[4]) for q in manifest("v5_rocksdb_cq")["consume_queues"]
            for u in q["units"]}
    assert {(r.topic, r.queueId, r.queueOffset, r.commitLogOffset, r.size, r.tagsCode) for r in cq} == want
    assert len(cq) == 400 and {(r.file, r.position) for r in cq} == {("consumequeue", -1)}


def test_consistency_on_spark_equals_local(spark):  # noqa: F811
    from engine import MessageStore
    from engine.scan.api import run_job
    with MessageStore.open(unpack("v5_rocksdb_cq")) as store:
        assert run_job(store, "consistency", engine="spark", spark=spark).rows == []
        assert run_job(store, "consistency", engine="local").rows == []
