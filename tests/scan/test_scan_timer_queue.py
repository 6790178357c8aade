"""The timer queue (`rmq_sys_wheel_timer`, 5.x timer store) through the scans: it is an ordinary
ConsumeQueue over ordinary records, so the `rocketmq` and `rocketmq-cq` Spark sources and the
local engine read it like any topic. Checked against the v5_timer manifest (RocketMQ 5.3.3)."""
import json

import pytest

from conftest import manifest, unpack
from engine.cli.app import main as rmqstore
from scan_support import spark  # noqa: F401

TIMER_TOPIC = "rmq_sys_wheel_timer"
M = manifest("v5_timer")
WHEEL = [m for m in M["messages"] if m["topic"] == TIMER_TOPIC]
CQ = next(q for q in M["consume_queues"] if q["topic"] == TIMER_TOPIC)


def test_local_scan_reads_the_timer_queue(capsys):
    code = rmqstore(["scan", str(unpack("v5_timer")), "filter", "--topic", TIMER_TOPIC, "--local", "--json",
                     "--limit", "1000"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert len(WHEEL) == 133
    assert sorted((r["commitLogOffset"], r["queueOffset"], r["properties"].get("TIMER_OUT_MS"),
                   r["properties"].get("REAL_TOPIC"), r["properties"].get("TIMER_ROLL_TIMES")) for r in rows) == \
        sorted((m["phyOffset"], m["queueOffset"], m["properties"]["TIMER_OUT_MS"], m["properties"]["REAL_TOPIC"],
                m["properties"].get("TIMER_ROLL_TIMES")) for m in WHEEL)
    code = rmqstore(["scan", str(unpack("v5_timer")), "topic-stats", "--local", "--json"])
    out, err = capsys.readouterr()
    stats = {r["topic"]: r["messages"] for r in json.loads(out)["rows"]}
    assert stats[TIMER_TOPIC] == len(WHEEL) == CQ["maxOffset"]


@pytest.mark.spark
def test_spark_sources_read_the_timer_queue(spark):
    root = str(unpack("v5_timer"))
    units = spark.read.format("rocketmq-cq").option("topic", TIMER_TOPIC).load(root).collect()
    assert sorted((r.queueId, r.queueOffset, r.commitLogOffset, r.size, r.tagsCode) for r in units) == \
        sorted((0, u[1], u[2], u[3], u[4]) for u in CQ["units"])
    rows = (spark.read.format("rocketmq").option("topic", TIMER_TOPIC)
            .option("columns", "commitLogOffset,queueOffset,properties").load(root).collect())
    assert sorted((r.commitLogOffset, r.queueOffset, r.properties["TIMER_OUT_MS"], r.properties["REAL_QID"])
                  for r in rows) == \
        sorted((m["phyOffset"], m["queueOffset"], m["properties"]["TIMER_OUT_MS"], m["properties"]["REAL_QID"])
               for m in WHEEL)
