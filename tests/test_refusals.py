"""A refused command changes not one byte (issue 33, part 3).

Every write command (send, recover, rebuild, init, demo) is walked through every refusal it
has, on private copies of stores RocketMQ wrote (small, default, v5, crashed) and of one
MessageStore.create made. The whole tree is taken before and after: every path (names are
the listing), its kind, mode, size and mtime, and each file's bytes (its data extents: the
default store's files are GiB-sized and almost all holes). The command must exit 2 with one
line naming the problem, and the two trees must be equal: no `abort` left behind, no `lock`
rewritten, no file added, removed or touched."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import data_ranges
from engine.cli.app import main
from engine.config import StoreConfig
from engine.errors import StoreError
from engine.store.message_store import MessageStore
from engine.store.store_lock import _HELD

STORES = ["small", "default", "v5", "crashed", "created"]
CREATED = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256)


def tree_state(root: Path) -> dict:
    """Every entry under root (root included): kind, mode, size, mtime and, for files, a hash
    of their data extents with their positions."""
    out = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(p)
        entry = [st.st_mode, st.st_size, st.st_mtime_ns]
        if p.is_file() and not p.is_symlink():
            h = hashlib.sha1()
            with open(p, "rb", buffering=0) as fh:
                for start, end in data_ranges(p):
                    h.update(f"{start}:{end}".encode())
                    h.update(os.pread(fh.fileno(), end - start, start))
            entry.append(h.hexdigest())
        out[str(p.relative_to(root))] = tuple(entry)
    return out


@pytest.fixture(scope="module")
def created_store(tmp_path_factory) -> Path:
    """A store MessageStore.create made: several commitlog, CQ and index files."""
    root = tmp_path_factory.mktemp("created") / "created"
    with MessageStore.create(root, StoreConfig.from_mapping(CREATED)) as s:
        for i in range(600):
            s.put_message("T", b"x" * 300, queue_id=i % 2, keys=f"k{i}")
    return root


@pytest.fixture
def store(request, fixture_copy, created_store, tmp_path):
    name = request.param
    if name != "created":
        return fixture_copy(name)
    dst = tmp_path / "created"
    subprocess.run(["cp", "-a", "--sparse=always", str(created_store), str(dst)], check=True)
    return dst


def geometry(root: Path) -> StoreConfig:
    with MessageStore.open(root) as s:
        return s.cfg


def newest(d: Path) -> Path:
    return max((p for p in d.iterdir() if p.name.isdigit() and p.stat().st_size), key=lambda p: p.name)


# ---- the refusals: each takes the store (it may damage it first) and the tmp folder, and
# returns the command line's tail and a fragment the message must hold ----------------------
def r_slots(root, tmp):
    return ["--set", "maxHashSlotNum=3"], "index file"


def r_entries(root, tmp):
    return ["--set", "maxIndexNum=10"], "index file"


def r_split(root, tmp):
    """The files' size, another split of it: only the entries tell them apart."""
    c = geometry(root)
    return ["--set", f"maxHashSlotNum={c.maxHashSlotNum - 5}", "--set", f"maxIndexNum={c.maxIndexNum + 1}"], \
        "its entries say so"


def r_commitlog_size(root, tmp):
    return ["--set", f"mappedFileSizeCommitLog={geometry(root).mappedFileSizeCommitLog // 2}"], "commitlog"


def r_cq_size(root, tmp):
    return ["--set", f"mappedFileSizeConsumeQueue={geometry(root).mappedFileSizeConsumeQueue + 20}"], "consumequeue"


def r_unknown_setting(root, tmp):
    return ["--set", "noSuchSetting=1"], "unknown store setting"


def r_bad_value(root, tmp):
    return ["--set", "maxHashSlotNum=many"], "invalid value"


def r_truncated_index(root, tmp):
    """Cut inside its 40-byte header: a write open extends a shorter index file with zeros as
    RocketMQ's map does (tests/test_index_extend.py), but not one whose header is cut in two
    (a store's only index file cut so fits no geometry)."""
    f = newest(root / "index")
    os.truncate(f, 20)
    return [], "index"


def r_truncated_cq(root, tmp):
    q = next(q for t in sorted((root / "consumequeue").iterdir()) for q in sorted(t.iterdir()))
    f = min(q.iterdir())
    os.truncate(f, f.stat().st_size - 20)
    return [], "consume"


def r_locked(root, tmp):
    return [], "locked"


def r_bad_topic(root, tmp):
    return ["@topic=a/b"], "topic"


def r_body_missing(root, tmp):
    return ["--body-file", str(tmp / "no-such-file")], "body-file"


def r_body_folder(root, tmp):
    return ["--body-file", str(tmp)], "folder"


def r_body_too_large(root, tmp):
    big = tmp / "big.bin"
    big.write_bytes(b"x" * (StoreConfig().maxMessageSize + 1))
    return ["--body-file", str(big)], "maxMessageSize"


def r_count_zero(root, tmp):
    return ["--count", "0"], "--count"


def r_bad_delay(root, tmp):
    return ["--delay", "99"], "--delay"


def r_bad_prop(root, tmp):
    return ["--prop", "novalue"], "--prop"


def r_bad_flag(root, tmp):
    return ["--flag", str(1 << 40)], "flag"


def r_not_confirmed(root, tmp):
    return ["@no-yes"], "--yes"


def r_not_empty(root, tmp):
    return [], "not an empty folder"


