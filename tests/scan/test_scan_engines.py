"""One answer whatever the engine: every job gives the same JSON on Spark and --local (to the
last digit; test_scan_spark adds the jobs with other parameters on small), CSV exports follow RFC 4180 on both, and a compressed body that cannot be
decoded is marked and never searched as compressed bytes."""
import csv
import json
import sys

import pytest

from conftest import manifest
from engine import MessageStore
from engine.scan.api import JobParams, MessageFilter, run_job
from engine.scan.jobs import exact_percentile
from scan_support import QUOTED_KEYS, make_quoted_store, small, spark, v5  # noqa: F401

JOBS = [("topic-stats", JobParams()), ("topic-stats", JobParams(by_queue=True)), ("traffic", JobParams(bucket="1s")),
        ("size-histogram", JobParams()), ("top-keys", JobParams(limit=50)), ("top-tags", JobParams()),
        ("duplicates", JobParams()), ("duplicates", JobParams(per_topic=True)),
        ("filter", JobParams(filter=MessageFilter.build(topics=["Orders_v2-EU"]))), ("consistency", JobParams())]


def test_percentile_rule():
    assert exact_percentile([1, 2, 3, 4], 50) == 2.5
    assert exact_percentile([7], 99) == 7.0
    assert exact_percentile(list(range(101)), 99) == 99.0
    # (n-1)*0.99 in floating point is 2.9699999999999998 for n=4; the rule uses exact hundredths
    assert exact_percentile([0, 0, 0, 1000], 99) == 970.0
    sizes = sorted(m["totalSize"] for m in manifest("small")["messages"] if m["topic"] == "TopicTest")
    lower, frac = divmod((len(sizes) - 1) * 99, 100)
    assert exact_percentile(sizes, 99) == (sizes[lower] * 100 + (sizes[lower + 1] - sizes[lower]) * frac) / 100


@pytest.mark.spark
@pytest.mark.parametrize("job,params", JOBS, ids=[f"{j}-{i}" for i, (j, _) in enumerate(JOBS)])
def test_same_json_on_both_engines(spark, small, v5, job, params):
    for store in (small, v5):
        a = run_job(store, job, params, engine="local")
        b = run_job(store, job, params, engine="spark", spark=spark)
        assert json.dumps(b.rows) == json.dumps(a.rows), (job, store.root)
        assert (b.truncated, b.engine, b.master) == (a.truncated, "spark", "local[2]")


def _csv(path):
    files = sorted(path.glob("part-*")) if path.is_dir() else [path]
    rows = []
    for f in files:
        with open(f, newline="", encoding="utf-8") as fh:
            rows.extend(csv.DictReader(fh))
    return sorted(rows, key=lambda r: int(r["commitLogOffset"]))


@pytest.mark.spark
def test_csv_is_rfc4180_on_both_engines(spark, tmp_path):
    with MessageStore.open(make_quoted_store(tmp_path / "store")) as store:
        run_job(store, "export", JobParams(format="csv", out=str(tmp_path / "local.csv")), engine="local")
        run_job(store, "export", JobParams(format="csv", out=str(tmp_path / "spark.csv")), engine="spark", spark=spark)
        ref = [m.to_json() for m in store.iter_messages()]
    a, b = _csv(tmp_path / "local.csv"), _csv(tmp_path / "spark.csv")
    assert a == b and len(a) == len(ref) == 22
    assert [r["keys"] for r in a] == [m["keys"] or "" for m in ref]
    assert {k for k in QUOTED_KEYS if k} <= {r["keys"] for r in a}
    assert [r["tags"] for r in a] == [m["tags"] or "" for m in ref]
    assert [json.loads(r["properties"]) for r in b] == [m["properties"] for m in ref]
    raw = next((tmp_path / "spark.csv").glob("part-*")).read_text()
    assert ',"say ""hi"", then\nleave",' in raw    # quotes doubled (RFC 4180), not backslash-escaped


def _needles(store, engine, spark=None):
    return run_job(store, "filter", JobParams(filter=MessageFilter.build(body="needle")), engine=engine,
                   spark=spark).rows


@pytest.mark.spark
def test_undecodable_bodies_are_marked_not_searched(spark, tmp_path):
    with MessageStore.open(make_quoted_store(tmp_path / "store")) as store:
        for engine in ("local", "spark"):
            rows = _needles(store, engine, spark)
            assert [r["keys"] for r in rows] == ["zlib", "plain"], engine   # not the raw ZSTD/LZ4 bytes
            assert all("bodyDecoded" not in r for r in rows)
        every = run_job(store, "filter", JobParams(), engine="local").rows
        flagged = [r["keys"] for r in every if r.get("bodyDecoded") is False]
        assert flagged == ["zstd", "lz4"]
        assert run_job(store, "filter", JobParams(), engine="spark", spark=spark).rows == every
        df = spark.read.format("rocketmq").option("columns", "keys,bodyDecoded").load(str(store.root))
        assert {r["keys"]: r["bodyDecoded"] for r in df.collect()} == {r["keys"]: r.get("bodyDecoded", True)
                                                                      for r in every}
        run_job(store, "export", JobParams(format="jsonl", out=str(tmp_path / "l.jsonl")), engine="local")
        run_job(store, "export", JobParams(format="jsonl", out=str(tmp_path / "s.jsonl")), engine="spark", spark=spark)
        lines = [json.loads(x) for p in (tmp_path / "s.jsonl").glob("part-*") for x in p.read_text().splitlines()]
        local = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
        assert sorted(lines, key=lambda r: r["commitLogOffset"]) == local == every


def test_a_missing_codec_module_marks_the_body(small, monkeypatch):
    """The fixture's real ZSTD and LZ4 bodies decode with the modules installed; without
    them (simulated: the import fails) they are marked and no longer match."""
    flt = JobParams(filter=MessageFilter.build(topics=["Orders_v2-EU"], key="zip-zstd-4"))
    row, = run_job(small, "filter", flt, engine="local").rows
    assert "bodyDecoded" not in row
    body = JobParams(filter=MessageFilter.build(topics=["Orders_v2-EU"], body="."))
    n_all = len(run_job(small, "filter", body, engine="local").rows)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    monkeypatch.setitem(sys.modules, "lz4", None)
    monkeypatch.setitem(sys.modules, "lz4.frame", None)
    row, = run_job(small, "filter", flt, engine="local").rows
    assert row["bodyDecoded"] is False
    assert len(run_job(small, "filter", body, engine="local").rows) == n_all - 4   # 2 LZ4 + 2 ZSTD bodies
