"""Scans on 5.x LMQ and BatchCQ stores (the real v5_lmq / v5_batchcq fixtures): the
rocketmq-cq source reads the LMQ queues as RocketMQ answered them; the consistency job finds
nothing on the good stores (LMQ units matched by commitlog offset, BatchCQ records expected in
batchconsumequeue/) and finds a planted defect in an LMQ unit and in a BatchCQ unit, on both
engines alike."""
from __future__ import annotations

import os
import struct

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.scan.api import run_job
from scan_support import plant_cq_defect, spark  # noqa: F401


def plant_batch_defect(root, topic="BatchTopic", queue_id=1, unit=3, batch_size=5) -> tuple[str, int]:
    rel = os.path.join("batchconsumequeue", topic, str(queue_id), "00000000000000000000")
    with open(os.path.join(root, rel), "r+b") as fh:
        fh.seek(unit * 46 + 36)
        fh.write(struct.pack(">h", batch_size))
    return rel, unit * 46


def _planted(fixture_copy):
    lmq = fixture_copy("v5_lmq")
    rel, pos = plant_cq_defect(lmq, topic="%LMQ%b", queue_id=0, queue_offset=7, size=4242)
    bcq = fixture_copy("v5_batchcq")
    brel, bpos = plant_batch_defect(bcq)
    return (lmq, rel, pos), (bcq, brel, bpos)


@pytest.mark.parametrize("name", ["v5_lmq", "v5_batchcq"])
def test_local_consistency_is_clean_on_the_real_stores(name):
    with MessageStore.open(unpack(name)) as store:
        assert run_job(store, "consistency", engine="local").rows == []


def test_local_consistency_finds_planted_lmq_and_batch_defects(fixture_copy):
    (lmq, rel, pos), (bcq, brel, bpos) = _planted(fixture_copy)
    with MessageStore.open(lmq) as store:
        rows = run_job(store, "consistency", engine="local").rows
    assert [(r["problem"], r["file"], r["fileOffset"], r["topic"], r["queueOffset"], r["actual"]["size"])
            for r in rows] == [("unit differs", rel, pos, "%LMQ%b", 7, 4242)]
    with MessageStore.open(bcq) as store:
        rows = run_job(store, "consistency", engine="local").rows
    assert {r["problem"].split(" ")[0] for r in rows} == {"unit"} and len(rows) == 2
    differs = [r for r in rows if r["problem"] == "unit differs"][0]
    assert (differs["file"], differs["fileOffset"], differs["actual"]["batchSize"]) == (brel, bpos, 5)
    assert differs["expected"]["batchSize"] == 9


@pytest.mark.spark
def test_spark_reads_lmq_queues_and_agrees_on_consistency(spark, fixture_copy):
    root = unpack("v5_lmq")
    rows = spark.read.format("rocketmq-cq").option("topic", "%LMQ%a,%LMQ%c").load(str(root)).collect()
    got = {(r.topic, r.queueOffset, r.commitLogOffset, r.size, r.tagsCode) for r in rows}
    exp = {(q["topic"], u[1], u[2], u[3], u[4]) for q in manifest("v5_lmq")["consume_queues"]
           if q["topic"] in ("%LMQ%a", "%LMQ%c") for u in q["units"]}
    assert got == exp and len(rows) == 99 + 41
    for name in ("v5_lmq", "v5_batchcq"):
        with MessageStore.open(unpack(name)) as store:
            assert run_job(store, "consistency", engine="spark", spark=spark).rows == []
    for root, _, _ in _planted(fixture_copy):
        with MessageStore.open(root) as store:
            a = run_job(store, "consistency", engine="local").rows
            b = run_job(store, "consistency", engine="spark", spark=spark).rows
        assert a == b and a
