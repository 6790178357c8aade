"""The background flush runs beside the appends, as RocketMQ's FlushRealTimeService does: its
msync holds neither the writer's lock nor the GIL, a file that rolled is synced by the next
round, and the index's random slot writes are synced when the file is full and at close."""
import threading
import time

import pytest

from engine import MessageStore, StoreConfig
from engine.files import mapped_file
from engine.store.checkpoint import Checkpoint

SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256)


def _store(tmp_path, **kw):
    """A store whose background flusher never wakes on its own (each test flushes when it means
    to, so a round in between cannot change what it checks)."""
    return MessageStore.create(tmp_path / "s", StoreConfig.from_mapping({
        **SMALL, "flushIntervalCommitLog": 3_600_000, **kw}))


def test_a_put_goes_on_while_the_flush_waits_for_the_disk(tmp_path, monkeypatch):
    """A disk that takes its time (an msync that blocks until released) stops neither a put
    nor the put's dispatch: the flush took only a note of the positions under the lock."""
    s = _store(tmp_path)
    try:
        for i in range(20):
            s.put_message("T", b"x" * 200, i & 3, keys=f"k{i}")
        entered, release = threading.Event(), threading.Event()
        real = mapped_file.sync_range

        def slow_disk(mm, start, length):
            entered.set()
            release.wait(10)
            real(mm, start, length)
        monkeypatch.setattr(mapped_file, "sync_range", slow_disk)
        t = threading.Thread(target=s.flush)
        t.start()
        assert entered.wait(10), "the flush never reached its msync"
        started = time.monotonic()
        r = s.put_message("T", b"during the flush", 1, keys="late")
        assert time.monotonic() - started < 5
        assert r.status == "PUT_OK"
        assert s.query_message("T", "late").messages[0].body == b"during the flush"
        release.set()
        t.join(10)
        assert not t.is_alive()
    finally:
        release.set()
        s.close()


def test_the_flush_syncs_a_file_that_rolled_since_the_last_round(tmp_path):
    """Asynchronous flush: the roll no longer syncs the full file in the put; the next round
    syncs every file written since the last one, oldest first, then the checkpoint."""
    s = _store(tmp_path)
    try:
        s.flush()
        n = 0
        while len(s.commitlog.queue.files) < 3:
            s.put_message("T", b"y" * 1000, n & 3, keys=f"k{n}")
            n += 1
        files = s.commitlog.queue.files
        assert files[0].wrote_position == files[0].file_size > files[0].flushed_position  # not in the put
        s.flush()
        assert all(f.flushed_position >= f.wrote_position for f in files)
        last_store_ts = s.writer.last_store_ts
        cp, _ = Checkpoint.load(tmp_path / "s" / "checkpoint")
        assert cp.physicMsgTimestamp == last_store_ts
    finally:
        s.close()


def test_sync_flush_still_syncs_the_rolled_file_in_the_put(tmp_path):
    """SYNC_FLUSH acknowledges only durable bytes: the full file's blank is synced at the roll."""
    s = _store(tmp_path, flushDiskType="SYNC_FLUSH")
    try:
        n = 0
        while len(s.commitlog.queue.files) < 2:
            s.put_message("T", b"z" * 1000, n & 3)
            n += 1
        first, last = s.commitlog.queue.files[0], s.commitlog.queue.files[-1]
        assert first.flushed_position == first.wrote_position == first.file_size
        assert last.flushed_position == last.wrote_position
    finally:
        s.close()


@pytest.fixture
def synced(monkeypatch):
    """Every msync the engine asks for, as (map, start, length), while still doing it."""
    out = []
    real = mapped_file.sync_range

    def watch(mm, start, length):
        out.append((mm, start, length))
        real(mm, start, length)
    monkeypatch.setattr(mapped_file, "sync_range", watch)
    return out


def test_a_background_round_syncs_the_index_header_and_close_syncs_it_all(tmp_path, synced):
    """The header (its endTimestamp decides crash recovery's deletion) every round; the whole
    file, slots and entries, at an explicit flush and at close."""
    s = _store(tmp_path, maxHashSlotNum=2000, maxIndexNum=4000)
    try:
        for i in range(50):
            s.put_message("T", b"w" * 100, i & 3, keys=f"k{i}")
        idx = s.index.files[-1].file
        s.writer.flush(index=False)   # what the flusher thread runs
        on_index = [(a, n) for mm, a, n in synced if mm is idx.mm]
        assert on_index == [(0, 40)]
        synced.clear()
        s.flush()
        on_index = [(a, n) for mm, a, n in synced if mm is idx.mm]
        assert on_index == [(0, idx.file_size)]
    finally:
        s.close()


def test_a_new_index_file_not_yet_past_the_checkpoint_is_synced_whole(tmp_path, synced):
    """Until its endTimestamp is past the checkpoint's indexMsgTimestamp (its first entries in
    the full file's last millisecond), crash recovery would keep the file: a round syncs all of it."""
    s = _store(tmp_path, maxHashSlotNum=2000, maxIndexNum=4000)
    try:
        for i in range(5):
            s.put_message("T", b"v", i & 3, keys=f"k{i}")
        idx = s.index.files[-1]
        s.checkpoint.indexMsgTimestamp = idx.header.endTimestamp   # as right after a roll
        s.writer.flush(index=False)
        assert [(a, n) for mm, a, n in synced if mm is idx.file.mm] == [(0, idx.file.file_size)]
    finally:
        s.close()


def test_an_index_roll_syncs_every_commitlog_file_it_vouches_for(tmp_path):
    """index_file_full writes the checkpoint time of the full index file: the commitlog files
    that rolled since the flusher's last round are synced first, not only the last one."""
    from engine.store.opener import index_file_full
    s = _store(tmp_path)
    try:
        n = 0
        while len(s.commitlog.queue.files) < 3:
            s.put_message("T", b"u" * 1000, n & 3)
            n += 1
        files = s.commitlog.queue.files
        assert files[0].flushed_position < files[0].wrote_position
        index_file_full(s, s.writer.last_store_ts)
        assert all(f.flushed_position >= f.wrote_position for f in files)
    finally:
        s.close()
