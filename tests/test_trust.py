"""Errors surface, settings and inputs cannot escape or stall the store (issue: Trust)."""
import errno
import os
import subprocess
import sys
import time

import pytest

from engine.config import StoreConfig
from engine.errors import MessageRejectedError, StoreError, StoreFullError
from engine.store.message_store import MessageStore


def small_store(root, **extra):
    cfg = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 2000,
                                    "maxHashSlotNum": 64, "maxIndexNum": 256, **extra})
    return MessageStore.create(root, cfg)


def run(*argv, stdin=subprocess.DEVNULL, timeout=30):
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "engine", *map(str, argv)], capture_output=True, text=True,
                       timeout=timeout, stdin=stdin)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t


def test_failed_background_flush_fails_the_next_put_and_close(tmp_path, monkeypatch):
    st = small_store(tmp_path / "s", flushIntervalCommitLog=20)
    st.put_message("T", b"a", 0, None, None, {"p": "1"})

    def broken_store(path):
        raise OSError(errno.EIO, "Input/output error", str(path))
    monkeypatch.setattr(st.checkpoint, "store", broken_store)
    st.put_message("T", b"b", 0, None, None, {"p": "2"})
    deadline = time.monotonic() + 10
    while st.writer.broken is None and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(StoreError, match="background flush failed"):
        st.put_message("T", b"c", 0, None, None, {"p": "3"})
    with pytest.raises(StoreError, match="flush failed"):
        st.put_message("T", b"d")  # the compiled put path too
    with pytest.raises(StoreError):
        st.close()
    assert (tmp_path / "s" / "abort").exists()  # the next open recovers


def test_dispatch_failure_that_is_not_a_full_disk_is_not_called_one(tmp_path, monkeypatch):
    import engine.store.writer as w
    st = small_store(tmp_path / "s")

    def bug(store, msg):
        raise KeyError("a bug in dispatch")
    monkeypatch.setattr(w, "dispatch", bug)
    with pytest.raises(KeyError):
        st.put_message("T", b"a", 0, None, None, {"p": "1"})
    assert not isinstance(st.writer.broken, StoreFullError) and "KeyError" in str(st.writer.broken)
    st.close()


@pytest.mark.parametrize("topic", ["abc\n", "a\nb", "abc\r", "", "a b"])
def test_engine_validates_topics_like_the_cli(tmp_path, topic):
    with small_store(tmp_path / "s") as st:
        with pytest.raises(MessageRejectedError):
            st.put_message(topic, b"x")
        with pytest.raises(MessageRejectedError):
            st.put_message(topic, b"x", 0, None, None, {"p": "1"})


def tree_state(root):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("setting", ["storePathRootDir={elsewhere}", "storePathCommitLog={elsewhere}/commitlog",
                                     "storePathCommitLog={store}/../x"])
def test_settings_cannot_put_files_outside_the_store(fixture_copy, tmp_path, setting):
    store = fixture_copy("small")
    elsewhere = tmp_path / "elsewhere"
    before = tree_state(store)
    rc, out, err, _ = run("send", store, "TopicTest", "--body", "x", "--set",
                          setting.format(elsewhere=elsewhere, store=store))
    assert rc == 2 and ("outside the store" in err or "not the store folder" in err), err
    assert not elsewhere.exists() and not (tmp_path / "x").exists()
    assert tree_state(store) == before


def test_a_broker_conf_describes_the_brokers_paths_not_this_copy(fixture_copy, tmp_path):
    store = fixture_copy("small")
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=DefaultCluster\nbrokerName=broker-a\nstorePathRootDir=/data/rocketmq/store\n"
                    "storePathCommitLog=/data/rocketmq/store/commitlog\nmappedFileSizeCommitLog=65536\n")
    rc, out, err, _ = run("--config", conf, "info", store)
    assert rc == 0 and "passed over" in out and "12 file(s)" in out, (out, err)


