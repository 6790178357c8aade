"""Stores on any filesystem (engine.scan.remote): the same store as a plain path (mapped), as a
file:// URI forced through the listing planner and the byte-range reader
(RMQSTORE_SCAN_FS_READER=1), and on a second, real filesystem -- an S3 endpoint over HTTP on
loopback (moto's server; pyarrow's S3FileSystem talks to it) -- give every commitlog job the
same JSON on both engines."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import unpack
from engine.scan.api import JobParams, MessageFilter, open_scan_store, run_job
from engine.scan.planning import plan_commitlog
from engine.scan.reader import SliceStats, read_commitlog
from engine.scan.remote import FORCE_ENV, RemoteStore, read_commitlog_ranges, store_uri
from scan_support import spark, stop_process  # noqa: F401

JOBS = [("topic-stats", JobParams()), ("topic-stats", JobParams(by_queue=True)), ("traffic", JobParams(bucket="1s")),
        ("size-histogram", JobParams()), ("top-keys", JobParams(limit=50)), ("top-tags", JobParams()),
        ("duplicates", JobParams(per_topic=True)),
        ("filter", JobParams(filter=MessageFilter.build(topics=["TopicTest"]), limit=40))]
STORES = ("small", "v5")


def _offsets(blocks):
    return np.concatenate([b.commit_log_offsets for b in blocks] or [np.empty(0, np.int64)])


@pytest.mark.parametrize("window", [97, 300, 4096, 1 << 20])
def test_ranged_reader_equals_the_mapped_one_across_windows(window):
    """Windows smaller than a record, and cutting records anywhere: the same records,
    the same stops, the same decoded fields as the mapped reader."""
    root = unpack("small")
    with open_scan_store(str(root)) as local:
        plan = plan_commitlog(local, None)
    remote = RemoteStore(store_uri(str(root)))
    rplan = plan_commitlog(remote, None)
    assert [s.path for s in rplan.commitlog] == [store_uri(s.path) for s in plan.commitlog]
    a_stats, b_stats = SliceStats(), SliceStats()
    a = [blk for s in plan.commitlog for blk in read_commitlog(s, plan.delay_level_millis, a_stats)]
    b = [blk for s in rplan.commitlog
         for blk in read_commitlog_ranges(s, rplan.delay_level_millis, b_stats, window=window)]
    assert len(_offsets(a)) == 2339 and np.array_equal(_offsets(a), _offsets(b))
    assert a_stats.records == b_stats.records and a_stats.size_mismatch == b_stats.size_mismatch
    rows_a = [r for blk in a for r in blk.rows_json(mark=True)]
    rows_b = [r for blk in b for r in blk.rows_json(mark=True)]
    assert json.dumps(rows_a) == json.dumps(rows_b)


def test_listing_plan_reads_no_whole_file(monkeypatch):
    """The driver lists commitlog/: one slice per file, paths URIs, nothing read."""
    monkeypatch.setenv(FORCE_ENV, "1")
    root = unpack("small")
    with open_scan_store(str(root)) as st:
        assert isinstance(st, RemoteStore) and st.scan_broker == "small"
        plan = plan_commitlog(st, None)
    names = sorted(os.listdir(root / "commitlog"))
    assert [s.path for s in plan.commitlog] == [f"file://{root}/commitlog/{n}" for n in names]
    assert all(s.start == 0 and s.end == s.limit == s.file_size for s in plan.commitlog)


def _runs(stores: dict, engine: str, spark=None):
    out = {}
    for name, st in stores.items():
        out[name] = [json.dumps(run_job(st, job, params, engine=engine, spark=spark).rows) for job, params in JOBS]
    return out


def _three_ways(monkeypatch, extra: dict | None = None):
    """{store name: [(kind, store)]}: plain path (mapped), file:// forced through ranges."""
    ways = {}
    for name in STORES:
        root = str(unpack(name))
        ways[name] = [("path", open_scan_store(root))]
        monkeypatch.setenv(FORCE_ENV, "1")
        ways[name].append(("file-uri-ranges", open_scan_store("file://" + root)))
        monkeypatch.delenv(FORCE_ENV)
        if extra and name in extra:
            ways[name].append(("s3", open_scan_store(extra[name])))
    return ways


