"""The bench's Java side (bench/java_side.py + bench/java/StoreBench.java) and its ruler
(bench/steady.py).

The parsing, ratio and steady-state tests, and our side of every workload on small stores,
run everywhere. The driver tests need RocketMQ 4.9.7's jars (JAVA_LIB=DIR, a binary
distribution's lib/) and a JDK; CI has no RocketMQ jars, so they are skipped there with the
reason said."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import java_side, steady
from bench.__main__ import main as bench_main

CANNED = """\
SLF4J(W): No SLF4J providers were found.
{"workload": "append", "rocketmq": "V4_9_7", "java": "17.0.15", "seconds": 5.0, "messages": 1048576, "bytes": 1274019840, "warmSeconds": 6.5, "warmPasses": 21, "timedPasses": 16, "batch": 32, "encodedInClock": 1, "storeBytesBefore": 1100000000, "preEncodedSeconds": 4.0, "preEncodedMessages": 1048576}
RocketMQLog:WARN No appenders could be found for logger (RocketmqCommon).
{"workload": "query-offsets", "rocketmq": "V4_9_7", "java": "17.0.15", "seconds": 5.0, "queries": 2000000, "bytes": 0, "warmSeconds": 1.5, "warmPasses": 9, "timedPasses": 20, "hits": 100000, "hitsInWindow": 2000000, "p50Us": 2.0, "p99Us": 8.0}
{"not a result": 1}
{"workload": "broken",
"""


def test_a_disk_rocketmq_would_call_full_is_refused_before_the_section(tmp_path, monkeypatch):
    """RocketMQ answers every put SERVICE_NOT_AVAILABLE once its disk is over 90% used (a full
    run lost its java rows so): the section says so before it starts, with the room to free."""
    from bench import java_driver
    st = os.statvfs(tmp_path)
    whole = ((st.f_blocks - st.f_bfree) + st.f_bavail) * st.f_frsize
    monkeypatch.setattr(java_driver, "JAVA_HEADROOM", whole)
    with pytest.raises(java_side.JavaSideError, match=r"RocketMQ refuses puts above 90%.*free [\d.]+ GiB more"):
        java_side.disk_room(tmp_path)


def test_parse_lines_keeps_only_the_drivers_json_objects():
    lines = java_side.parse_lines(CANNED)
    assert [d["workload"] for d in lines] == ["append", "query-offsets"]
    assert lines[0]["messages"] == 1048576 and lines[0]["warmSeconds"] == 6.5
    assert lines[1]["p99Us"] == 8.0 and lines[1]["hits"] == 100000


def _sets(base: dict, seconds: list[float], **kw) -> list[dict]:
    return [dict(base, seconds=s, **kw) for s in seconds]


def test_pair_row_is_the_ratio_of_medians_with_the_ranges_beside_it():
    j0 = java_side.parse_lines(CANNED)[0]                       # 1,048,576 messages a set
    java = _sets(j0, [4.0, 8.0, 5.0, 2.0, 6.0])                 # median 5 s: 209,715 msg/s
    ours = _sets({"messages": 1_048_576, "warmSeconds": 3.0}, [2.5, 2.0, 10.0, 3.0, 4.0])  # median 3 s
    r = java_side.pair_row("java-side append", ours, java, "msg/s", "n/a", "n/a",
                           {"start": [1.0, 2.0, 3.0], "end": [2.0, 2.0, 3.0]})
    assert r.value == pytest.approx(1_048_576 / 3.0) and r.baselineValue == pytest.approx(1_048_576 / 5.0)
    assert r.ratio == pytest.approx(5.0 / 3.0)                  # not best / best (2.0 s against 2.0 s = 1.0)
    assert r.baseline == "RocketMQ DefaultMessageStore V4_9_7"
    assert r.extra["oursRange"] == [round(1_048_576 / 10.0, 1), round(1_048_576 / 2.0, 1)]
    assert r.extra["javaRange"] == [round(1_048_576 / 8.0, 1), round(1_048_576 / 2.0, 1)]
    assert len(r.extra["oursSets"]) == len(r.extra["javaSets"]) == 5
    assert r.extra["messagesPerSet"] == 1_048_576 and r.extra["warmSeconds"] == 6.5
    assert r.extra["oursWarmSeconds"] == [3.0] * 5 and r.extra["javaWarmSeconds"] == [6.5] * 5
    assert (r.extra["fieldsRead"], r.extra["accel"]) == ("n/a", "n/a")
    assert r.extra["loadAverage"] == [1.0, 2.0, 3.0] and r.extra["statistic"] == "median of 5 interleaved sets"
    assert "p50Us" not in r.extra  # appends carry no latencies
    j = r.to_json()
    assert j["better"] == "higher" and j["extra"]["javaVersion"] == "17.0.15"


def test_pair_row_latencies_are_the_median_sets_and_their_ratios():
    jq = java_side.parse_lines(CANNED)[1]                       # 400,000 queries/s, p50 2 us, p99 8 us
    java = [jq, dict(jq, p50Us=4.0, p99Us=10.0), dict(jq, p50Us=1.0, p99Us=6.0)]
    ours = [{"seconds": 5.0, "queries": 1_000_000, "p50Us": p50, "p99Us": p99, "warmSeconds": 1.0}
            for p50, p99 in ((1.0, 4.0), (0.5, 6.0), (3.0, 5.0))]
    r = java_side.pair_row("java-side key-query offsets load 2", ours, java, "queries/s", "none", "in-place")
    assert r.value == 200_000 and r.baselineValue == 400_000 and r.ratio == pytest.approx(0.5)
    assert (r.extra["p50Us"], r.extra["javaP50Us"], r.extra["p50Ratio"]) == (1.0, 2.0, 0.5)
    assert (r.extra["p99Us"], r.extra["javaP99Us"], r.extra["p99Ratio"]) == (5.0, 8.0, 0.625)
    assert r.extra["messagesPerSet"] == 1_000_000 and r.extra["accel"] == "in-place"


def test_batch_fields_are_the_batched_median_over_javas_median_single_rate():
    java = [{"seconds": 0.5, "queries": 1000}, {"seconds": 0.25, "queries": 1000}, {"seconds": 0.2, "queries": 1000}]
    batch = [{"seconds": 0.1, "queries": 1000}, {"seconds": 0.125, "queries": 1000}, {"seconds": 0.05, "queries": 1000}]
    f = java_side.batch_fields(batch, java)                     # 10,000/s over 4,000/s
    assert f["batchQueriesPerSecond"] == 10000 and f["batchRatio"] == 2.5
    assert f["batchRange"] == [8000.0, 20000.0] and "query_offsets" in f["batchCall"]


def test_agree_needs_three_passes_within_five_percent():
    assert not steady.agree([100.0, 100.0])
    assert steady.agree([50.0, 100.0, 96.0, 100.0])
    assert not steady.agree([100.0, 94.0, 100.0])
    assert not steady.agree([0.0, 0.0, 0.0])


def test_steady_warms_until_the_rates_agree_then_times_a_whole_window():
    rates = iter([10.0, 40.0, 80.0, 100.0, 99.0, 98.0] + [100.0] * 100)   # a JIT: fast after 3 passes

    def one_pass():
        return {"seconds": 0.01, "messages": int(next(rates) / 100 * 1000), "bytes": 7}
    out = steady.steady(one_pass, min_secs=0.05, min_count=3000, warm_secs=60)
    assert out["warmPasses"] == 6                               # 100, 99, 98 agree: the 3 before did not
    assert out["timedPasses"] == 5 and out["messages"] == 5000  # 0.05 s of window, >= 3000 messages
    assert out["seconds"] == pytest.approx(0.05) and out["bytes"] == 35


def test_steady_gives_up_warming_after_warm_secs_but_waits_for_ready():
    state = {"n": 0}

    def one_pass():
        state["n"] += 1
        return {"seconds": 0.001, "messages": state["n"] % 2 * 90 + 10}   # never steady
    out = steady.steady(one_pass, 0.0, 1, warm_secs=0.0, ready=lambda: state["n"] >= 4)
    assert out["warmPasses"] == 4 and out["timedPasses"] == 1


def test_query_store_plan_fills_a_gibibyte_at_each_load():
    for load in java_side.LOADS:
        n, entries = java_side.query_store_plan(load)
        assert entries == min(int(load * 5_000_000), 19_999_999)
        per_message = 1211 + 17 * (entries - n) / n
        assert n * per_message >= java_side.QUERY_LOG_BYTES > 1 << 30


def _our_keyed_store(root: Path, n: int = 3000) -> list[str]:
    """A small store our engine writes: message i has key k{i} and a UNIQ_KEY."""
    from bench.workload import create_store
    store = create_store(root)
    for i in range(n):
        store.put_message(java_side.TOPIC, b"x" * 100, i % 4, java_side.TAG, [f"key{i:06d}"])
    store.close()
    return [f"key{i:06d}" for i in range(0, n, 7)]


def test_our_query_side_in_place_batched_copies_and_active(tmp_path):
    """Without Java: our side of the key-query workloads on a small store; in place, batched
    and over the copies answer the same hits; the active-file row's copy is dropped by its put."""
    keys = _our_keyed_store(tmp_path / "q") + ["absent"]
    oq = java_side.ours_query(tmp_path / "q", keys, min_secs=0.05, warm_secs=0.2)
    assert set(oq) == {"query-offsets", "query-messages", "query-offsets-batch", "query-offsets-copy",
                       "query-messages-copy", "accelerate"}
    hits = oq["query-offsets"]["hits"]
    assert hits >= len(keys) - 1
    assert oq["query-messages"]["hits"] == oq["query-offsets-copy"]["hits"] == oq["query-messages-copy"]["hits"] == hits
    for k in ("query-offsets", "query-messages", "query-offsets-copy", "query-offsets-batch"):
        assert oq[k]["seconds"] >= 0.05 and oq[k]["queries"] % len(keys) == 0 and oq[k]["warmPasses"] >= 1
    assert oq["query-offsets"]["p99Us"] >= oq["query-offsets"]["p50Us"] > 0
    assert oq["accelerate"]["built"] and oq["accelerate"]["bytes"] > 0
    act = java_side.ours_active(tmp_path / "q", keys, min_secs=0.05, warm_secs=0.2)
    assert act["copyUsedOnActiveFile"] is False and act["hits"] == hits and act["copiesBuilt"] >= 1


def test_our_append_and_walk_sides(tmp_path):
    """Our appends: messages built in the clock, the window holds min_messages; the walks:
    every field read, lazy and pages over the same messages."""
    for batch in (1, 32):
        a = java_side.ours_append(tmp_path / f"a{batch}", batch, min_messages=8192, min_secs=0.01,
                                  warm_secs=0.5, roll=False, pass_messages=2048)
        assert a["messages"] >= 8192 and a["messages"] % 2048 == 0 and a["bytes"] > 1000 * a["messages"]
        assert a["warmPasses"] >= 1 and a["storeBytesBefore"] > 0
        assert not (tmp_path / f"a{batch}-scratch").exists()
    from bench.workload import create_store
    store = create_store(tmp_path / "w")
    app = java_side.Appender(store, 32)
    app(1024)
    store.close()
    w = java_side.ours_walk(tmp_path / "w", min_secs=0.02, warm_secs=0.5)
    assert set(w) == {"page", "decode", "decode-lazy"}
    for m in w.values():
        assert m["messages"] % 1024 == 0 and m["messages"] >= 1024 and m["seconds"] >= 0.02


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
    """Compile StoreBench against the jars; Java's appends write records of our size; a store
    RocketMQ wrote (mkstore) walks and queries the same on both sides; its query keys hit
    distinct messages."""
    lib = _java_lib()
    cmd = java_side.java_command(lib, java_side.compile_driver(lib, tmp_path / "classes"))
    j = java_side.run_java(cmd, "append", tmp_path / "java", 32, 4096, 0.01, 0.5, 0, timeout=300)["append"]
    assert j["messages"] >= 4096 and j["rocketmq"] == "V4_9_7" and j["preEncodedMessages"] >= 4096
    ours = java_side.ours_append(tmp_path / "ours", 32, 4096, 0.01, 0.5, roll=False, pass_messages=4096)
    assert ours["bytes"] / ours["messages"] == j["bytes"] / j["messages"]     # the same record sizes

    keyfile = tmp_path / "keys.txt"
    made = java_side.run_java(cmd, "mkstore", tmp_path / "q", 2000, 5000, 3, 200, keyfile, timeout=300)["mkstore"]
    keys = keyfile.read_text().split()
    assert made["messages"] == 2000 and len(keys) == len(set(keys)) == 200
    walk = java_side.run_java(cmd, "walk", tmp_path / "q", 0.05, 0.5, timeout=300)
    mine = java_side.ours_walk(tmp_path / "q", 0.05, 0.5)            # our engine on the store Java wrote
    assert walk["page"]["messages"] % 2000 == 0 and mine["page"]["messages"] % 2000 == 0
    assert walk["page"]["bytes"] / walk["page"]["messages"] == mine["page"]["bytes"] / mine["page"]["messages"]
    jq = java_side.run_java(cmd, "query", tmp_path / "q", keyfile, 0.05, 0.5, timeout=300)
    oq = java_side.ours_query(tmp_path / "q", keys, 0.05, 0.5)
    for mode in ("query-offsets", "query-messages"):
        assert jq[mode]["hits"] == oq[mode]["hits"] >= 200
    from engine import MessageStore
    with MessageStore.open(tmp_path / "q") as s:   # each key a distinct message
        offs = [s.index.query_offset(java_side.TOPIC, k, 64, 0, 1 << 62)[0] for k in keys]
    assert len({o[0] for o in offs if o}) == 200


def test_java_section_end_to_end(tmp_path, monkeypatch):
    """The whole section on tiny sizes: every row present, both sides measured, ratio = ours / Java,
    the ruler's fields on every row."""
    lib = _java_lib()
    monkeypatch.setattr(java_side, "BUILD", tmp_path / "classes")
    ctx = SimpleNamespace(tmp=tmp_path, quick=True, java_lib=str(lib), java_sizes={
        "sets": 1, "min_secs": 0.02, "warm_secs": 0.3, "min_append": 4096, "pass_messages": 2048, "roll": False,
        "walk_messages": 2048, "query_keys": 100, "log_bytes": 2_000_000, "loads": (0.001,),
        "stores": tmp_path / "stores"})
    rows = java_side.run(ctx)
    names = [r.name for r in rows]
    assert names == ["java-side append 1KiB, one message per call", "java-side append 1KiB, batches of 32",
                     "java-side get-page 1KiB (32-message pages)", "java-side decode 1KiB, every field",
                     "java-side decode 1KiB, lazy (no field built)",
                     "java-side key-query offsets load 0.001", "java-side key-query messages load 0.001",
                     "java-side key-query offsets load 0.001, chain copies",
                     "java-side key-query messages load 0.001, chain copies",
                     "java-side key-query offsets load 0.001, active index file"]
    for r in rows:
        assert r.value > 0 and r.baselineValue > 0 and r.ratio == pytest.approx(r.value / r.baselineValue)
        assert r.baseline == "RocketMQ DefaultMessageStore V4_9_7"
        for k in ("fieldsRead", "accel", "messagesPerSet", "warmSeconds", "oursRange", "javaRange", "loadAverage"):
            assert r.extra[k] is not None, (r.name, k)
    assert rows[0].extra["bytesPerMessage"] == rows[0].extra["javaBytesPerMessage"]
    assert rows[1].extra["javaPreEncodedMsgPerSecond"] > 0
    assert rows[3].extra["fieldsRead"] == "all" and rows[4].extra["fieldsRead"] == "none"
    assert rows[5].extra["accel"] == "in-place" and rows[7].extra["accel"] == "chain-copy"
    assert rows[7].extra["buildSeconds"] >= 0 and rows[7].extra["bytes"] > 0
    assert rows[9].extra["copyUsedOnActiveFile"] is False


def test_bench_stores_folder_made_or_refused(tmp_path, capsys):
    """--dir: a missing folder is made; one that cannot be (a file in its path) is a clear refusal."""
    (tmp_path / "f").write_bytes(b"")
    assert bench_main(["--only", "open", "--dir", str(tmp_path / "f" / "x"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot make a folder for the stores" in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()
