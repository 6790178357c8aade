"""Exports to URIs: file:// lands where the URI says (not ./file:/...) on both engines and
reads back equal; the local safety rules hold for file:// URIs too."""
import json
import os

import pyarrow.parquet as pq
import pytest

from conftest import unpack
from engine.cli.app import main as rmqstore
from engine.scan.api import JobParams, run_job
from engine.scan.columns import row_json
from engine.scan.jobs import export_target, is_uri, local_path_of, temporary_sibling
from scan_support import small, spark  # noqa: F401


def test_uri_rules(tmp_path):
    assert is_uri("file:///x") and is_uri("hdfs://nn:8020/a") and is_uri("s3a://b/k") and is_uri("file:/x")
    assert not is_uri("/x") and not is_uri("out.csv") and not is_uri("a:b")
    assert local_path_of("file:///tmp/a%20b") == "/tmp/a b" and local_path_of("file://localhost/x") == "/x"
    assert local_path_of("hdfs://nn/x") is None and local_path_of("rel/x") == "rel/x"
    with pytest.raises(ValueError, match="no other host"):
        local_path_of("file://otherhost/x")
    assert export_target(str(tmp_path), "hdfs://nn/out") == "hdfs://nn/out"   # the writer's business
    assert temporary_sibling("hdfs://nn/a/out").startswith("hdfs://nn/a/.out.rmqstore-")
    root = unpack("small")
    with pytest.raises(ValueError, match="inside the store"):
        export_target(str(root), f"file://{root}/commitlog/x.csv")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="symbolic link"):
        export_target(str(root), f"file://{link}")


def test_cli_writes_a_file_uri_where_it_says(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "sub" / "x.jsonl"
    out.parent.mkdir()
    code = rmqstore(["scan", str(unpack("small")), "export", "--local", "--format", "jsonl", "--out", f"file://{out}",
                     "--key", "order-dup-001", "--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert json.loads(cap.out)["rows"][0]["path"] == str(out)
    assert out.is_file() and not (tmp_path / "file:").exists()
    assert len(out.read_text().splitlines()) == json.loads(cap.out)["rows"][0]["rows"] > 0
    assert [p.name for p in out.parent.iterdir()] == ["x.jsonl"]   # no temporary left


@pytest.mark.spark
def test_file_uris_on_both_engines_read_back_equal(spark, small, tmp_path):
    a = run_job(small, "export", JobParams(format="parquet", out=f"file://{tmp_path}/local.parquet"), engine="local")
    b = run_job(small, "export", JobParams(format="parquet", out=f"file://{tmp_path}/spark.parquet"), engine="spark",
                spark=spark)
    assert a.rows[0]["path"] == f"{tmp_path}/local.parquet" and b.rows[0]["path"] == f"{tmp_path}/spark.parquet"
    assert a.rows[0]["rows"] == b.rows[0]["rows"] == 2339 and b.rows[0]["files"] >= 1
    ta = pq.read_table(tmp_path / "local.parquet").to_pylist()
    tb = sorted(pq.read_table(tmp_path / "spark.parquet").to_pylist(), key=lambda r: r["commitLogOffset"])
    norm = [lambda rows: [row_json({**r, "properties": dict(r["properties"])}) for r in rows]][0]
    assert norm(ta) == norm(tb) == [m.to_json() for m in small.iter_messages()]
    assert sorted(os.listdir(tmp_path)) == ["local.parquet", "spark.parquet"]
    with pytest.raises(FileExistsError):
        run_job(small, "export", JobParams(format="csv", out=f"file://{tmp_path}/spark.parquet"), engine="spark",
                spark=spark)


@pytest.mark.spark
def test_spark_writes_a_hadoop_uri_untouched(spark, small, tmp_path):
    """A URI that is not file:// goes to Spark's writer as it is and is published by a rename
    in its filesystem (Hadoop's local filesystem stands in for hdfs:// / s3a:// here:
    'file:' with an authority-free path goes the same remote way when spelled file:/...)."""
    from engine.scan import spark_jobs
    params = JobParams(format="jsonl", out=f"file:{tmp_path}/h.jsonl")
    params.out = "rmqtest-" + params.out   # not a scheme Hadoop knows: the writer's own error comes back
    with pytest.raises(Exception, match="(?i)scheme|filesystem"):
        run_job(small, "export", params, engine="spark", spark=spark)
    fs = spark_jobs._HadoopFS(spark, f"file://{tmp_path}/x")
    assert not fs.exists(f"file://{tmp_path}/x") and fs.part_files(f"file://{tmp_path}") == 0
