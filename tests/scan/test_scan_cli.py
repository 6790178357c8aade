"""`rmqstore scan`: the --json contract, the human table, one-line errors with exit code 2."""
import json

import pytest

from conftest import manifest, unpack
from engine.cli.app import main as rmqstore
from engine.scan.api import display_width, format_table, one_line
from scan_support import spark  # noqa: F401


def run(capsys, *argv):
    code = rmqstore(["scan", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_local(capsys):
    code, out, err = run(capsys, unpack("small"), "topic-stats", "--local", "--json", "--topic", "TopicTest")
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == ["job", "engine", "master", "rows"]
    assert (doc["job"], doc["engine"], doc["master"]) == ("topic-stats", "local", None)
    n = sum(1 for m in manifest("small")["messages"] if m["topic"] == "TopicTest")
    assert [r["topic"] for r in doc["rows"]] == ["TopicTest"] and doc["rows"][0]["messages"] == n


@pytest.mark.spark
def test_json_contract_spark(capsys, spark):
    code, out, err = run(capsys, unpack("v5"), "filter", "--key", "order-dup-001", "--limit", "2", "--json",
                         "--master", "local[2]")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["job"], doc["engine"], doc["master"], doc["truncated"]) == ("filter", "spark", "local[2]", True)
    assert len(doc["rows"]) == 2 and all("order-dup-001" in r["keys"].split(" ") for r in doc["rows"])
    assert {"commitLogOffset", "msgId", "body", "properties", "storeTimestamp"} <= set(doc["rows"][0])


def test_human_table(capsys):
    code, out, err = run(capsys, unpack("small"), "traffic", "--bucket", "1h", "--local", "--topic", "Audit|log")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["topic", "bucketStart", "messages", "bytes"]
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].startswith("Audit|log") and "2026-11-22 01:00:00.000" in lines[2]
    assert lines[-1].startswith("1 row(s)")


@pytest.mark.parametrize("argv,needle", [
    (["topic-stats", "--local", "--bucket", "x"], None),
    (["traffic", "--bucket", "3x", "--local"], "bad bucket"),
    (["filter", "--body", "(", "--local"], "bad body regex"),
    (["filter", "--prop", "noequals", "--local"], "--prop expects"),
    (["export", "--local"], "--out"),
    (["topic-stats", "--local", "--set", "mappedFileSizeCommitLog=1000"], "configured size"),
])
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, unpack("small"), *argv)
    if needle is None:   # a valid command: bucket is ignored by topic-stats
        assert code == 0
        return
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rmqstore: error: ") and needle in err, err
    assert "Traceback" not in err


def test_missing_store_and_unknown_job(capsys, tmp_path):
    code, out, err = run(capsys, tmp_path / "nope", "topic-stats", "--local")
    assert code == 2 and err.count("\n") == 1 and "no such folder" in err
    with pytest.raises(SystemExit) as e:
        rmqstore(["scan", str(tmp_path), "no-such-job"])
    assert e.value.code == 2


def test_table_and_error_helpers():
    t = format_table([{"a": 1, "b": "タグ"}, {"a": 22, "b": "x"}])
    assert t.splitlines() == [" a  b", "--  ----", " 1  タグ", "22  x"]
    assert display_width("タグ") == 4 and display_width("e\u0301") == 1
    err = RuntimeError("Job aborted.\nTraceback (most recent call last):\n  File x\nValueError: bad thing\n\tat java")
    assert one_line(err) == "ValueError: bad thing"
    assert one_line(RuntimeError("first\nsecond")) == "first"
