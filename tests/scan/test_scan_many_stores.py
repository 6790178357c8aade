"""Many stores, one job: store specs (repeated, globs, cluster layouts), broker names, and every
job over two stores equal to the single-store runs with a broker column, on both engines."""
import json

import pytest

from conftest import manifest
from engine import MessageStore
from engine.cli.app import main as rmqstore
from engine.scan.api import JobParams, MessageFilter, ScanStore, resolve_stores, run_job
from scan_support import cluster, spark  # noqa: F401

AGGREGATES = [("topic-stats", JobParams()), ("topic-stats", JobParams(by_queue=True)),
              ("traffic", JobParams(bucket="1s")), ("size-histogram", JobParams()), ("duplicates", JobParams()),
              ("duplicates", JobParams(per_topic=True))]


def test_store_specs(cluster, tmp_path):
    root, stores = cluster
    want = sorted(stores.items())
    assert [(r.broker, r.path) for r in resolve_stores([str(root)])] == want                 # layout
    assert [(r.broker, r.path) for r in resolve_stores([f"{root}/*/store"])] == want         # glob
    assert [(r.broker, r.path) for r in resolve_stores([stores["broker-a"], f"file://{stores['broker-b-conf']}",
                                                        stores["broker-a"]])] == want          # repeated, once each
    (tmp_path / "b1" / "m").mkdir(parents=True)          # <root>/<brokerName>/<store>...: the folder names it
    (tmp_path / "b1" / "m" / "commitlog").mkdir()
    assert [(r.broker, r.path) for r in resolve_stores([str(tmp_path)])] == [("b1", str(tmp_path / "b1" / "m"))]
    with pytest.raises(ValueError, match="no such folder"):
        resolve_stores([str(tmp_path / "nope")])
    with pytest.raises(ValueError, match="no RocketMQ store"):
        resolve_stores([str(tmp_path / "x*")])


def _open(stores):
    return [ScanStore(b, p, MessageStore.open(p)) for b, p in sorted(stores.items())]


def _singles(members, job, params):
    """The rows of each single-store --local run, with the broker in front."""
    out = []
    for m in members:
        out += [{"broker": m.broker, **r} for r in run_job(m.store, job, params, engine="local").rows]
    return out


@pytest.mark.parametrize("job,params", AGGREGATES, ids=[f"{j}-{i}" for i, (j, _) in enumerate(AGGREGATES)])
def test_local_aggregates_are_the_single_runs_with_a_broker(cluster, job, params):
    members = _open(cluster[1])
    try:
        r = run_job(members, job, params, engine="local")
        assert r.rows == _singles(members, job, params)
        assert r.to_json()["stores"] == [{"broker": m.broker, "store": m.path} for m in members]
    finally:
        for m in members:
            m.store.close()


def test_cli_topic_stats_local_two_stores(cluster, capsys):
    stores = cluster[1]
    code = rmqstore(["scan", "topic-stats", "--local", "--json", "--store", stores["broker-a"],
                     "--store", stores["broker-b-conf"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads(out)["rows"]
    for broker, fixture in (("broker-a", "small"), ("broker-b-conf", "v5")):
        mine = [r for r in rows if r["broker"] == broker]
        assert sum(r["messages"] for r in mine) == len(manifest(fixture)["messages"])
        assert sum(r["bytes"] for r in mine) == sum(m["totalSize"] for m in manifest(fixture)["messages"])


@pytest.mark.spark
def test_every_job_on_two_stores_equals_local(spark, cluster):
    members = _open(cluster[1])
    jobs = AGGREGATES + [("top-keys", JobParams()), ("top-tags", JobParams(limit=5)),
                         ("filter", JobParams(filter=MessageFilter.build(key="order-dup-001"))),
                         ("filter", JobParams(limit=7)), ("consistency", JobParams())]
    try:
        for job, params in jobs:
            a = run_job(members, job, params, engine="local")
            b = run_job(members, job, params, engine="spark", spark=spark)
            assert json.dumps(b.rows) == json.dumps(a.rows), job
            assert b.truncated == a.truncated, job
            assert {r["broker"] for r in a.rows} <= {"broker-a", "broker-b-conf"}
        assert {r["store"] for r in run_job(members, "filter", JobParams(limit=5000), engine="local").rows} == \
            {m.path for m in members}
    finally:
        for m in members:
            m.store.close()


@pytest.mark.spark
def test_cli_spark_two_stores_is_the_sum_of_local_runs(spark, cluster, capsys):
    stores = cluster[1]
    code = rmqstore(["scan", "--master", "local[2]", "topic-stats", "--json", "--store", stores["broker-a"],
                     "--store", stores["broker-b-conf"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    both = json.loads(out)
    single = []
    for broker in ("broker-a", "broker-b-conf"):
        assert rmqstore(["scan", stores[broker], "topic-stats", "--local", "--json"]) == 0
        single += [{"broker": broker, **r} for r in json.loads(capsys.readouterr()[0])["rows"]]
    assert both["rows"] == single and both["engine"] == "spark"


@pytest.mark.spark
def test_data_source_reads_a_cluster_layout(spark, cluster):
    root, stores = cluster
    df = spark.read.format("rocketmq").option("columns", "broker,store,topic").load(str(root))
    got = {(r.broker, r.store): r["count"] for r in df.groupBy("broker", "store").count().collect()}
    assert got == {("broker-a", stores["broker-a"]): len(manifest("small")["messages"]),
                   ("broker-b-conf", stores["broker-b-conf"]): len(manifest("v5")["messages"])}
    cq = spark.read.format("rocketmq-cq").load(f"{root}/*/store")
    assert {r.broker for r in cq.select("broker").distinct().collect()} == {"broker-a", "broker-b-conf"}


@pytest.mark.spark
def test_export_of_two_stores_reads_back_equal(spark, cluster, tmp_path):
    import csv
    members = _open(cluster[1])
    try:
        for fmt in ("jsonl", "csv"):
            a = run_job(members, "export", JobParams(format=fmt, out=str(tmp_path / f"l.{fmt}")), engine="local")
            b = run_job(members, "export", JobParams(format=fmt, out=f"file://{tmp_path}/s.{fmt}"), engine="spark",
                        spark=spark)
            assert a.rows[0]["rows"] == b.rows[0]["rows"] == sum(len(list(m.store.iter_messages())) for m in members)
            if fmt == "jsonl":
                local = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
                back = [json.loads(x) for p in (tmp_path / "s.jsonl").glob("part-*") for x in p.read_text().splitlines()]
            else:
                with open(tmp_path / "l.csv", newline="") as fh:
                    local = list(csv.DictReader(fh))
                back = []
                for p in (tmp_path / "s.csv").glob("part-*"):
                    with open(p, newline="") as fh:
                        back += list(csv.DictReader(fh))
            key = (lambda r: (r["broker"], r["store"], int(r["commitLogOffset"])))
            assert sorted(back, key=key) == local and list(local[0])[:2] == ["broker", "store"], fmt
            assert {r["broker"] for r in local} == {"broker-a", "broker-b-conf"}
    finally:
        for m in members:
            m.store.close()
