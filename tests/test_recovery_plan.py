"""Recovery as plan and apply (engine.store.recovery): on damaged stores, the dry run's plan, the
read-only open's view and the state after a real recovery agree; a read-only open writes
nothing; open and rebuild are tasks with progress and cancel."""
from __future__ import annotations

import random
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from relsupport import build_store, cut_rebuild, small_cfg, tree_digest  # noqa: E402

from engine import MessageStore  # noqa: E402
from engine.cli.write import recover  # noqa: E402
from engine.store.checkpoint import Checkpoint  # noqa: E402
from engine.store.rebuild import rebuild_task  # noqa: E402
from engine.tasks import CancelToken, Cancelled, run  # noqa: E402

FIXTURES = ["crashed", "crashed_torn", "crashed_badcrc", "crashed_live", "v5_crashed", "small"]


# ---- damaged stores, built the way tests/reliability damages them -----------------------------
def _last_record(root: Path, cfg) -> tuple[int, int]:
    with MessageStore.open(root, cfg) as s:
        last = None
        for m in s.iter_messages():
            last = m
        return last.commitLogOffset, last.storeSize


def _commitlog_file(root: Path, cfg, offset: int) -> tuple[Path, int]:
    size = cfg.mappedFileSizeCommitLog
    start = offset - offset % size
    return root / "commitlog" / f"{start:020d}", offset - start


