"""A new user's first commands: init, send into a new store, refused sends that change nothing,
sparse files, and a read-write open that costs what a read-only one does."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from engine.cli import app as cli
from engine.config import STORE_SETTINGS_FILE
from engine.files.mapped_file import MappedFile
from engine.store.message_store import MessageStore


def run(*argv):
    """The CLI in a child process: exit code, stdout, stderr (as a user sees them)."""
    p = subprocess.run([sys.executable, "-m", "engine", *map(str, argv)], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def main(capsys, *argv):
    """The CLI in this process (its parse errors exit as argparse does): exit code, stdout,
    stderr. A child process costs ~0.5 s of start-up; `run` keeps the tests of what only a
    process shows (its exit status, the zone from TZ)."""
    capsys.readouterr()
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def tree_state(root):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def disk_used(root) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def test_init_then_send_with_no_settings(tmp_path, capsys):
    root = tmp_path / "new"
    assert cli.main(["init", str(root), "--set", "mappedFileSizeCommitLog=65536", "--set",
                     "mappedFileSizeConsumeQueue=2000", "--set", "maxHashSlotNum=101", "--set",
                     "maxIndexNum=400", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mappedFileSizeCommitLog"] == 65536 and out["maxHashSlotNum"] == 101
    assert (root / "checkpoint").stat().st_size == 4096 and (root / STORE_SETTINGS_FILE).exists()
    assert not (root / "abort").exists()
    # no data file until a message: the sizes come from the store's settings file
    assert cli.main(["send", str(root), "TopicA", "--body", "m{i}", "--keys", "k{i}", "--count", "300"]) == 0
    capsys.readouterr()
    with MessageStore.open(root) as st:
        assert st.cfg.mappedFileSizeCommitLog == 65536 and st.cfg.maxIndexNum == 400
        assert all(f.stat().st_size == 65536 for f in (root / "commitlog").iterdir())
        assert {f.stat().st_size for f in (root / "index").iterdir()} == {40 + 404 + 8000}
        assert len(st.query_message("TopicA", "k299", max_num=0).messages) == 1
        assert sum(cq.max_offset for cq in st.queues.values()) == 300


def test_init_refuses_a_folder_with_files(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("mine")
    rc, _, err = run("init", tmp_path / "x")
    assert rc == 2 and "not an empty folder" in err and err.count("\n") == 1
    assert (tmp_path / "x" / "f").read_text() == "mine"


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_send_without_a_store_points_to_init(tmp_path, where, capsys):
    root = tmp_path / "s"
    if where == "empty":
        root.mkdir()
    rc, _, err = main(capsys, "send", root, "TopicA", "--body", "x")
    assert rc == 2 and f"rmqstore init {root}" in err and err.count("\n") == 1
    assert (root.exists() and not any(root.iterdir())) if where == "empty" else not root.exists()


def test_new_default_size_store_is_sparse(tmp_path):
    """RocketMQ's files are sparse: 2,000 messages in a default-size store use well under 64 MiB."""
    root = tmp_path / "d"
    assert cli.main(["init", str(root)]) == 0
    with MessageStore.open(root, read_only=False) as st:
        for i in range(2000):
            st.put_message("TopicTest", b"x" * 1024, None, "TagA", [f"order-{i}"])
    apparent = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert apparent > 1_400_000_000          # a 1 GiB commitlog file and a 420 MB index file ...
    assert disk_used(root) < 48 * 1024 * 1024  # ... of which only what is written, plus a step ahead
    with MessageStore.open(root) as st:
        assert len(st.query_message("TopicTest", "order-1999", max_num=0).messages) == 1