def _check_equal(ways, engine, spark=None):
    for name, forms in ways.items():
        ref = None
        for kind, st in forms:
            rows = [json.dumps(run_job(st, job, p, engine=engine, spark=spark).rows) for job, p in JOBS]
            assert all(len(r) > 2 for r in rows[:6]), (name, kind)
            if ref is None:
                ref = rows
            for (job, _), x, y in zip(JOBS, ref, rows):
                assert x == y, (name, kind, job)
            st.close()


def _snapshot(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_commitlog_job_equal_local(monkeypatch):
    before = {n: _snapshot(unpack(n)) for n in STORES}
    _check_equal(_three_ways(monkeypatch), "local")
    assert before == {n: _snapshot(unpack(n)) for n in STORES}   # read-only: not one file touched


def test_forced_ranges_on_a_path_with_a_space(monkeypatch, tmp_path):
    import shutil
    root = tmp_path / "a store %20"
    shutil.copytree(unpack("small") / "commitlog", root / "commitlog")
    monkeypatch.setenv(FORCE_ENV, "1")
    with open_scan_store(str(root)) as st:
        assert st.root.endswith("/a%20store%20%2520")
        rows = run_job(st, "size-histogram", JobParams(), engine="local").rows
    assert sum(r["messages"] for r in rows) == 2339


def _parquet(path):
    import pyarrow.parquet as pq
    rows = pq.read_table(path).to_pylist()
    return sorted(({**r, "properties": dict(r["properties"] or [])} for r in rows), key=lambda r: r["commitLogOffset"])


@pytest.mark.spark
def test_export_from_remote_stores_equal(monkeypatch, spark, s3_stores, tmp_path):
    """export of the S3 store on both engines reads back as the plain path's export."""
    params = lambda out: JobParams(out=str(out), filter=MessageFilter.build(topics=["TopicTest"]))
    with open_scan_store(str(unpack("small"))) as st:
        run_job(st, "export", params(tmp_path / "ref.parquet"), engine="local")
    with open_scan_store(s3_stores["small"]) as st:
        run_job(st, "export", params(tmp_path / "s3.parquet"), engine="local")
        run_job(st, "export", params(tmp_path / "s3-spark.parquet"), engine="spark", spark=spark)
    ref = _parquet(tmp_path / "ref.parquet")
    assert len(ref) > 100 and ref == _parquet(tmp_path / "s3.parquet") == _parquet(tmp_path / "s3-spark.parquet")


def test_consistency_and_topic_stats_of_a_remote_store_on_the_cli(monkeypatch, capsys):
    from engine.cli.scan import main
    monkeypatch.setenv(FORCE_ENV, "1")
    assert main([f"file://{unpack('small')}", "consistency", "--local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []
    assert main([f"file://{unpack('small')}", "topic-stats", "--local", "--json"]) == 0
    ranged = json.loads(capsys.readouterr().out)["rows"]
    monkeypatch.delenv(FORCE_ENV)
    assert main([str(unpack("small")), "topic-stats", "--local", "--json"]) == 0
    assert ranged == json.loads(capsys.readouterr().out)["rows"] and len(ranged) == 9


# ---- a second filesystem: S3 over HTTP (moto's server on loopback) -------------------------------
def _free_port() -> int:
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


@pytest.fixture(scope="module")
def s3_stores():
    """The fixtures' commitlogs uploaded to a bucket of a real S3 HTTP endpoint on 127.0.0.1:
    moto's server in a process of its own (moto_server, from the test extra), so every read
    crosses HTTP as it would to a remote S3; the credentials ride in the URI
    (access:secret@bucket) so Spark's workers need no env."""
    import pyarrow.fs as pafs
    exe = Path(sys.executable).with_name("moto_server")
    assert exe.exists(), "moto_server missing: install the test extra (pip install -e '.[test]')"
    port = _free_port()
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.1)
        q = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
        fs, _ = pafs.FileSystem.from_uri(f"s3://test:test@rmq?{q}&allow_bucket_creation=true")
        fs.create_dir("rmq")
        out = {}
        for name in STORES:
            root = unpack(name)
            for f in sorted(p for d in ("commitlog", "consumequeue", "index") for p in (root / d).rglob("*")
                            if p.is_file()):
                with open(f, "rb") as fh, \
                        fs.open_output_stream(f"rmq/{name}/store/{f.relative_to(root).as_posix()}") as o:
                    o.write(fh.read())
            out[name] = f"s3://test:test@rmq/{name}/store?{q}"
        yield out
    finally:
        stop_process(proc)


def test_s3_store_equal_local(monkeypatch, s3_stores):
    ways = _three_ways(monkeypatch, s3_stores)
    assert ways["small"][2][1].scan_broker == "small"
    ways["small"].append(("s3a", open_scan_store(s3_stores["small"].replace("s3://", "s3a://"))))
    _check_equal(ways, "local")


def test_cli_names_a_missing_store_uri(s3_stores, capsys):
    from engine.cli.scan import main
    assert main([s3_stores["small"].replace("/small/", "/nothing/"), "topic-stats", "--local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rmqstore: error: ") and "commitlog?endpoint" in err and ": no such folder" in err
    assert "test:***@rmq" in err and "test:test" not in err and err.count("\n") == 1


@pytest.mark.spark
def test_every_commitlog_job_equal_on_spark(monkeypatch, spark, s3_stores):
    """The plan carries URIs, so Spark's workers read ranges without any setting of their own:
    the file:// store forced through ranges and the S3 store give the local engine's answers
    over the plain path (which test_scan_engines holds equal to Spark's over the path). Every
    job on the S3 store; the file:// store forced through ranges is the same ranged reader
    (test_every_commitlog_job_equal_local runs every job on it), so one job shows its URIs
    reach the workers (20 Spark jobs here took 39 s)."""
    name = "small"
    with open_scan_store(str(unpack(name))) as st:
        ref = [json.dumps(run_job(st, j, p, engine="local").rows) for j, p in JOBS]
    monkeypatch.setenv(FORCE_ENV, "1")
    forms = [("file-uri-ranges", open_scan_store("file://" + str(unpack(name))), {"size-histogram"})]
    monkeypatch.delenv(FORCE_ENV)
    forms.append(("s3", open_scan_store(s3_stores[name]), {j for j, _ in JOBS}))
    for kind, st, jobs in forms:
        for (job, p), x in zip(JOBS, ref):
            if job in jobs:
                assert json.dumps(run_job(st, job, p, engine="spark", spark=spark).rows) == x, (kind, job)
        st.close()


@pytest.mark.spark
def test_data_source_loads_a_uri(spark, s3_stores):
    df = spark.read.format("rocketmq").option("columns", "topic,queueId").load(s3_stores["small"])
    assert df.count() == 2339
    df = spark.read.format("rocketmq").option("columns", "topic").load(f"file://{unpack('small')}")
    assert df.count() == 2339


def test_s3_cluster_layout_is_two_brokers(s3_stores):
    """s3://bucket/ holding <name>/store/commitlog: a cluster layout, found from listings; its
    topic-stats is the sum of the two single-store runs with a broker column."""
    from engine.scan.api import resolve_stores
    root = s3_stores["small"].replace("/small/store?", "?")
    refs = resolve_stores([root])
    assert [r.broker for r in refs] == ["small", "v5"]
    assert [r.path for r in refs] == [s3_stores["small"], s3_stores["v5"]]
    with open_scan_store(refs[0].path) as a, open_scan_store(refs[1].path) as b:
        from engine.scan.api import ScanStore
        both = run_job([ScanStore(r.broker, r.path, s) for r, s in zip(refs, (a, b))], "topic-stats", JobParams(),
                       engine="local").rows
        one = [{"broker": r.broker, **row} for r, s in zip(refs, (a, b))
               for row in run_job(s, "topic-stats", JobParams(), engine="local").rows]
    assert both == one and len(both) > 9


def test_fsspec_filesystems_through_pyarrow(monkeypatch):
    """A scheme pyarrow does not know goes to fsspec (here its memory:// filesystem, which lives
    in this process only: the local engine) through pyarrow's FSSpecHandler."""
    fsspec = pytest.importorskip("fsspec")
    mem = fsspec.filesystem("memory")
    root = unpack("small")
    for n in os.listdir(root / "commitlog"):
        mem.pipe(f"/rmqtest/brokerM/store/commitlog/{n}", (root / "commitlog" / n).read_bytes())
    mem.pipe("/rmqtest/brokerM/broker.conf", b"brokerClusterName=c\nbrokerName = broker-m\n")
    try:
        from engine.scan.api import resolve_stores
        refs = resolve_stores(["memory://rmqtest"])   # a cluster layout, its broker.conf's name
        assert [(r.broker, r.path) for r in refs] == [("broker-m", "memory://rmqtest/brokerM/store")]
        ways = {"small": [("path", open_scan_store(str(root))), ("fsspec", open_scan_store(refs[0].path))]}
        _check_equal(ways, "local")
    finally:
        mem.rm("/rmqtest", recursive=True)


def test_s3_consistency_and_cq_index_sources_equal_local(s3_stores):
    """The queues and index files of the S3 store: consistency finds nothing (as on the path),
    and the units and entries read by ranges equal the mapped ones."""
    from engine.scan.planning import plan_consume_queues, plan_index
    from engine.scan.reader import read_cq, read_index
    with open_scan_store(str(unpack("small"))) as a, open_scan_store(s3_stores["small"]) as b:
        assert run_job(b, "consistency", JobParams(), engine="local").rows == []
        for plan, read in ((plan_consume_queues, read_cq), (plan_index, read_index)):
            x = [{k: v.tolist() for k, v in read(s).items()} for s in plan(a)]
            y = [{k: v.tolist() for k, v in read(s).items()} for s in plan(b)]
            assert len(x) > 10 and x == y


@pytest.mark.spark
def test_s3_consistency_and_sources_on_spark(spark, s3_stores, fixture_copy):
    """On Spark the workers read the S3 store's units and entries themselves."""
    from scan_support import plant_cq_defect
    root = fixture_copy("small")
    plant_cq_defect(root)
    with open_scan_store(str(root)) as st:
        ref = run_job(st, "consistency", JobParams(), engine="local").rows
    with open_scan_store(s3_stores["small"]) as st:
        assert run_job(st, "consistency", JobParams(), engine="spark", spark=spark).rows == []
    assert len(ref) == 1
    for fmt, n in (("rocketmq-cq", "cq"), ("rocketmq-index", "index")):
        got = spark.read.format(fmt).load(s3_stores["small"]).drop("store").collect()
        want = spark.read.format(fmt).load(str(unpack("small"))).drop("store").collect()
        assert len(got) > 100 and sorted(map(tuple, got)) == sorted(map(tuple, want)), n


@pytest.mark.spark
def test_split_pieces_of_an_s3_store_on_spark(spark, s3_stores):
    """Files cut into 16,000-byte pieces, each read by a task that finds its first record itself:
    the unsplit answer, on Spark's workers over S3."""
    with open_scan_store(str(unpack("small"))) as st:
        ref = run_job(st, "topic-stats", JobParams(by_queue=True), engine="local").rows
    with open_scan_store(s3_stores["small"]) as st:
        got = run_job(st, "topic-stats", JobParams(by_queue=True, split_bytes=16000), engine="spark", spark=spark).rows
    assert got == ref and sum(r["messages"] for r in got) == 2339