def _write(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def damage_crash_cut(root: Path, cfg) -> None:
    """A crash cut the last record short (its second half never reached the disk)."""
    off, size = _last_record(root, cfg)
    path, pos = _commitlog_file(root, cfg, off)
    _write(path, pos + size // 2, b"\0" * (size - size // 2))
    (root / "abort").touch()


def damage_clean_cut(root: Path, cfg) -> None:
    """No abort file, yet the last two records are torn (a copy taken mid-write)."""
    with MessageStore.open(root, cfg) as s:
        msgs = list(s.iter_messages())[-2:]
    for m in msgs:
        path, pos = _commitlog_file(root, cfg, m.commitLogOffset)
        _write(path, pos + 8, b"\x7f\x01\x02\x03")  # BODYCRC


def damage_cq_tail(root: Path, cfg) -> None:
    """Torn consume-queue tails: units pointing past the commitlog's end, then half a unit."""
    with MessageStore.open(root, cfg) as s:
        end = s.max_offset
        targets = [(cq.directory, cq.max_offset) for cq in list(s.queues.values())[:3]]
    upf = cfg.mappedFileSizeConsumeQueue // 20
    for i, (d, mx) in enumerate(targets):
        units = [struct.pack(">qiq", end + 100 * k, 90, 7) for k in range(i + 1)] + [struct.pack(">q", end + 5000)]  # torn: size not written
        data = b"".join(units)
        pos = mx * 20
        f = d / f"{pos - pos % (upf * 20):020d}"
        if not f.exists():
            f.write_bytes(b"\0" * (upf * 20))
        room = upf * 20 - pos % (upf * 20)
        _write(f, pos % (upf * 20), data[:room])
    (root / "abort").touch()


def damage_stale_index(root: Path, cfg) -> None:
    """A crash with a checkpoint that vouches for nothing: every index file is stale."""
    Checkpoint(0, 0, 0).store(root / "checkpoint")
    (root / "abort").touch()


BUILT = {"crash_cut": damage_crash_cut, "clean_cut": damage_clean_cut, "cq_tail": damage_cq_tail,
         "stale_index": damage_stale_index}


@pytest.fixture
def damaged(tmp_path, fixture_copy):
    def make(name: str):
        if name in BUILT:
            root = build_store(tmp_path / name, n=400, seed=len(name))
            cfg = small_cfg()
            BUILT[name](root, cfg)
            return root, cfg
        return fixture_copy(name), None
    return make


ALL = list(BUILT) + FIXTURES


def _units(cq) -> bytes:
    return cq.units(cq.min_offset, cq.max_offset).tobytes()


# ---- the three agree -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_dry_run_read_only_view_and_recovery_agree(damaged, name):
    root, cfg = damaged(name)
    dry = recover(root, cfg, dry_run=True)
    with MessageStore.open(root, cfg, read_only=True) as ro:
        plan = ro.recovery_plan
        ro_end = ro.max_offset
        ro_queues = {k: (cq.max_offset, _units(cq)) for k, cq in ro.queues.items()}
        assert ro.recovery.truncated_queues == [c.name for c in plan.queue_cuts]
        for c in plan.queue_cuts:
            assert ro.queues[(c.topic, c.queue_id)].max_offset == c.max_offset
    assert dry["plan"] == plan.to_json()
    assert dry["commitlogMaxOffset"] == ro_end == plan.end_offset
    assert dry["filesDeleted"] == plan.files_deleted
    assert dry["queuesTruncated"] == [c.name for c in plan.queue_cuts]
    assert dry["indexFilesRebuilt"] == plan.index_files_deleted
    if name in BUILT and name != "clean_cut":
        assert plan.abnormal
    if name in ("crash_cut", "clean_cut", "crashed_torn", "crashed_badcrc"):
        assert dry["truncatedBytes"] > 0
    if name == "cq_tail":
        assert len(plan.queue_cuts) == 3 and [c.units_dropped for c in plan.queue_cuts] == [1, 2, 3]
    if name == "stale_index":
        assert plan.index_files_deleted and plan.start_index == 0

    with MessageStore.open(root, cfg, read_only=False) as rw:
        wplan, rep = rw.recovery_plan, rw.recovery
        assert rw.max_offset == wplan.end_offset == plan.end_offset
        assert rep.commitlog.deleted_files == wplan.files_deleted == plan.files_deleted
        assert rep.truncated_queues == [c.name for c in wplan.queue_cuts] == [c.name for c in plan.queue_cuts]
        assert rep.deleted_index_files == wplan.index_files_deleted == plan.index_files_deleted
        for k, (mx, units) in ro_queues.items():
            cq = rw.queues[k]
            assert cq.max_offset >= mx  # re-dispatch may add what a crash left undispatched
            assert _units(cq)[:len(units)] == units
    with MessageStore.open(root, cfg, read_only=True) as again:  # recovered: nothing left to cut
        p2 = again.recovery_plan
        assert not p2.abnormal and p2.end_offset == plan.end_offset
        assert not p2.queue_cuts and not p2.files_deleted and not p2.index_files_deleted


@pytest.mark.parametrize("name", ALL)
def test_read_only_open_writes_nothing(damaged, name):
    root, cfg = damaged(name)
    before = tree_digest(root)
    with MessageStore.open(root, cfg, read_only=True) as s:
        assert s.recovery_plan is not None
        for cq in s.queues.values():
            _units(cq)
        list(s.iter_messages())
    recover(root, cfg, dry_run=True)
    assert tree_digest(root) == before


# ---- tasks: progress and cancel --------------------------------------------------------------------
def _data_digest(root: Path) -> dict:
    return {k: v for k, v in tree_digest(root).items() if not k.endswith("/") and k not in ("lock", "abort")}


def test_open_task_progress_phases_and_same_store(damaged, tmp_path):
    root, cfg = damaged("stale_index")
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    seen = []
    s = run(MessageStore.open_task(root, cfg, read_only=False), seen.append)
    s.close()
    MessageStore.open(twin, cfg, read_only=False).close()
    assert {"plan", "commitlog", "consume queues", "index"} <= {p.phase for p in seen}
    assert all(0 <= p.done <= p.total for p in seen)
    a = sorted(p.relative_to(root) for p in (root / "consumequeue").rglob("*") if p.is_file())
    assert a == sorted(p.relative_to(twin) for p in (twin / "consumequeue").rglob("*") if p.is_file())
    assert all((root / p).read_bytes() == (twin / p).read_bytes() for p in a)
    # index files are named by the time they were made: compare their bytes in order
    assert [p.read_bytes() for p in sorted((root / "index").iterdir())] == \
        [p.read_bytes() for p in sorted((twin / "index").iterdir())]


def test_cancelled_open_writes_nothing_and_the_next_open_recovers(damaged, tmp_path):
    root, cfg = damaged("crash_cut")
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    before = _data_digest(root)
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        run(MessageStore.open_task(root, cfg, read_only=False, cancel=token))
    assert _data_digest(root) == before and (root / "abort").exists()
    with MessageStore.open(root, cfg, read_only=False) as a, MessageStore.open(twin, cfg, read_only=False) as b:
        assert a.max_offset == b.max_offset
        assert {k: _units(cq) for k, cq in a.queues.items()} == {k: _units(cq) for k, cq in b.queues.items()}


def test_cancel_during_redispatch_then_recovery_completes(tmp_path, monkeypatch):
    from engine.store import recovery
    monkeypatch.setattr(recovery, "DISPATCH_STEP", 16)
    root = build_store(tmp_path / "s", n=400, seed=3)
    cfg = small_cfg()
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    for r in (root, twin):
        damage_stale_index(r, cfg)
    token = CancelToken()

    def on_progress(p):
        if p.unit == "bytes" and 0 < p.done < p.total:
            token.cancel()
    with pytest.raises(Cancelled):
        run(MessageStore.open_task(root, cfg, read_only=False, cancel=token), on_progress)
    with MessageStore.open(root, cfg, read_only=False) as a, MessageStore.open(twin, cfg, read_only=False) as b:
        assert a.recovery.abnormal
        assert {k: _units(cq) for k, cq in a.queues.items()} == {k: _units(cq) for k, cq in b.queues.items()}
        msgs = list(b.iter_messages())
        rng = random.Random(5)
        for m in rng.sample(msgs, 20):
            for k in m.key_list[:1]:
                assert a.query_message(m.topic, k).offsets == b.query_message(m.topic, k).offsets


def test_rebuild_task_progress_and_cancel(tmp_path):
    root = build_store(tmp_path / "s", n=300, seed=9)
    cfg = small_cfg()
    with MessageStore.open(root, cfg) as s:
        want = {k: _units(cq) for k, cq in s.queues.items()}
        records = sum(1 for _ in s.iter_messages())
    before = tree_digest(root)
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        run(rebuild_task(root, cfg, token))
    assert tree_digest(root) == before
    seen = []
    out = run(rebuild_task(root, cfg), seen.append)
    assert out["dispatched"] == records and not out["abnormal"]
    assert {"plan", "index", "commitlog"} <= {p.phase for p in seen}
    assert not (root / ".rmqstore-rebuild-trash").exists()
    with MessageStore.open(root, cfg) as s:
        assert {k: _units(cq) for k, cq in s.queues.items()} == want


def test_a_cut_rebuild_leaves_a_checkpoint_a_broker_could_have_written(tmp_path, monkeypatch):
    """§12.7: the checkpoint stops vouching for the consume queues and the index before they
    are deleted (logics and index timestamps 0): a rebuild cut short keeps no old
    indexMsgTimestamp past its new index, and crash recovery, by the checkpoint alone,
    starts at the first commitlog file. A completed rebuild puts logicsMsgTimestamp back."""
    root = build_store(tmp_path / "s", n=600, seed=3)
    cfg = small_cfg()
    before, _ = Checkpoint.load(root / "checkpoint")
    assert before.logicsMsgTimestamp and before.indexMsgTimestamp
    cut_rebuild(root, cfg, monkeypatch)
    cut, _ = Checkpoint.load(root / "checkpoint")
    assert cut.logicsMsgTimestamp == 0 and cut.min_timestamp == 0
    assert cut.physicMsgTimestamp == before.physicMsgTimestamp
    with MessageStore.open(root, cfg) as s:
        full = [f.header.endTimestamp for f in s.index.files if f.header.indexCount > 1]
        assert cut.indexMsgTimestamp <= max(full, default=0)
        assert s.recovery_plan.start_index == 0
    out = run(rebuild_task(root, cfg))
    assert out["abnormal"] and out["dispatched"] == 600
    after, _ = Checkpoint.load(root / "checkpoint")
    assert after.logicsMsgTimestamp >= before.logicsMsgTimestamp and after.indexMsgTimestamp > 0
    assert not (root / "abort").exists()
    out = run(rebuild_task(root, cfg))   # a clean store's rebuild keeps its logics timestamp
    assert not out["abnormal"] and Checkpoint.load(root / "checkpoint")[0].logicsMsgTimestamp == \
        after.logicsMsgTimestamp


def test_plan_is_pure_and_torn_slots_reported(tmp_path):
    """plan() on a writable store changes no byte; the torn slots it reports are the ones
    apply points back."""
    from engine.store import recovery
    from engine.store.index_file import INDEX_HEADER_SIZE
    root = build_store(tmp_path / "s", n=200, seed=4)
    cfg = small_cfg()
    idx = sorted((root / "index").iterdir())[-1]
    with MessageStore.open(root, cfg) as s:
        count = s.index.files[-1].header.indexCount
        free = int(np.flatnonzero(s.index.files[-1].slots == 0)[0])
    _write(idx, INDEX_HEADER_SIZE + 4 * free, struct.pack(">i", count))  # slot written, header not
    with MessageStore.open(root, cfg, read_only=True) as ro:
        assert ro.recovery_plan.torn_slots == {}  # read-only: the slot table is not read for it
        cfg = ro.cfg  # rooted at the store, sizes detected
    s = MessageStore(root, cfg, False)
    from engine.store.commit_log import CommitLog
    from engine.store.index_service import IndexService
    s.abort_present = False
    s.checkpoint, _ = Checkpoint.load(root / "checkpoint")
    s.commitlog = CommitLog(cfg, True)
    from engine.store.queue_store import FileQueueStore
    s.queue_store = FileQueueStore(s)
    s.queue_store.load(True)
    s.index = IndexService(cfg, True).load()
    try:
        before = tree_digest(root)
        p = recovery.plan(s)
        assert p.torn_slots == {idx.name: 1}
        assert {k: v for k, v in tree_digest(root).items() if not k.endswith("/")} == \
            {k: v for k, v in before.items() if not k.endswith("/")}
        run(recovery.apply(p, s))
        assert s.index.files[-1].name == idx.name and recovery.torn_slots(s.index.files[-1]) == 0
    finally:
        s.close()
