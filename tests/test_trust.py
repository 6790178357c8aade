"""Errors surface, settings and inputs cannot escape or stall the store (issue: Trust)."""
import errno
import os
import subprocess
import sys
import time

import pytest

from engine.config import StoreConfig
from engine.errors import MessageRejectedError, StoreError, StoreFullError
from engine.message_store import MessageStore


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
    import engine.writer as w
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
