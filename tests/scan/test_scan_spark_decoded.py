"""The Spark export with --decode-body gives the local export's decodedBody: in jsonl a JSON
object on every line, in csv a column of compact JSON text; the `small` fixture's bodies, the
ones RocketMQ stored compressed among them, decoded in Spark's tasks."""
from __future__ import annotations

import csv
import json

import pytest

from engine.scan.api import JobParams, run_job
from scan_support import small, spark  # noqa: F401

pytestmark = pytest.mark.spark


def _csv_rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        with open(p, newline="", encoding="utf-8") as fh:
            rows += list(csv.DictReader(fh))
    return sorted(rows, key=lambda r: int(r["commitLogOffset"]))


def test_spark_export_decodes_bodies_as_local(spark, small, tmp_path):
    js_local, js_spark = tmp_path / "local.jsonl", tmp_path / "spark-jsonl"
    run_job(small, "export", JobParams(format="jsonl", out=str(js_local), decode_body=True), engine="local")
    r = run_job(small, "export", JobParams(format="jsonl", out=str(js_spark), decode_body=True),
                engine="spark", spark=spark).rows[0]
    local = [json.loads(x) for x in js_local.read_text(encoding="utf-8").splitlines()]
    got = sorted((json.loads(x) for p in sorted(js_spark.glob("part-*")) for x in p.read_text(encoding="utf-8").splitlines()),
                 key=lambda x: x["commitLogOffset"])
    assert r["rows"] == len(got) == len(local) == 2339
    assert got == sorted(local, key=lambda x: x["commitLogOffset"])
    compressed = [x for x in got if x["sysFlag"] & 1]
    assert compressed and all(x["decodedBody"]["compression"] for x in compressed)
    assert {x["decodedBody"]["format"] for x in got} - {"hex"}

    csv_local, csv_spark = tmp_path / "local.csv", tmp_path / "spark-csv"
    run_job(small, "export", JobParams(format="csv", out=str(csv_local), decode_body=True), engine="local")
    run_job(small, "export", JobParams(format="csv", out=str(csv_spark), decode_body=True), engine="spark", spark=spark)
    want, have = _csv_rows([csv_local]), _csv_rows(sorted(csv_spark.glob("part-*")))
    assert len(have) == 2339 and [r["decodedBody"] for r in have] == [r["decodedBody"] for r in want]
    assert json.loads(have[0]["decodedBody"]) == got[0]["decodedBody"]
