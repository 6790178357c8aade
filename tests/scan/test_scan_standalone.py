"""Scans on a real standalone Spark cluster: a master and one worker started on 127.0.0.1 with
pyspark's own `spark-class` (SPARK_HOME = pyspark's folder) once for this module, every job run
on it against --local, and two stores at once; both daemons are stopped by their process ids,
whatever happens (a session fixture: started once per test run). Small: the daemons get 128 MiB each, the one executor 1 core and 512 MiB."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import stop_spark
from engine import MessageStore
from engine.cli.app import main as rmqstore
from engine.scan.api import JobParams, MessageFilter, ScanStore, run_job
from scan_support import SPARK_CONF, cluster, java_missing, stop_process  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.cluster]
JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m"
JOBS = [("topic-stats", JobParams()), ("topic-stats", JobParams(by_queue=True)), ("traffic", JobParams(bucket="1s")),
        ("size-histogram", JobParams()), ("top-keys", JobParams()), ("top-tags", JobParams(limit=7)),
        ("duplicates", JobParams(per_topic=True)),
        ("filter", JobParams(filter=MessageFilter.build(topics=["Orders_v2-EU"], body="lorem|SKU"), limit=30)),
        ("consistency", JobParams())]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ok, procs, seconds: float = 90) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a daemon exited with {p.returncode}")
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{what}: not up after {seconds} s")


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
        return json.load(r)


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    import pyspark
    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-standalone")
    stop_spark()   # one JVM at a time: the local test session goes (the next `spark` user restarts it)
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "128m",
           "SPARK_DAEMON_JAVA_OPTS": JVM_OPTS, "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "work"),
           "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}
    port, ui, wui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(home / "bin" / "spark-class")
    master = worker = None
    try:
        with open(work / "master.log", "wb") as log:
            master = subprocess.Popen([cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(ui)], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait("master", lambda: _master_state(ui).get("status") == "ALIVE", [master])
        with open(work / "worker.log", "wb") as log:
            worker = subprocess.Popen([cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                       "--cores", "1", "--memory", "700m", "--webui-port", str(wui),
                                       "--work-dir", str(work / "work")], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _wait("worker", lambda: _master_state(ui).get("aliveworkers") == 1, [master, worker])
        yield {"url": url, "ui": ui, "pids": (master.pid, worker.pid)}
    finally:
        try:
            stop_spark()   # the application first, so the worker has no executor left to wait for
        finally:
            stop_process(worker)
            stop_process(master)


@pytest.fixture(scope="module")
def cluster_session(standalone):
    from engine.scan.spark_session import get_session
    conf = {**SPARK_CONF, "spark.executor.defaultJavaOptions": JVM_OPTS, "spark.cores.max": "1",
            "spark.executor.cores": "1"}
    spark = get_session(standalone["url"], "512m", conf)
    yield spark
    stop_spark()


def test_every_job_on_the_cluster_equals_local(standalone, cluster_session, cluster, tmp_path):
    spark = cluster_session
    assert spark.sparkContext.master == standalone["url"]
    stores = cluster[1]
    with MessageStore.open(stores["broker-a"]) as small:
        for job, params in JOBS:
            a = run_job(small, job, params, engine="local")
            b = run_job(small, job, params, engine="spark", spark=spark)
            assert json.dumps(b.rows) == json.dumps(a.rows), job
            assert (b.truncated, b.master) == (a.truncated, standalone["url"]), job
        out = f"file://{tmp_path}/export"
        r = run_job(small, "export", JobParams(format="jsonl", out=out), engine="spark", spark=spark).rows[0]
        local = run_job(small, "filter", JobParams(limit=10_000), engine="local").rows
        lines = [json.loads(x) for p in sorted((tmp_path / "export").glob("part-*")) for x in p.read_text().splitlines()]
        assert r["rows"] == len(local) and sorted(lines, key=lambda x: x["commitLogOffset"]) == local
    app, = _master_state(standalone["ui"])["activeapps"]    # the tasks ran in the worker's executor
    assert app["cores"] == 1 and app["state"] == "RUNNING"


def test_two_stores_on_the_cluster(standalone, cluster_session, cluster, capsys):
    """Two stores on the cluster: duplicates per topic through the API (a shuffle whose rows
    keep each store's broker) and topic-stats through the CLI. Every job on two stores is
    test_scan_many_stores' (local[2]) and every job on the cluster the test above's: running all
    nine here again crossed the same code."""
    stores = cluster[1]
    members = [ScanStore(b, p, MessageStore.open(p)) for b, p in sorted(stores.items())]
    try:
        a = run_job(members, "duplicates", JobParams(per_topic=True), engine="local")
        b = run_job(members, "duplicates", JobParams(per_topic=True), engine="spark", spark=cluster_session)
        assert json.dumps(b.rows) == json.dumps(a.rows) and {r["broker"] for r in a.rows} == set(stores)
    finally:
        for m in members:
            m.store.close()
    code = rmqstore(["scan", "--master", standalone["url"], "topic-stats", "--json", "--store", stores["broker-a"],
                     "--store", stores["broker-b-conf"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    single = []
    for broker in sorted(stores):
        assert rmqstore(["scan", stores[broker], "topic-stats", "--local", "--json"]) == 0
        single += [{"broker": broker, **r} for r in json.loads(capsys.readouterr()[0])["rows"]]
    doc = json.loads(out)
    assert doc["rows"] == single and doc["master"] == standalone["url"]