@pytest.mark.parametrize("argv,says", [
    (["info", "{s}", "--set", "unknownKey=1"], "unknown store setting"),
    (["info", "{s}", "--set", "brokerName=x"], "choose a broker within a tier folder"),  # (a tier setting, on a classic store)
    (["info", "{s}", "--config", "/etc/passwd"], "not a broker.conf"),
    (["info", "{s}", "--config", "/dev/zero"], "not a regular file"),
    (["info", "{s}", "--config", "{bin}"], "binary"),
    (["info", "{s}", "--config", "{bad}"], "not key=value"),
    (["cq", "{s}", "TopicTest", "0", "--from", "-5"], "negative"),
])
def test_hostile_input_ends_fast_with_one_line(fixture_copy, tmp_path, argv, says):
    store = fixture_copy("small")
    (tmp_path / "bin").write_bytes(b"mappedFileSizeCommitLog=1\0\x01" * 10)
    (tmp_path / "bad").write_text("mappedFileSizeCommitLog=65536\n{not a key} = 1\n")
    before = tree_state(store)
    rc, out, err, secs = run(*[a.format(s=store, bin=tmp_path / "bin", bad=tmp_path / "bad") for a in argv])
    assert rc == 2 and says in err and err.count("\n") == 1, err
    assert secs < 5
    assert tree_state(store) == before


def test_a_huge_sparse_commitlog_file_is_refused_at_once(tmp_path):
    root = tmp_path / "big"
    (root / "commitlog").mkdir(parents=True)
    with open(root / "commitlog" / f"{0:020d}", "wb") as fh:
        fh.truncate(1 << 40)  # 1 TiB, sparse
    for cmd in ("info", "check"):
        rc, out, err, secs = run(cmd, root)
        assert rc == 2 and "more than RocketMQ maps" in err and secs < 5, err


def test_rebuild_without_a_terminal_needs_yes(fixture_copy):
    store = fixture_copy("small")
    before = tree_state(store)
    rc, out, err, _ = run("rebuild", store)
    assert rc == 2 and "--yes" in err and tree_state(store) == before
    rc, out, err, _ = run("rebuild", store, "--yes")
    assert rc == 0, err


def test_rebuild_asks_on_a_terminal(fixture_copy):
    """A real terminal (a pty): answering no changes nothing."""
    import pty
    store = fixture_copy("small")
    before = tree_state(store)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-m", "engine", "rebuild", str(store)])
    seen = b""
    while b"[y/N]" not in seen:
        seen += os.read(fd, 1024)
    os.write(fd, b"n\n")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2
    assert tree_state(store) == before


@pytest.mark.parametrize("where", ["inside", "inside-other", "dangling-link", "link"])
def test_export_never_writes_into_a_store_or_through_a_link(fixture_copy, tmp_path, where):
    store = fixture_copy("small")
    other = fixture_copy("v5")
    target = tmp_path / "target.jsonl"
    out = {"inside": store / "commitlog" / "x", "inside-other": other / "index" / "y",
           "dangling-link": tmp_path / "dangling", "link": tmp_path / "link"}[where]
    if "link" in where:
        if where == "link":
            target.write_text("mine")
        out.symlink_to(target)
    before, before_other = tree_state(store), tree_state(other)
    rc, _, err, _ = run("scan", store, "export", "--local", "--format", "jsonl", "--out", out, "--overwrite")
    assert rc == 2 and ("inside the store" in err or "symbolic link" in err), err
    assert tree_state(store) == before and tree_state(other) == before_other
    assert (target.read_text() == "mine") if where == "link" else not target.exists()


def test_export_appears_only_when_complete(fixture_copy, tmp_path, monkeypatch):
    """Written under a temporary name and renamed: a failed export leaves nothing at --out."""
    from engine.scan import local
    from engine.scan.api import JobParams, run_job
    store = fixture_copy("small")
    (tmp_path / "exports").mkdir()
    out = tmp_path / "exports" / "out.jsonl"
    real = local.iter_blocks
    def failing(*a, **k):
        for i, b in enumerate(real(*a, **k)):
            if i == 1:
                raise OSError(errno.EIO, "simulated read error")
            yield b
    monkeypatch.setattr(local, "iter_blocks", failing)
    with MessageStore.open(store) as st, pytest.raises(OSError):
        run_job(st, "export", JobParams(format="jsonl", out=str(out), split_bytes=65536), engine="local")
    assert not out.exists() and not list(out.parent.iterdir())
    monkeypatch.undo()
    with MessageStore.open(store) as st:
        r = run_job(st, "export", JobParams(format="jsonl", out=str(out)), engine="local")
    assert out.exists() and r.rows[0]["rows"] == sum(1 for _ in open(out)) and len(list(out.parent.iterdir())) == 1


def _mount_ns_available() -> bool:
    import shutil
    if shutil.which("unshare") is None:
        return False
    p = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return p.returncode == 0


