"""Spark on a RocksDB-CQ store (v5_rocksdb_cq): the commitlog source reads every record; the
ConsumeQueue-file source cannot read queues kept in RocksDB and says so in its error."""
from __future__ import annotations

import pytest

from conftest import manifest, unpack
from scan_support import spark  # noqa: F401

pytestmark = pytest.mark.spark


def test_commitlog_source_reads_and_cq_source_says_why_not(spark):  # noqa: F811
    root = str(unpack("v5_rocksdb_cq"))
    rows = spark.read.format("rocketmq").option("columns", "topic,queueId,queueOffset").load(root).collect()
    want = {(m["topic"], m["queueId"], m["queueOffset"]) for m in manifest("v5_rocksdb_cq")["messages"]}
    assert {(r.topic, r.queueId, r.queueOffset) for r in rows} == want and len(rows) == 400
    with pytest.raises(Exception) as e:
        spark.read.format("rocketmq-cq").load(root).collect()
    assert "consume queues in RocksDB" in str(e.value)
