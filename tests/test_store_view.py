"""One conformance module for every StoreView implementation (engine.store.view), as zarr runs
its StoreTests on every store: the classic local store, DLedger, RocksDB consume queues, and
stores read through a filesystem (engine.scan.remote), classic and DLedger. Each answers from
the same members, and the answers are checked against what the real RocketMQ reported (the
fixtures' manifests) and against the bytes of the files."""
import struct

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.format.message import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2
from engine.format.record import OFF_PHYSICALOFFSET
from engine.scan.planning import plan_commitlog, plan_consume_queues, plan_index
from engine.scan.remote import RemoteStore, read_range, store_uri
from engine.store.view import CommitLogView, StoreView

# (implementation, fixture): the mapped kinds and the same stores read through a filesystem
KINDS = [("mapped", "small"), ("mapped", "dledger"), ("mapped", "dledger_mixed"), ("mapped", "v5_rocksdb_cq"),
         ("filesystem", "small"), ("filesystem", "dledger")]


@pytest.fixture(scope="module", params=KINDS, ids=[f"{k}-{n}" for k, n in KINDS])
def view(request):
    how, name = request.param
    root = unpack(name)
    v = MessageStore.open(root) if how == "mapped" else RemoteStore(store_uri(str(root)))
    v.fixture, v.mapped = name, how == "mapped"
    yield v
    v.close()


def _reported(name: str) -> tuple[int, int]:
    """(minPhyOffset, maxPhyOffset) the real store reported after it loaded."""
    m = manifest(name)
    r = m.get("after_reopen") or m.get("min_max_offsets")
    return r["minPhyOffset"], r["maxPhyOffset"]


def _head(view, f, n: int) -> bytes:
    return bytes(f.buf[:n]) if view.mapped else bytes(read_range(f.path, 0, n))


def test_is_a_store_view(view):
    assert isinstance(view, StoreView) and isinstance(view.commitlog, CommitLogView)
    assert view.tier_store is None   # (a tier: engine.store.tiered, not a StoreView of files)
    assert (view.local_store is view) == view.mapped


def test_offsets_are_what_rocketmq_reported(view):
    lo, hi = _reported(view.fixture)
    assert view.min_offset == view.commitlog.min_offset == lo
    if view.mapped:   # recovered: the real store's end
        assert view.max_offset == hi
    else:             # listed, not recovered: the files' end, which the readers cut
        last = view.commitlog.files[-1]
        assert view.max_offset == last.file_from_offset + last.file_size >= hi


def test_commitlog_files_follow_each_other(view):
    files = view.commitlog.files
    assert files
    for a, b in zip(files, files[1:]):
        assert b.file_from_offset >= a.file_from_offset + a.file_size
    names = [str(f.path).rsplit("/", 1)[-1] for f in files]
    assert names == [f"{f.file_from_offset:020d}" for f in files]


def test_entry_header_says_where_the_first_record_is(view):
    """At entry_header(f) of each file the bytes hold a record whose physical offset is that
    position in the log: 0 in a classic log, the DLedger entry header (48) in a DLedger one."""
    seen = set()
    for f in view.commitlog.files:
        e = view.commitlog.entry_header(f)
        raw = _head(view, f, e + OFF_PHYSICALOFFSET + 8)
        total, magic = struct.unpack_from(">ii", raw, e)
        if total <= 0:
            continue   # an empty file
        assert magic in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2)
        assert struct.unpack_from(">q", raw, e + OFF_PHYSICALOFFSET)[0] == f.file_from_offset + e
        seen.add(e)
    assert seen == ({0} if view.fixture in ("small", "v5_rocksdb_cq") else
                    {48} if view.fixture == "dledger" else {0, 48})


def test_index_files_and_headers_are_the_real_ones(view):
    m = manifest(view.fixture).get("index_files")
    files = view.index.files
    for f in files:
        assert 40 + 4 * f.slot_num + 20 * f.index_num == f.file.file_size
    if m is None:
        return
    want = {e["name"].rsplit("/", 1)[-1]: e.get("header", e) for e in m}
    assert [f.name for f in files] == sorted(want)
    for f in files:
        got = f.header.to_json()
        assert {k: got[k] for k in ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset",
                                    "hashSlotCount", "indexCount")} == \
            {k: want[f.name][k] for k in got}


def test_cq_file_size_is_the_files_size(view):
    size = view.cq_file_size
    if view.fixture == "v5_rocksdb_cq":
        assert size == 0   # no ConsumeQueue files
        return
    root = unpack(view.fixture) / "consumequeue"
    sizes = {p.stat().st_size for p in root.glob("*/*/*")}
    assert sizes == {size}


def test_the_scan_plan_covers_the_log_once(view):
    """The commitlog slices tile every file's readable bytes, each with its file's framing."""
    plan = plan_commitlog(view)
    by_file = {}
    for s in plan.commitlog:
        by_file.setdefault(s.file_from_offset, []).append(s)
    files = {f.file_from_offset: f for f in view.commitlog.files}
    assert set(by_file) <= set(files)
    for base, slices in by_file.items():
        slices.sort(key=lambda s: s.start)
        assert slices[0].start == 0 and slices[-1].end == slices[-1].limit
        assert all(a.end == b.start for a, b in zip(slices, slices[1:]))
        assert {s.entry_header for s in slices} == {view.commitlog.entry_header(files[base])}


def test_the_queue_and_index_plans_name_every_queue_and_file(view):
    cq = plan_consume_queues(view)
    planned = {(s.topic, s.queue_id) for s in cq}
    assert planned and planned <= set(view.queues)
    assert {s.kind for s in cq} == ({"rocksdb"} if view.fixture == "v5_rocksdb_cq" else {"file"})
    idx = plan_index(view)
    assert {s.name for s in idx} == {f.name for f in view.index.files if f.header.indexCount > 1}


# ---- nothing above the implementations asks a store which kind it is ---------------------------
# (a scan slice's `kind` is not among them: it is the serialised plan's tag of where to read)
ASKS = [r'getattr\([^)]*"(remote|rocksdb|dledger|is_dledger|kind)"', r"\.is_dledger\b", r"(?<!files)\.rocksdb\b",
        r"\bstore\.remote\b", r"\b(store|probe)\.dledger\b", r"\b(store|cq|view)\.kind\s*==",
        r"isinstance\(\w+, \(?(RemoteStore|TieredStore|TieredView|StoreWithTier|DLedgerCommitLog|RocksDB\w*)"]
# where a store is opened, the folder (not a store) says which implementation to make
CHOICES = {"engine/store/opener.py": 1, "engine/store/queue_store.py": 1, "engine/scan/remote.py": 1,
           "engine/cli/tiered.py": 2, "gui/session.py": 1}
CHOOSE = r"_dledger\.choose\(|is_rocksdb_cq\(|is_remote\(|is_tier_folder\("


def test_no_site_asks_a_store_its_kind():
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    asked, chosen = [], {}
    for p in sorted([*root.glob("engine/**/*.py"), *root.glob("gui/**/*.py")]):
        rel = p.relative_to(root).as_posix()
        for n, line in enumerate(p.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(re.search(a, code) for a in ASKS):
                asked.append(f"{rel}:{n}: {line.strip()}")
            if re.search(CHOOSE, code) and not re.search(r"def (choose|is_rocksdb_cq|is_remote|is_tier_folder)\(", code):
                chosen[rel] = chosen.get(rel, 0) + 1
    assert asked == []
    chosen.pop("engine/scan/stores.py", None)   # its spec parser tells a path from a URI, no store yet
    assert chosen == CHOICES
