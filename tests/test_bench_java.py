"""The bench's Java side (bench/java_side.py + bench/java/StoreBench.java).

The parsing and ratio tests run everywhere. The driver test needs RocketMQ 4.9.7's jars
(JAVA_LIB=DIR, a binary distribution's lib/) and a JDK; CI has no RocketMQ jars, so it is
skipped there with the reason said."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bench import java_side
from bench.__main__ import main as bench_main

CANNED = """\
SLF4J(W): No SLF4J providers were found.
{"workload": "append", "rocketmq": "V4_9_7", "java": "17.0.15", "batch": 32, "seconds": 0.5, "messages": 20000, "bytes": 24300000, "warmMessages": 20000}
RocketMQLog:WARN No appenders could be found for logger (RocketmqCommon).
{"workload": "query-offsets", "rocketmq": "V4_9_7", "java": "17.0.15", "seconds": 0.25, "queries": 1000, "hits": 1000, "p50Us": 2.0, "p99Us": 8.0}
{"not a result": 1}
{"workload": "broken",
"""


def test_parse_lines_keeps_only_the_drivers_json_objects():
    lines = java_side.parse_lines(CANNED)
    assert [d["workload"] for d in lines] == ["append", "query-offsets"]
    assert lines[0]["messages"] == 20000 and lines[0]["seconds"] == 0.5
    assert lines[1]["p99Us"] == 8.0


def test_pair_row_ratio_is_ours_over_java_best_set_each():
    java = java_side.parse_lines(CANNED)
    j_append = [java[0], dict(java[0], seconds=0.4)]            # 40,000 and 50,000 msg/s: best 50,000
    ours = [{"seconds": 1.0, "messages": 20000}, {"seconds": 0.8, "messages": 20000}]  # best 25,000
    r = java_side.pair_row("java-side append", ours, j_append, "msg/s")
    assert r.value == 25000 and r.baselineValue == 50000
    assert r.ratio == pytest.approx(0.5)
    assert r.baseline == "RocketMQ DefaultMessageStore V4_9_7"
    assert r.extra["oursSets"] == [20000.0, 25000.0] and r.extra["javaSets"] == [40000.0, 50000.0]
    assert r.extra["javaVersion"] == "17.0.15"
    assert "p50Us" not in r.extra  # appends carry no latencies
    j = r.to_json()
    assert j["ratio"] == 0.5 and j["better"] == "higher"


def test_pair_row_latencies_and_their_ratios():
    java = [java_side.parse_lines(CANNED)[1]]                   # 4,000 queries/s, p50 2 us, p99 8 us
    ours = [{"seconds": 0.1, "queries": 1000, "p50Us": 1.0, "p99Us": 4.0},
            {"seconds": 0.2, "queries": 1000, "p50Us": 0.5, "p99Us": 6.0}]
    r = java_side.pair_row("java-side key-query offsets load 2", ours, java, "queries/s", queries=1000)
    assert r.value == 10000 and r.baselineValue == 4000 and r.ratio == pytest.approx(2.5)
    assert (r.extra["p50Us"], r.extra["javaP50Us"], r.extra["p50Ratio"]) == (0.5, 2.0, 0.25)
    assert (r.extra["p99Us"], r.extra["javaP99Us"], r.extra["p99Ratio"]) == (4.0, 8.0, 0.5)
    assert r.extra["queries"] == 1000


def test_batch_fields_are_the_batched_rate_over_javas_best_single_rate():
    java = [{"seconds": 0.5, "queries": 1000}, {"seconds": 0.25, "queries": 1000}]   # best 4,000/s
    batch = [{"seconds": 0.1, "queries": 1000}, {"seconds": 0.125, "queries": 1000}]  # best 10,000/s
    f = java_side.batch_fields(batch, java)
    assert f["batchQueriesPerSecond"] == 10000 and f["batchRatio"] == 2.5
    assert f["batchSets"] == [10000.0, 8000.0] and "query_offsets" in f["batchCall"]
    r = java_side.pair_row("java-side key-query offsets load 4", [{"seconds": 0.5, "queries": 1000}], java,
                           "queries/s", **f)
    assert r.value == 2000 and r.ratio == pytest.approx(0.5)   # the row's main figure stays the single call's
    assert r.extra["batchRatio"] == 2.5


def test_our_query_side_times_the_batched_api_on_the_same_keys(tmp_path):
    """Without Java: our side of the key-query workload on a small index; the batched pass
    answers the same keys with the same hits as the single-call pass."""
    from bench import index_gen
    n = java_side.build_query_store(tmp_path / "q", 0.001)
    keys = [index_gen.key_of(i * 37 % n) for i in range(1500)] + ["absent"]
    oq = java_side.ours_query(tmp_path / "q", keys)
    assert set(oq) == {"query-offsets", "query-messages", "query-offsets-batch", "query-offsets-in-place",
                       "query-messages-in-place", "accelerate"}
    b = oq["query-offsets-batch"]
    assert b["queries"] == oq["query-offsets"]["queries"] == len(keys)
    assert b["hits"] == oq["query-offsets"]["hits"] == oq["query-offsets-in-place"]["hits"] >= 1500
    assert oq["query-messages"]["hits"] == oq["query-messages-in-place"]["hits"] >= 1500 and b["seconds"] > 0
    assert oq["accelerate"]["built"] == ["20260101000000000"] and oq["accelerate"]["bytes"] > 0
    f = java_side.in_place_fields([oq["query-offsets-in-place"]], [oq["query-offsets"]])
    assert f["inPlaceQueriesPerSecond"] > 0 and f["inPlaceRatio"] > 0


def test_bench_refuses_the_java_section_without_jars(tmp_path, capsys):
    assert bench_main(["--only", "java", "--out", str(tmp_path / "r.json")]) == 2
    assert "needs --java-lib" in capsys.readouterr().err
    assert bench_main(["--only", "java", "--java-lib", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "no rocketmq*.jar" in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def _java_lib() -> Path:
    lib = os.environ.get("JAVA_LIB")
    if not lib:
        pytest.skip("JAVA_LIB is not set: the Java side needs RocketMQ 4.9.7's jars (a binary distribution's lib/)")
    if not list(Path(lib).glob("rocketmq*.jar")):
        pytest.skip(f"JAVA_LIB={lib} holds no rocketmq*.jar")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK (javac, java) on PATH")
    return Path(lib)


def test_driver_against_rocketmq_jars(tmp_path):
    """Compile StoreBench against the jars, append 256 messages in batches of 32 and walk
    them with RocketMQ's store; the same batches on our side write the same commitlog bytes
    count; the store Java wrote reads back through our engine; key queries on a store our
    engine wrote find the same hits on both sides."""
    lib = _java_lib()
    cmd = java_side.java_command(lib, java_side.compile_driver(lib, tmp_path / "classes"))
    j = java_side.run_java(cmd, "append", tmp_path / "java", 256, 32, 0, timeout=120)["append"]
    assert j["messages"] == 256 and j["rocketmq"] == "V4_9_7"
    ours = java_side.ours_append(tmp_path / "ours", 256, 32)
    assert ours["messages"] == 256 and ours["bytes"] == j["bytes"]     # the same record sizes

    walk = java_side.run_java(cmd, "walk", tmp_path / "java", 1, timeout=120)
    assert walk["page"]["messages"] == walk["decode"]["messages"] == 256
    assert walk["page"]["bytes"] == j["bytes"]
    mine = java_side.ours_walk(tmp_path / "java", 1)               # our engine on the store Java wrote
    assert mine["page"]["messages"] == 256 and mine["page"]["bytes"] == j["bytes"]
    again = java_side.run_java(cmd, "walk", tmp_path / "java", 1, timeout=120)  # the bench's second set
    assert again["decode"]["messages"] == 256

    n = java_side.build_query_store(tmp_path / "q", 0.001)         # 5,000 keys in a default-size index
    from bench import index_gen
    keys = [index_gen.key_of(i * 37 % n) for i in range(50)]
    (tmp_path / "keys.txt").write_text("\n".join(keys) + "\n")
    jq = java_side.run_java(cmd, "query", tmp_path / "q", tmp_path / "keys.txt", timeout=120)
    oq = java_side.ours_query(tmp_path / "q", keys)
    for mode in ("query-offsets", "query-messages"):
        assert jq[mode]["queries"] == oq[mode]["queries"] == 50
        assert jq[mode]["hits"] == oq[mode]["hits"] >= 50


def test_java_section_end_to_end(tmp_path, monkeypatch):
    """The whole section on tiny sizes: every row present, both sides measured, ratio = ours / Java."""
    from types import SimpleNamespace
    lib = _java_lib()
    monkeypatch.setattr(java_side, "SETS", 1)
    monkeypatch.setattr(java_side, "BUILD", tmp_path / "classes")
    ctx = SimpleNamespace(tmp=tmp_path, quick=True, reps=1, java_lib=str(lib), java_sizes=(256, 50, (0.001,)))
    rows = java_side.run(ctx)
    names = [r.name for r in rows]
    assert names == ["java-side append 1KiB, one message per call", "java-side append 1KiB, batches of 32",
                     "java-side get-page 1KiB (32-message pages)",
                     "java-side decode 1KiB (pages + an object per message)",
                     "java-side key-query offsets load 0.001", "java-side key-query messages load 0.001"]
    for r in rows:
        assert r.value > 0 and r.baselineValue > 0 and r.ratio == pytest.approx(r.value / r.baselineValue)
        assert r.baseline == "RocketMQ DefaultMessageStore V4_9_7"
    assert rows[0].extra["bytesPerMessage"] == rows[0].extra["javaBytesPerMessage"]
    assert rows[4].extra["p99Us"] > 0 and rows[4].extra["javaP99Us"] > 0
    assert rows[4].extra["batchQueriesPerSecond"] > 0 and rows[4].extra["batchRatio"] > 0
