"""The single-process scanner (the Spark oracle) against what the real RocketMQ store said."""
import base64
import collections
import csv
import importlib.util
import json
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import CLEAN, FIXTURES, manifest, unpack
from engine import MessageStore
from engine.format.properties import split_keys
from engine.scan.columns import row_json
from engine.scan.filters import MessageFilter, parse_tags_expression
from engine.scan.api import JobParams, run_job
from engine.tasks import Cancelled as ScanCancelled
from engine.tasks import CancelToken
from engine.scan.planning import plan_commitlog
from engine.scan.reader import read_commitlog
from scan_support import plant_cq_defect, plant_index_defect, small, v5  # noqa: F401


def expected_topic_stats(name, by_queue=False):
    out = {}
    for m in manifest(name)["messages"]:
        k = (m["topic"], m["queueId"]) if by_queue else m["topic"]
        e = out.setdefault(k, {"messages": 0, "bytes": 0, "first": 1 << 62, "last": 0, "sizes": []})
        e["messages"] += 1
        e["bytes"] += m["totalSize"]
        e["first"] = min(e["first"], m["storeTimestamp"])
        e["last"] = max(e["last"], m["storeTimestamp"])
        e["sizes"].append(m["totalSize"])
    return out


@pytest.mark.parametrize("name", ["small", "v5"])
@pytest.mark.parametrize("by_queue", [False, True])
def test_topic_stats_equal_the_manifest(name, by_queue):
    exp = expected_topic_stats(name, by_queue)
    with MessageStore.open(unpack(name)) as store:
        rows = run_job(store, "topic-stats", JobParams(by_queue=by_queue), engine="local").rows
    got = {(r["topic"], r["queueId"]) if by_queue else r["topic"]: r for r in rows}
    assert got.keys() == exp.keys()
    for k, e in exp.items():
        r = got[k]
        assert (r["messages"], r["bytes"], r["firstStoreTimestamp"], r["lastStoreTimestamp"]) == \
            (e["messages"], e["bytes"], e["first"], e["last"]), k
        assert r["sizeP50"] == pytest.approx(np.percentile(e["sizes"], 50))
        assert r["sizeP99"] == pytest.approx(np.percentile(e["sizes"], 99))
    assert sum(r["messages"] for r in rows) == len(manifest(name)["messages"])


