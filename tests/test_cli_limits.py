"""Issue 33, part 6: a bad count is refused before anything runs, an error names the file, a
forged header cannot make a percentage absurd."""
from __future__ import annotations

import argparse
import json
import os

import pytest

from conftest import unpack
from engine.cli.app import WRITE_COMMANDS, build_parser, main as cli_main

# integer arguments that are not counts, caps or limits, and why a negative one is an answer
NOT_A_COUNT = {("get", "offset"): "a queue offset: below the min the broker answers OFFSET_TOO_SMALL"}


def refused(capsys, *argv):
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli_main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv,says", [
    (["query-key", "{s}", "TopicTest", "k", "--max", "-1"], "argument --max: -1 must not be negative"),
    (["get", "{s}", "TopicTest", "0", "0", "--count", "-1"], "argument --count: -1 must be 1 or more"),
    (["get", "{s}", "TopicTest", "0", "0", "--count", "0"], "argument --count: 0 must be 1 or more"),
    (["get", "{s}", "TopicTest", "-1", "0"], "argument queue: -1 must not be negative"),
    (["cq", "{s}", "TopicTest", "0", "--from", "-5"], "argument --from: -5 must not be negative"),
    (["cq", "{s}", "TopicTest", "0", "--count", "-5"], "argument --count: -5 must not be negative"),
    (["dump", "{s}", "--from", "-1"], "argument --from: -1 must not be negative"),
    (["dump", "{s}", "--count", "-1"], "argument --count: -1 must not be negative"),
    (["time", "{s}", "TopicTest", "-2", "0"], "argument queue: -2 must not be negative"),
    (["query-keys", "{s}", "TopicTest", "-", "--max", "-3"], "argument --max: -3 must not be negative"),
    (["diff", "{s}", "{s}", "--max", "-1"], "argument --max: -1 must not be negative"),
    (["scan", "{s}", "topic-stats", "--local", "--limit", "-1"], "argument --limit: -1 must not be negative"),
    (["scan", "{s}", "topic-stats", "--local", "--split-bytes", "0"], "argument --split-bytes: 0 must be 1 or more"),
    (["scan", "{s}", "topic-stats", "--local", "--queue", "-1"], "argument --queue: -1 must not be negative"),
    (["get", "{s}", "TopicTest", "0", "0", "--count", "ten"], "'ten' is not a whole number"),
])
def test_negative_counts_and_caps_are_refused(capsys, argv, says):
    s = str(unpack("small"))
    err = refused(capsys, *[a.replace("{s}", s) for a in argv])
    assert says in err and err.startswith(f"rmqstore {argv[0]}: error: "), err


def test_every_integer_option_of_a_read_command_has_a_bound():
    """The audit as a test: a count, cap or limit added with type=int (no bound) fails here."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    unbounded = []
    for name, sp in sub.choices.items():
        if name in WRITE_COMMANDS or name in ("init", "recover", "demo", "rebuild"):
            continue   # engine/cli/write.py checks its own numbers before a byte is written
        for a in sp._actions:
            if a.type is int and (name, a.dest) not in NOT_A_COUNT:
                unbounded.append(f"{name} {a.option_strings or a.dest}")
    assert unbounded == []


def test_query_key_max_zero_still_means_no_cap(capsys):
    capsys.readouterr()
    assert cli_main(["query-key", str(unpack("small")), "TopicTest", "order-dup-001", "--max", "0", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert len(j["messages"]) > 64 and not j.get("truncated")


# ---- errors name the file ------------------------------------------------------------------------
def test_a_consume_queue_file_of_the_wrong_size_is_named(fixture_copy, capsys):
    root = fixture_copy("small")
    bad = sorted((root / "consumequeue" / "TopicTest" / "0").iterdir())[1]
    os.truncate(bad, 991)
    capsys.readouterr()
    assert cli_main(["info", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{bad.name} is 991 bytes, expected 1000" in err and str(bad) in err and err.count("\n") == 1, err
    # with the size given the file is named too
    assert cli_main(["info", str(root), "--set", "mappedFileSizeConsumeQueue=1000"]) == 2
    err = capsys.readouterr().err
    assert "991 bytes" in err and "1000" in err and str(bad) in err, err


def test_a_commitlog_file_of_the_wrong_size_is_named(fixture_copy, capsys):
    root = fixture_copy("small")
    bad = sorted((root / "commitlog").iterdir())[1]
    os.truncate(bad, 65000)
    capsys.readouterr()
    assert cli_main(["get", str(root), "TopicTest", "0", "0"]) == 2
    err = capsys.readouterr().err
    assert f"{bad.name} is 65000 bytes, expected 65536" in err and str(bad) in err, err


def test_files_of_two_sizes_in_equal_numbers_are_named_too(tmp_path, capsys):
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(b"\0" * 1000)
    (tmp_path / "commitlog" / f"{1000:020d}").write_bytes(b"\0" * 2000)
    capsys.readouterr()
    assert cli_main(["info", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "different sizes [1000, 2000]" in err and f"{1000:020d}" in err, err


# ---- percentages of forged headers --------------------------------------------------------------
def test_fill_of_a_forged_index_count_is_bounded(fixture_copy, capsys):
    root = fixture_copy("small")
    first = sorted((root / "index").iterdir())[0]
    with open(first, "r+b") as fh:      # IndexHeader.indexCount, at byte 36
        fh.seek(36)
        fh.write((0x7FFFFFFF).to_bytes(4, "big"))
    capsys.readouterr()
    assert cli_main(["fill", str(root), "--json"]) == 0
    x = next(i for i in json.loads(capsys.readouterr().out)["index"] if i["file"] == first.name)
    assert x["indexCount"] == 0x7FFFFFFF and x["headerBeyondCapacity"] is True
    assert x["entries"] == x["indexNum"] - 1 and 0 <= x["entryFill"] <= 1 and x["loadFactor"] <= x["indexNum"]
    assert cli_main(["fill", str(root)]) == 0
    out = capsys.readouterr().out
    assert "536870911" not in out and "beyond the file's capacity" in out and first.name in out
    pcts = [float(t.rstrip("%*")) for t in out.split() if t.rstrip("*").endswith("%")]
    assert pcts and max(pcts) <= 100.0