GEOMETRY = [r_slots, r_entries, r_split, r_commitlog_size, r_cq_size, r_unknown_setting, r_bad_value]
REFUSALS = {
    "send": GEOMETRY + [r_truncated_index, r_truncated_cq, r_locked, r_bad_topic, r_body_missing, r_body_folder,
                        r_body_too_large, r_count_zero, r_bad_delay, r_bad_prop, r_bad_flag],
    "recover": GEOMETRY + [r_truncated_index, r_truncated_cq, r_locked],
    "rebuild": GEOMETRY + [r_locked, r_not_confirmed],  # a damaged index is what rebuild is for
    "init": [r_not_empty],
    "demo": [r_not_empty],
}
CASES = [(cmd, r) for cmd, rs in REFUSALS.items() for r in rs]


def command_line(cmd: str, root: Path, tail: list[str]) -> list[str]:
    topic = next((a[len("@topic="):] for a in tail if a.startswith("@topic=")), "T")
    ask = "@no-yes" in tail
    tail = [a for a in tail if not a.startswith("@")]
    if cmd == "send":
        body = [] if "--body-file" in tail else ["--body", "x"]
        return ["send", str(root), topic, *body, *tail]
    if cmd == "rebuild":
        return ["rebuild", str(root), *([] if ask else ["--yes"]), *tail]
    return [cmd, str(root), *tail]


class LockHolder:
    """Another process holding the store's lock, as a running broker does."""
    CODE = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
            "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0); print('held', flush=True); sys.stdin.read()")

    def __init__(self, root: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE, str(root / "lock")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


@pytest.mark.parametrize("store", STORES, indirect=True)
@pytest.mark.parametrize("cmd, refusal", CASES, ids=[f"{c}-{r.__name__[2:]}" for c, r in CASES])
def test_a_refused_write_command_changes_not_one_byte(store, cmd, refusal, tmp_path, capsys):
    if refusal is r_split and geometry(store).maxHashSlotNum <= 5:
        pytest.fail("the store's index has too few slots for another split")  # never with these stores
    tail, fragment = refusal(store, tmp_path)
    holder = LockHolder(store) if refusal is r_locked else None
    before = tree_state(store)
    try:
        code = main(command_line(cmd, store, tail))
    finally:
        if holder:
            holder.release()
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("rmqstore: error: ") and "internal error" not in err and err.count("\n") == 1, err
    assert fragment.lower() in err.lower(), err
    assert tree_state(store) == before
    assert not _HELD  # and this process holds no lock on it


@pytest.mark.parametrize("store", ["small", "crashed"], indirect=True)
def test_a_read_write_open_refused_after_the_lock_puts_lock_and_abort_back(store):
    """The safety net: a refusal that only the load finds (here an unreadable checkpoint, a
    folder in its place) comes after the lock was taken; lock, abort and the folder's times
    are put back as they were (the GUI's read-write switch opens this way)."""
    (store / "checkpoint").unlink()
    (store / "checkpoint").mkdir()
    for lock_there in (True, False):
        if not lock_there:
            (store / "lock").unlink()
        before = tree_state(store)
        with pytest.raises(StoreError, match="checkpoint"):
            MessageStore.open(store, read_only=False)
        assert tree_state(store) == before
        assert (store / "lock").exists() == lock_there


@pytest.mark.parametrize("store", ["small", "created"], indirect=True)
def test_the_engine_refuses_a_geometry_before_the_lock(store):
    before = tree_state(store)
    cfg = StoreConfig.from_mapping({"maxHashSlotNum": 3})
    with pytest.raises(StoreError, match=r"index file is \d+ bytes but maxHashSlotNum=3"):
        MessageStore.open(store, cfg, read_only=False)
    assert tree_state(store) == before


@pytest.mark.parametrize("store", ["small"], indirect=True)
def test_rebuild_overwrites_a_geometry_only_when_told(store, capsys):
    c = geometry(store)
    new = ["--set", f"maxHashSlotNum={c.maxHashSlotNum + 36}", "--set", f"maxIndexNum={c.maxIndexNum - 6}",
           "--set", f"mappedFileSizeConsumeQueue={c.mappedFileSizeConsumeQueue * 4}"]
    before = tree_state(store)
    assert main(["rebuild", str(store), "--yes", *new]) == 2
    assert "--overwrite-geometry" in capsys.readouterr().err
    assert tree_state(store) == before
    with MessageStore.open(store) as s:
        key = next(m.keys for m in s.iter_messages() if m.keys).split()[0]
        topic = next(m.topic for m in s.iter_messages() if m.keys and key in m.keys.split())
        hits = len(s.query_message(topic, key, 0, 1 << 62, 64).messages)
    assert main(["rebuild", str(store), "--yes", "--overwrite-geometry", *new]) == 0
    with MessageStore.open(store) as s:
        assert (s.cfg.maxHashSlotNum, s.cfg.maxIndexNum) == (c.maxHashSlotNum + 36, c.maxIndexNum - 6)
        assert s.cfg.mappedFileSizeConsumeQueue == c.mappedFileSizeConsumeQueue * 4
        assert {f.stat().st_size for f in (store / "index").iterdir()} == {s.cfg.index_file_size}
        assert len(s.query_message(topic, key, 0, 1 << 62, 64).messages) == hits > 0


def test_the_walk_covers_every_write_command():
    from engine.cli.app import WRITE_COMMANDS, build_parser
    build_parser()
    writers = WRITE_COMMANDS | {"recover", "rebuild", "init", "demo"}
    assert writers <= set(REFUSALS), writers - set(REFUSALS)