def test_full_tmpfs_with_sparse_files_is_an_error_never_sigbus(tmp_path):
    """A broker-like store of sparse default-size files on a tmpfs filled to the last byte: on
    tmpfs even a read of a hole allocates, which is SIGBUS when it is full. Reads still answer
    (the holes are read as zeros from private memory), writes are refused with one line."""
    if not _mount_ns_available():
        pytest.skip("cannot mount a tmpfs here (needs root or user namespaces)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    py = sys.executable
    script = f"""
set -u
mount -t tmpfs -o size=64m tmpfs {mnt} || exit 99
cd {os.getcwd()}
{py} -m engine init {mnt}/s >/dev/null || exit 98
{py} -m engine send {mnt}/s TopicTest --body hello --keys k1 --count 20 >/dev/null || exit 97
head -c 200000000 /dev/zero > {mnt}/fill 2>/dev/null
for cmd in "info {mnt}/s" "check {mnt}/s" "query-key {mnt}/s TopicTest k1 --json" "get {mnt}/s TopicTest 0 0" \\
           "scan {mnt}/s topic-stats --local" "send {mnt}/s TopicTest --body x" "recover {mnt}/s"; do
  {py} -m engine $cmd > {tmp_path}/out 2> {tmp_path}/err
  echo "$cmd|$?|$(tail -c 300 {tmp_path}/err | tr '\\n' ' ')"
done
"""
    p = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    results = {line.split("|")[0].split()[0]: line.split("|")[1:] for line in p.stdout.strip().splitlines()}
    for cmd, (rc, err) in results.items():
        assert rc != "135" and "Bus error" not in err, (cmd, rc, err)  # 135 = killed by SIGBUS
    for cmd in ("info", "check", "query-key", "get", "scan"):
        assert results[cmd][0] == "0", (cmd, results[cmd])
    for cmd in ("send", "recover"):
        assert results[cmd][0] == "2" and "full" in results[cmd][1], (cmd, results[cmd])


def test_failed_reservation_is_given_back_on_a_full_ext4(tmp_path):
    """posix_fallocate on ext4 keeps what it allocated before ENOSPC: a refused put used to
    leave the disk 100% full. The partial reservation is punched out again."""
    import shutil
    if not (shutil.which("mkfs.ext4") and _mount_ns_available()):
        pytest.skip("needs mkfs.ext4 and a mount namespace")
    img, mnt = tmp_path / "e4.img", tmp_path / "e4"
    mnt.mkdir()
    with open(img, "wb") as fh:
        fh.truncate(40 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    code = ("import os, pathlib, sys\n"
            "from engine.files.mapped_file import MappedFile\n"
            "from engine.errors import StoreFullError\n"
            f"p = pathlib.Path('{mnt}') / ('0' * 20)\n"
            "f = MappedFile(p, 256 << 20, writable=True, create=True, reserve_step=1 << 20)\n"
            "f.append(b'x' * 100)\n"
            "f.reserve_step = 200 << 20\n"
            "try:\n    f.ensure_room((1 << 20) + 10)\n    print('reserved')\n"
            "except StoreFullError:\n    print('refused')\n"
            "st = os.statvfs(str(p.parent))\n"
            "print(os.stat(p).st_blocks * 512, st.f_bavail * st.f_frsize)\n")
    script = f"mount -o loop {img} {mnt} || exit 99\ncd {os.getcwd()}\n{sys.executable} -c \"{code}\""
    p = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if p.returncode == 99:
        pytest.skip("no loop devices here")
    lines = p.stdout.split()
    assert p.returncode == 0 and lines[0] == "refused", (p.stdout, p.stderr)
    used, free = int(lines[1]), int(lines[2])
    assert used <= 2 << 20 and free > 20 << 20  # the failed 200 MiB reservation took nothing with it


def test_a_broken_scan_import_is_reported(tmp_path):
    """A scan module that fails to import says so when scan is asked for; other commands work."""
    code = ("import sys, engine.scan\n"
            "sys.modules['engine.cli.scan'] = None\n"  # import engine.cli.scan now raises ImportError
            "from engine import cli\n"
            "sys.exit(cli.main(sys.argv[1:]))\n")
    from conftest import unpack
    p = subprocess.run([sys.executable, "-c", code, "scan", str(unpack("small")), "topic-stats", "--local"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "scans are unavailable" in p.stderr and "engine.cli.scan" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-c", code, "info", str(unpack("small"))], capture_output=True, text=True)
    assert p.returncode == 0