def test_traffic_buckets_sum_to_the_manifest(small):
    rows = run_job(small, "traffic", JobParams(bucket="1s"), engine="local").rows
    exp = collections.Counter((m["topic"], m["storeTimestamp"] // 1000 * 1000) for m in manifest("small")["messages"])
    assert {(r["topic"], r["bucketStart"]): r["messages"] for r in rows} == exp
    hour = run_job(small, "traffic", JobParams(bucket="1h"), engine="local").rows
    assert sum(r["bytes"] for r in hour) == sum(m["totalSize"] for m in manifest("small")["messages"])


def test_size_histogram_covers_every_record(v5):
    rows = run_job(v5, "size-histogram", engine="local").rows
    sizes = [m["totalSize"] for m in manifest("v5")["messages"]]
    assert sum(r["messages"] for r in rows) == len(sizes)
    for r in rows:
        assert r["messages"] == sum(1 for s in sizes if r["sizeFrom"] <= s < r["sizeTo"])


def _expect(name, pred):
    return [m["phyOffset"] for m in manifest(name)["messages"] if pred(m)]


@pytest.mark.parametrize("name", ["small", "v5"])
def test_filter_finds_exactly_the_expected_messages(name):
    msgs = manifest(name)["messages"]
    with MessageStore.open(unpack(name)) as store:
        def run(**kw):
            r = run_job(store, "filter", JobParams(filter=MessageFilter.build(**kw), limit=0 or 100000), engine="local")
            return [x["commitLogOffset"] for x in r.rows]
        assert run(key="order-dup-001") == _expect(name, lambda m: "order-dup-001" in split_keys(m["keys"]))
        uniq = msgs[5]["uniqKey"]
        assert run(key=uniq) == _expect(name, lambda m: m["uniqKey"] == uniq)
        tags = parse_tags_expression("TagA || TagB")
        assert run(tags=" TagA ||TagB") == _expect(name, lambda m: m["tags"] in tags)
        assert run(tags="*", topics=["TopicTx"]) == _expect(name, lambda m: m["topic"] == "TopicTx")
        assert run(prop="CLUSTER=^Default") == _expect(name, lambda m: m["properties"].get("CLUSTER", "").startswith("Default"))
        assert run(topics=["TopicTest"], queue_ids=[2]) == \
            _expect(name, lambda m: m["topic"] == "TopicTest" and m["queueId"] == 2)

        def body_text(m):   # decompressed where a codec is at hand (zlib always; lz4 / zstd if installed)
            codec = (m["sysFlag"] >> 8) & 7
            usable = codec in (0, 3) or importlib.util.find_spec({1: "lz4", 2: "zstandard"}.get(codec, "-")) is not None
            raw = base64.b64decode(m["bodyDecompressed"] if "bodyDecompressed" in m and usable else m["body"])
            return raw.decode("utf-8", "replace")
        rx = r"lorem ipsum dolor sit amet\nline 2|SKU-0\b|tx body [0-3]\b|RocketMQ #1[0-9]\b"
        expected = _expect(name, lambda m: re.search(rx, body_text(m)) is not None)
        assert len(expected) > 5
        assert run(body=rx) == expected


def test_filter_rows_are_message_to_json_and_limited(small):
    r = run_job(small, "filter", JobParams(filter=MessageFilter.build(topics=["Orders_v2-EU"]), limit=50), engine="local")
    assert r.truncated and len(r.rows) == 50
    ref = [m.to_json() for m in small.iter_messages() if m.topic == "Orders_v2-EU"][:50]
    assert r.rows == ref


@pytest.mark.parametrize("name", ["small", "v5"])
def test_duplicates_equal_the_manifest(name):
    msgs = manifest(name)["messages"]
    with MessageStore.open(unpack(name)) as store:
        for per_topic in (False, True):
            rows = run_job(store, "duplicates", JobParams(per_topic=per_topic), engine="local").rows
            groups = collections.defaultdict(list)
            for m in msgs:
                if m["uniqKey"]:
                    groups[(m["uniqKey"], m["topic"]) if per_topic else m["uniqKey"]].append(m["phyOffset"])
            exp = {k: sorted(v) for k, v in groups.items() if len(v) > 1}
            got = {(r["uniqKey"], r["topic"]) if per_topic else r["uniqKey"]: r["commitLogOffsets"] for r in rows}
            assert got == exp and all(r["copies"] == len(r["commitLogOffsets"]) for r in rows)


def test_top_keys_and_tags(small):
    msgs = manifest("small")["messages"]
    keys = collections.Counter((m["topic"], k) for m in msgs for k in set(split_keys(m["keys"])))
    rows = run_job(small, "top-keys", JobParams(limit=5), engine="local").rows
    exp = sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [((r["topic"], r["key"]), r["messages"]) for r in rows] == exp
    tags = collections.Counter((m["topic"], m["tags"]) for m in msgs if m["tags"] is not None)
    rows = run_job(small, "top-tags", JobParams(limit=1000), engine="local").rows
    assert {(r["topic"], r["tags"]): r["messages"] for r in rows} == tags


@pytest.mark.parametrize("name", CLEAN)
def test_consistency_of_a_good_store_finds_nothing(name):
    with MessageStore.open(unpack(name)) as store:
        assert run_job(store, "consistency", engine="local").rows == []


def test_consistency_finds_each_planted_defect(fixture_copy):
    root = fixture_copy("small")
    cq_file, cq_pos = plant_cq_defect(root)
    idx_file, idx_pos = plant_index_defect(root)
    with MessageStore.open(root) as store:
        rows = run_job(store, "consistency", engine="local").rows
    assert [(r["structure"], r["problem"], r["file"], r["fileOffset"]) for r in rows] == [
        ("consumequeue", "unit differs", cq_file, cq_pos), ("index", "entry differs", idx_file, idx_pos)]
    assert rows[0]["expected"]["size"] != 999 and rows[0]["actual"]["size"] == 999
    assert rows[1]["actual"]["phyOffset"] == rows[1]["expected"]["phyOffset"] + 1
    assert rows[1]["actual"]["commitLogOffset"] == rows[1]["actual"]["phyOffset"]   # one name, the old one an alias


def test_consistency_reports_index_entries_of_truncated_records():
    """crashed_torn: the torn record is gone, the index still names it (RocketMQ's recovery
    would drop that index file and rebuild it)."""
    m = manifest("crashed_torn")
    torn = m["corruption"]
    with MessageStore.open(unpack("crashed_torn")) as store:
        rows = run_job(store, "consistency", engine="local").rows
        end = store.max_offset
    assert rows and all(r["structure"] == "index" and r["problem"] == "entry without record" for r in rows)
    assert all(r["commitLogOffset"] >= end for r in rows), torn


def test_columns_decode_every_fixture_like_the_engine():
    for name in FIXTURES:
        with MessageStore.open(unpack(name)) as store:
            plan = plan_commitlog(store, split_bytes=5000)
            rows = [r for s in plan.commitlog for b in read_commitlog(s, plan.delay_level_millis, max_records=61)
                    for r in b.rows_json()]
            assert rows == [m.to_json() for m in store.iter_messages()], name


def test_local_export_round_trips(small, tmp_path):
    out = tmp_path / "small.parquet"
    r = run_job(small, "export", JobParams(format="parquet", out=str(out)), engine="local")
    assert r.rows[0]["rows"] == 2339
    t = pq.read_table(out)
    assert t.num_rows == 2339
    back = [row_json(r) for r in t.to_pylist()]
    back = [{**b, "properties": dict(b["properties"])} for b in back]
    assert back == [m.to_json() for m in small.iter_messages()]
    js = tmp_path / "small.jsonl"
    run_job(small, "export", JobParams(format="jsonl", out=str(js), filter=MessageFilter.build(key="order-dup-001")),
            engine="local")
    lines = [json.loads(x) for x in js.read_text().splitlines()]
    assert [x["commitLogOffset"] for x in lines] == _expect("small", lambda m: "order-dup-001" in split_keys(m["keys"]))
    with pytest.raises(FileExistsError):
        run_job(small, "export", JobParams(format="jsonl", out=str(js)), engine="local")
    cs = tmp_path / "small.csv"
    run_job(small, "export", JobParams(format="csv", out=str(cs)), engine="local")
    with open(cs, newline="", encoding="utf-8") as fh:
        recs = list(csv.DictReader(fh))
    ref = [m.to_json() for m in small.iter_messages()]
    assert len(recs) == len(ref)
    assert [json.loads(r["properties"]) for r in recs] == [m["properties"] for m in ref]
    assert [r["body"] for r in recs] == [m["body"] for m in ref]


def test_local_cancel_between_blocks(small):
    tok = CancelToken()
    seen = []

    def progress(p):
        seen.append(p.done)
        tok.cancel()
    with pytest.raises(ScanCancelled):
        run_job(small, "topic-stats", JobParams(split_bytes=4096), engine="local", progress=progress, cancel=tok)
    assert seen == [1]


def test_bad_parameters_are_value_errors(small):
    for job, p in [("traffic", JobParams(bucket="2x")), ("export", JobParams(out=None)),
                   ("export", JobParams(out="x", format="xml")), ("nope", JobParams())]:
        with pytest.raises(ValueError):
            run_job(small, job, p, engine="local")
    with pytest.raises(ValueError):
        MessageFilter.build(body="(")
    with pytest.raises(ValueError):
        MessageFilter.build(prop="novalue")


def test_scan_task_yields_progress_and_leaves_its_token_alone(small):
    from engine.scan.api import scan_task
    tok = CancelToken()
    task = scan_task(small, "size-histogram", JobParams(split_bytes=4096), engine="local", cancel=tok)
    seen = []
    while True:
        try:
            seen.append(next(task))
        except StopIteration as stop:
            result = stop.value
            break
    assert len(seen) > 2 and seen[-1].done == seen[-1].total and not tok.cancelled
    assert result.rows == run_job(small, "size-histogram", engine="local").rows


def test_closing_a_scan_task_stops_its_thread(small):
    import threading
    from engine.scan.api import scan_task
    tok = CancelToken()
    task = scan_task(small, "topic-stats", JobParams(split_bytes=4096, throttle_ms=50), engine="local", cancel=tok)
    next(task)
    task.close()    # what the GUI's runner and the CLI's Ctrl-C do
    assert tok.cancelled
    assert not [t for t in threading.enumerate() if t.name == "rmqstore-scan-topic-stats"]