REFUSED = [
    ("bad-topic", ["send", "{s}", "a b", "--body", "x"], "characters outside"),
    ("long-topic", ["send", "{s}", "T" * 200, "--body", "x"], "limit is 127"),
    ("negative-queue", ["send", "{s}", "TopicTest", "--queue", "-1", "--body", "x"], "queue id"),
    ("huge-queue", ["send", "{s}", "TopicTest", "--queue", str(2 ** 40), "--body", "x"], "queue id"),
    ("huge-flag", ["send", "{s}", "TopicTest", "--flag", str(2 ** 40), "--body", "x"], "32-bit"),
    ("negative-flag", ["send", "{s}", "TopicTest", "--flag", str(-2 ** 40), "--body", "x"], "32-bit"),
    ("bad-delay", ["send", "{s}", "TopicTest", "--delay", "99", "--body", "x"], "--delay"),
    ("negative-delay", ["send", "{s}", "TopicTest", "--delay", "-1", "--body", "x"], "--delay"),
    ("zero-count", ["send", "{s}", "TopicTest", "--count", "0", "--body", "x"], "--count"),
    ("bad-prop", ["send", "{s}", "TopicTest", "--prop", "novalue", "--body", "x"], "K=V"),
    ("separator-prop", ["send", "{s}", "TopicTest", "--prop", "a=b\x02c", "--body", "x"], "invalid property"),
    ("body-dev-zero", ["send", "{s}", "TopicTest", "--body-file", "/dev/zero"], "maxMessageSize"),
    ("body-missing", ["send", "{s}", "TopicTest", "--body-file", "{s}/nope"], "cannot read"),
    ("body-folder", ["send", "{s}", "TopicTest", "--body-file", "{s}"], "folder"),
    ("bad-set", ["send", "{s}", "TopicTest", "--body", "x", "--set", "maxMessageSize=abc"], "invalid value"),
    ("big-body", ["send", "{s}", "TopicTest", "--body", "x" * 200, "--set", "maxMessageSize=100"], "maxMessageSize"),
]


