"""Spark Connect: the CLI and the runner reuse a running Spark (`--remote sc://...`) instead of
starting one. A Connect server (pyspark's own SparkConnectServer, local[1]) is started for this
module and stopped by its process id; jobs give the same JSON as --local."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import unpack
from engine.cli.app import main as rmqstore
from scan_support import java_missing, stop_process

pytestmark = [pytest.mark.spark, pytest.mark.cluster]
JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    try:
        from pyspark.sql.connect.utils import check_dependencies
        check_dependencies()
    except ImportError as e:   # the connect extra (grpcio, pandas, ...) is part of the test extra
        pytest.fail(f"pyspark's connect dependencies are missing: {e}")
    import pyspark
    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-connect")
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    cmd = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
           "--master", "local[1]", "--driver-memory", "512m", "--conf", f"spark.driver.defaultJavaOptions={JVM_OPTS}",
           "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:"
                     f"{Path(__file__).parents[2] / 'engine' / 'scan' / 'log4j2.properties'}",
           "spark-internal"]
    with open(work / "server.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=work)
    try:
        deadline = time.time() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the Connect server exited ({proc.returncode}): {(work / 'server.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise TimeoutError("Spark Connect server not up after 90 s")
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def _cli(*argv, env=None):
    """`rmqstore scan ...` in a process of its own: PySpark lets a process be a Spark Connect
    client or a classic driver, not both (this test process keeps its local session)."""
    r = subprocess.run([str(Path(sys.executable).with_name("rmqstore")), "scan", *map(str, argv)], capture_output=True,
                       text=True, timeout=180, env={**os.environ, **(env or {})})
    return r.returncode, r.stdout, r.stderr


def _local(job, *argv):
    return [json.loads(line) for line in [_local_json(job, *argv)]][0]


def _local_json(job, *argv):
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert rmqstore(["scan", str(unpack("small")), job, "--local", "--json", *argv]) == 0
    return buf.getvalue()


def test_cli_reuses_a_running_spark_through_connect(connect_server, tmp_path):
    for job, argv in [("topic-stats", ["--by-queue"]), ("filter", ["--key", "order-dup-001"]),
                      ("size-histogram", [])]:
        code, out, err = _cli(unpack("small"), job, "--json", "--remote", connect_server, *argv)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["engine"] == "spark" and doc["master"] == connect_server
        assert json.dumps(doc["rows"]) == json.dumps(_local(job, *argv)["rows"]), job
    out_dir = tmp_path / "x.csv"
    code, out, err = _cli(unpack("small"), "export", "--format", "csv", "--out", f"file://{out_dir}", "--json",
                          env={"RMQSTORE_SPARK_REMOTE": connect_server})
    assert code == 0, err
    assert json.loads(out)["rows"][0]["rows"] == 2339 and list(out_dir.glob("part-*"))


def test_an_unreachable_remote_is_one_line(tmp_path):
    code, out, err = _cli(unpack("small"), "top-tags", "--remote", f"sc://127.0.0.1:{_free_port()}")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("rmqstore: error: cannot reach Spark Connect at sc://127.0.0.1:"), err