@pytest.mark.parametrize("name,argv,says", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_send_changes_not_one_byte(fixture_copy, name, argv, says, capsys):
    store = fixture_copy("small")
    before = tree_state(store)
    rc, out, err = main(capsys, *[a.replace("{s}", str(store)) for a in argv])
    assert rc == 2, (out, err)
    assert says in err and err.startswith("rmqstore: error:") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err
    assert tree_state(store) == before


def test_zero_tail_reads_only_data_and_keeps_holes(tmp_path):
    """Recovery's tail zeroing: stale bytes anywhere past the cut are zeroed, holes stay holes."""
    size = 64 << 20
    path = tmp_path / f"{0:020d}"
    with open(path, "wb") as fh:
        fh.truncate(size)
        for at in (4096, 10 << 20, size - 6):
            fh.seek(at)
            fh.write(b"\xffstale")
    blocks = os.stat(path).st_blocks
    f = MappedFile(path, size, writable=True)
    f.zero_tail(4100)
    data = np.frombuffer(f.mm, dtype=np.uint8)
    assert bytes(data[4096:4100]) == b"\xffsta"        # before the cut: kept
    assert not data[4100:].any()
    del data
    f.close()
    assert os.stat(path).st_blocks <= blocks            # nothing allocated by the scan


def test_reservation_follows_the_writes(tmp_path):
    """Blocks are reserved a step ahead: a put never writes into a hole (SIGBUS on a full disk)."""
    root = tmp_path / "r"
    assert cli.main(["init", str(root), "--set", "mappedFileSizeCommitLog=8388608"]) == 0
    with MessageStore.open(root, read_only=False) as st:
        for i in range(3000):
            st.put_message("T", b"y" * 2000, 0, None, None)
            f = st.commitlog.queue.last
            assert f.reserved_until >= f.wrote_position
        cq = st.queues[("T", 0)].queue.last
        assert cq.reserved_until >= cq.wrote_position
        idx = st.index.files[-1]
        assert idx.file.reserved_until >= idx._entry_base + idx.header.indexCount * 20


def test_time_lookup_uses_the_mtime_as_it_is(fixture_copy):
    """4.9 picks the first CQ file modified at or after t. A whole-second mtime is used as it is
    (RocketMQ does; adding 999 ms to it changed 8 of 42 answers on a broker's store)."""
    store = fixture_copy("small")
    qdir = store / "consumequeue" / "TopicTest" / "0"
    files = sorted(qdir.iterdir())
    assert len(files) >= 2
    base = 1_000_000_000  # 2001: before every store time, so each file answers its first unit
    for i, f in enumerate(files):
        os.utime(f, ns=((base + i) * 1_000_000_000,) * 2)
    with MessageStore.open(store) as st:
        per_file = st.find_queue("TopicTest", 0).units_per_file
        assert st.get_offset_in_queue_by_time("TopicTest", 0, base * 1000 + 500) == per_file  # the second file
        assert st.get_offset_in_queue_by_time("TopicTest", 0, base * 1000) == 0             # the first


def test_raw_query_max_zero_means_no_cap(capsys):
    """`query-key --raw --max 0` means what `--max 0` means without --raw: no cap (the engine's
    raw API keeps RocketMQ's answer to maxNum 0, which is nothing)."""
    from conftest import unpack
    store = unpack("small")
    outs = {}
    for extra in ([], ["--raw"]):
        rc, out, err = main(capsys, "query-key", store, "TopicTest", "order-dup-001", "--max", "0", "--json", *extra)
        assert rc == 0, err
        outs[bool(extra)] = json.loads(out)
    exact, raw = outs[False], outs[True]
    assert len(exact["messages"]) > 64  # more than maxMsgsNumBatch, the raw default cap
    assert sorted(set(raw["offsets"])) == sorted(exact["offsets"])
    with MessageStore.open(store) as st:
        assert st.query_message("TopicTest", "order-dup-001", max_num=0, raw=True).offsets == []


@pytest.mark.parametrize("argv,says", [
    (["get", "{s}", "NoSuchTopic", "0", "0"], "no topic 'NoSuchTopic'"),
    (["get", "{s}", "TopicTest", "9", "0", "--json"], "has no queue 9 (its queues: 0, 1, 2, 3)"),
    (["time", "{s}", "NoSuchTopic", "0", "0"], "no topic"),
    (["cq", "{s}", "TopicTest", "0", "--from", "-5"], "must not be negative"),
    (["msgid", "{s}", "xyz"], "malformed msgId"),
    (["msgid", "{s}", "0A00000500002A9F00000000000430"], "malformed msgId"),
])
def test_clear_answers_to_wrong_names(argv, says, capsys):
    from conftest import unpack
    rc, out, err = main(capsys, *[a.replace("{s}", str(unpack("small"))) for a in argv])
    assert rc == 2 and says in err and err.count("\n") == 1 and not out, (out, err)


def test_times_carry_a_numeric_zone():
    from conftest import unpack
    rc, out, _ = run("info", unpack("small"))
    assert rc == 0 and ("+00:00" in out or "+0" in out or "-0" in out)
    assert not any(z in out for z in (" UTC", " CST", " PST", " CET"))
    env_tz = dict(os.environ, TZ="Asia/Shanghai")
    p = subprocess.run([sys.executable, "-m", "engine", "get", str(unpack("small")), "TopicTest", "0", "0",
                        "--count", "1"], capture_output=True, text=True, env=env_tz, timeout=60)
    assert "+08:00" in p.stdout and "CST" not in p.stdout


def test_help_names_every_positional_and_time_format(capsys):
    for cmd, words in [("get", ["topic name", "queue id", "queue offset"]),
                       ("query-key", ["epoch milliseconds", "ISO-8601", "UNIQ_KEY"]),
                       ("time", ["epoch milliseconds"]), ("msgid", ["32 hex digits"])]:
        rc, out, _ = main(capsys, cmd, "-h")
        assert rc == 0 and all(w in out.replace("\n", " ").replace("  ", " ") for w in words), (cmd, out)
