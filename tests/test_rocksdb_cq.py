"""The RocksDB ConsumeQueue (5.x storeType=defaultRocksDB) of v5_rocksdb_cq against what the real
RocketMQ 5.3.3 wrote and returned: the key/value layouts byte for byte (rocksdb_raw), queues and
units (consume_queues), getMessage pages, key queries, min/max offsets; opened read-only without
a byte or a file changing in the store; writes refused with one clear line."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from conftest import ROOT, manifest, unpack
from engine import MessageStore
from engine.errors import ReadOnlyStoreError
from engine.format import rocksdb_cq as fmt
from engine.store.index_file import LONG_MAX

NAME = "v5_rocksdb_cq"


@pytest.fixture(scope="module")
def store():
    with MessageStore.open(unpack(NAME)) as s:
        yield s


def _raw(cf):
    return manifest(NAME)["rocksdb_raw"]["entries"][cf]


# ---- engine/format: the layouts against the bytes RocksDB holds ------------------------------
def test_unit_keys_and_values_round_trip_the_raw_entries():
    entries = _raw("default")
    assert len(entries) == 400
    for e in entries:
        k, v = bytes.fromhex(e["keyHex"]), bytes.fromhex(e["valueHex"])
        assert fmt.decode_cq_key(k) == (e["key"]["topic"], e["key"]["queueId"], e["key"]["cqOffset"])
        assert fmt.cq_key(e["key"]["topic"], e["key"]["queueId"], e["key"]["cqOffset"]) == k
        assert k.startswith(fmt.queue_prefix(e["key"]["topic"], e["key"]["queueId"]))
        val = e["value"]
        fields = (val["phyOffset"], val["msgSize"], val["tagsCode"], val["storeTimestamp"])
        assert fmt.decode_cq_value(v) == fields
        assert fmt.encode_cq_value(*fields) == v
    keys = [bytes.fromhex(e["keyHex"]) for e in entries]
    assert keys == sorted(keys)  # the bytewise order RocksDB iterates in
    assert fmt.key_offsets(keys).tolist() == [e["key"]["cqOffset"] for e in entries]
    arr = fmt.cq_values([bytes.fromhex(e["valueHex"]) for e in entries])
    assert arr["storeTimestamp"].tolist() == [e["value"]["storeTimestamp"] for e in entries]


def test_offset_keys_values_and_the_checkpoint_entry():
    entries = _raw("offset")
    checkpoints = [e for e in entries if e["key"]["topic"] == fmt.CHECKPOINT_TOPIC]
    assert len(checkpoints) == 1
    for e in entries:
        k, v = bytes.fromhex(e["keyHex"]), bytes.fromhex(e["valueHex"])
        key = e["key"]
        assert fmt.decode_offset_key(k) == (key["topic"], key["maxOrMin"], key["queueId"])
        assert fmt.offset_key(key["topic"], key["maxOrMin"], key["queueId"]) == k
        if key["topic"] == fmt.CHECKPOINT_TOPIC:
            assert k == fmt.checkpoint_key()
            assert fmt.decode_checkpoint_value(v) == 101635 == manifest(NAME)["after_reopen"]["maxPhyOffset"]
        else:
            assert fmt.decode_offset_value(v) == (e["value"]["phyOffset"], e["value"]["cqOffset"])
            assert fmt.encode_offset_value(e["value"]["phyOffset"], e["value"]["cqOffset"]) == v


def test_malformed_keys_are_refused():
    good = fmt.cq_key("T", 1, 2)
    for bad in (b"", good[:-1], b"\x00\x00\x00\x09\x01T" + good[6:], good[:4] + b"\x02" + good[5:]):
        with pytest.raises(ValueError):
            fmt.decode_cq_key(bad)
    with pytest.raises(ValueError):
        fmt.decode_offset_key(fmt.offset_key("T", "max", 0).replace(b"max", b"mid"))
    with pytest.raises(ValueError):
        fmt.decode_cq_value(b"\x00" * 20)


# ---- engine/store: queues, units, bounds ---------------------------------------------------
def test_queues_units_and_bounds_equal_the_manifest(store):
    m = manifest(NAME)
    assert sorted(store.queues) == sorted((q["topic"], q["queueId"]) for q in m["consume_queues"])
    times = {(e["key"]["topic"], e["key"]["queueId"], e["key"]["cqOffset"]): e["value"]["storeTimestamp"]
             for e in _raw("default")}
    for q in m["consume_queues"]:
        cq = store.find_queue(q["topic"], q["queueId"])
        assert (cq.min_offset, cq.max_offset) == (q["minOffset"], q["maxOffset"])
        u = cq.units(q["minOffset"], q["maxOffset"])
        got = [[q["minOffset"] + i, q["minOffset"] + i, int(x["commitLogOffset"]), int(x["size"]),
                int(x["tagsCode"]), 1, 0] for i, x in enumerate(u)]
        assert got == q["units"], q["topic"]
        # RocketMQ's maxPhysicOffset is the last unit's offset; ours is where its record ends
        last = q["units"][-1]
        assert cq.max_physic_offset == last[2] + last[3] and q["maxPhysicOffset"] == last[2]
        wt = cq.units_with_times(0, 10**9)
        assert wt["storeTimestamp"].tolist() == [times[(q["topic"], q["queueId"], o)] for o in range(len(wt))]
        assert cq.unit(q["maxOffset"]) is None and cq.units(-5, 0).size == 0


def test_both_kinds_implement_the_consume_queue_interface(store):
    from engine.store.consume_queue_interface import ConsumeQueueInterface
    with MessageStore.open(unpack("small")) as classic:
        files = next(iter(classic.queues.values()))
        assert isinstance(files, ConsumeQueueInterface) and files.kind == "file"
        assert files.broker_units(0, 1).dtype.names[:3] == ("commitLogOffset", "size", "tagsCode")
    for cq in store.queues.values():
        assert isinstance(cq, ConsumeQueueInterface) and cq.kind == "rocksdb"
        assert cq.broker_units(0, 5).dtype.names == ("commitLogOffset", "size", "tagsCode")
        assert len(cq.broker_units(0, 5)) == 5 and len(cq.broker_units(0, 0)) == 0


def test_min_and_max_offsets(store):
    """min: rocksdb_api (0 everywhere, no `min` key). max: the `max` key's cqOffset + 1, which is
    what getMessage reported (maxOffset) and consume_queues lists. rocksdb_api's
    getMaxOffsetInQueue reads 0 for every queue, against the same store's getMessage answers;
    it was evidently taken when the queue store answered nothing, so only its min is compared."""
    m = manifest(NAME)
    api = {(r["topic"], r["queueId"]): r for r in m["rocksdb_api"]["queue_offsets"]}
    maxes = {(e["key"]["topic"], e["key"]["queueId"]): e["value"]["cqOffset"] + 1 for e in _raw("offset")
             if e["key"]["maxOrMin"] == "max" and e["key"]["topic"] != fmt.CHECKPOINT_TOPIC}
    gm = {(c["topic"], c["queueId"]): c["maxOffset"] for c in m["get_message"] if c["topic"] != "NoSuchTopic"}
    assert set(api) == set(maxes) == set(store.queues)
    for key, cq in store.queues.items():
        assert cq.min_offset == api[key]["getMinOffsetInQueue"]
        assert cq.max_offset == maxes[key] == gm[key]
    assert store.queue_store.committed_phy_offset == store.max_offset == 101635
    # a log this small is CRC-checked from the third-last file, as RocketMQ's restart does
    assert store.recovery_plan.start_rule == "normal: third-last file" and store.recovery_plan.scan.messages > 0


def test_a_big_log_is_scanned_only_after_the_last_record_a_queue_references(monkeypatch):
    """Past recovery.VERIFY_SPAN a read-only open takes the end the RocksDB queues vouch for."""
    from engine.store import recovery
    monkeypatch.setattr(recovery, "VERIFY_SPAN", -1)
    with MessageStore.open(unpack(NAME)) as s:
        assert s.recovery_plan.start_rule.startswith("normal, read-only: after the last record")
        assert s.recovery_plan.scan.messages == 0 and s.max_offset == 101635


def test_get_message_cases_equal_rocketmq(store):
    cases = manifest(NAME)["get_message"]
    assert len(cases) > 100
    for c in cases:
        r = store.get_message(c["topic"], c["queueId"], c["offset"], c["maxMsgNums"], broker=True)
        got = (r.status, r.nextBeginOffset, r.minOffset, r.maxOffset, [x.commitLogOffset for x in r.messages],
               r.bufferTotalSize, [x.queueOffset for x in r.messages])
        want = (c["status"], c["nextBeginOffset"], c["minOffset"], c["maxOffset"], c["phyOffsets"],
                c["bufferTotalSize"], c["queueOffsetsFromMessages"])
        assert got == want, c


def test_default_pages_read_a_whole_queue(store):
    cq = store.find_queue("%RETRY%cg_rocks", 0)
    r = store.get_message("%RETRY%cg_rocks", 0, 0, 1000)
    assert [x.queueOffset for x in r.messages] == list(range(cq.max_offset))
    assert r.nextBeginOffset == cq.max_offset and not r.skipped


def test_key_queries_equal_rocketmq(store):
    pairs = manifest(NAME)["key_queries"]["all_pairs"]
    assert len(pairs) > 500
    for topic, key, expected in pairs:
        raw = store.query_message(topic, key, 0, LONG_MAX, 64, raw=True)  # queryMessage sorts the offsets
        assert sorted(raw.offsets) == expected, (topic, key)
        assert [x.commitLogOffset for x in raw.messages] == sorted(raw.offsets)


def test_time_lookups_use_the_units_store_times(store):
    for (topic, qid), cq in store.queues.items():
        times = cq.units_with_times(0, cq.max_offset)["storeTimestamp"].astype(np.int64)
        for t in sorted({int(times[0]) - 1, int(times[0]), int(times[len(times) // 2]),
                         int(times[len(times) // 2]) + 1, int(times[-1]), int(times[-1]) + 1}):
            lower = int(np.searchsorted(times, t, "left"))
            upper = max(0, int(np.searchsorted(times, t, "right")) - 1) if t >= times[0] else 0
            assert store.get_offset_in_queue_by_time(topic, qid, t, "lower") == lower, (topic, qid, t)
            assert store.get_offset_in_queue_by_time(topic, qid, t, "upper") == upper, (topic, qid, t)
        assert store.store_time_at(topic, qid, 0) == int(times[0]) == cq.store_time(0)


def test_units_past_the_commitlog_end_are_not_shown(fixture_copy):
    with MessageStore.open(fixture_copy(NAME)) as s:
        cq = s.find_queue("RocksTopic", 0)
        u = cq.units(0, cq.max_offset)
        cut = int(u["commitLogOffset"][30])
        cq.truncate_dirty(cut)
        assert cq.max_offset == 30
        assert cq.max_physic_offset == int(u["commitLogOffset"][29]) + int(u["size"][29])
        assert s.get_message("RocksTopic", 0, 29, 32, broker=True).nextBeginOffset == 30


# ---- read-only: not a byte, not a file -------------------------------------------------------
def _snapshot(root):
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            out[os.path.relpath(p, root)] = ("dir", os.stat(p).st_mtime_ns)
        for f in files:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = (fh.read(), st.st_size, st.st_mtime_ns)
    return out


def _shadows():
    """This process's private folders of links (another xdist worker opening a RocksDB store
    at the same time has its own, named after its pid)."""
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"rmqstore-rocksdb-{os.getpid()}-")}


def test_opening_changes_nothing_in_the_store(fixture_copy):
    root = fixture_copy(NAME)
    before, shadows = _snapshot(root), _shadows()
    with MessageStore.open(root) as s:
        s.get_message("RocksTopic", 1, 0, 100)
        assert s.refresh() is False  # the database read anew: nothing changed
        assert len(s.queues) == 9
    assert _snapshot(root) == before
    assert _shadows() == shadows  # the private folder of links is gone too
    assert not (root / "consumequeue" / "rocksdict-config.json").exists()


def test_a_killed_readers_private_folder_is_swept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = os.path.join(tempfile.gettempdir(), f"rmqstore-rocksdb-{int(dead.stdout)}-x")
    os.makedirs(stale, exist_ok=True)
    os.symlink(tmp_path / "elsewhere", os.path.join(stale, "CURRENT"))
    with MessageStore.open(unpack(NAME)):
        assert not os.path.exists(stale)


def test_writes_are_refused(fixture_copy):
    root = fixture_copy(NAME)
    before = _snapshot(root)
    with pytest.raises(ReadOnlyStoreError, match="RocksDB"):
        MessageStore.open(root, read_only=False)
    for args in (["send", str(root), "RocksTopic", "--body", "x"], ["rebuild", str(root), "--yes"], ["recover", str(root)]):
        p = _cli(*args)
        assert p.returncode == 2, args
        assert p.stderr.count("\n") == 1 and "RocksDB" in p.stderr, (args, p.stderr)
    assert _snapshot(root) == before


# ---- CLI --------------------------------------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_cli_info_cq_check_and_scans():
    import json
    root = str(unpack(NAME))
    info = json.loads(_cli("info", root, "--json").stdout)
    assert info["consumeQueueStore"]["storeType"] == "defaultRocksDB"
    assert info["consumeQueueStore"]["committedMaxPhyOffset"] == 101635
    assert {(q["topic"], q["queueId"], q["maxOffset"]) for q in info["queues"]} == \
        {(q["topic"], q["queueId"], q["maxOffset"]) for q in manifest(NAME)["consume_queues"]}
    assert "RocksDB" in _cli("info", root).stdout
    lines = _cli("cq", root, "Orders-Rocks", "2", "--json").stdout.splitlines()
    want = next(q for q in manifest(NAME)["consume_queues"] if (q["topic"], q["queueId"]) == ("Orders-Rocks", 2))
    assert [[json.loads(x)[k] for k in ("offset", "commitLogOffset", "size", "tagsCode")] for x in lines] == \
        [[u[0], u[2], u[3], u[4]] for u in want["units"]]
    assert [json.loads(x)["storeTimestamp"] for x in lines] == \
        [e["value"]["storeTimestamp"] for e in _raw("default") if (e["key"]["topic"], e["key"]["queueId"]) == ("Orders-Rocks", 2)]
    chk = _cli("check", root, "--json")
    assert chk.returncode == 0 and json.loads(chk.stdout)["cqUnits"] == 400
    same = _cli("scan", root, "consistency", "--local", "--json")
    assert same.returncode == 0, same.stderr
    assert "no differences" in _cli("scan", root, "consistency", "--local").stdout
    ok = _cli("scan", root, "topic-stats", "--local", "--json")
    assert ok.returncode == 0, ok.stderr
    assert "RocksTopic" in ok.stdout


# ---- other shapes than the fixture's: a database written here with the same layouts ----------
def _write_db(path, units, offsets):
    import rocksdict as rd
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    db = rd.Rdict(str(path), options=opts, column_families={"offset": rd.Options(raw_mode=True)})
    off = db.get_column_family("offset")
    for k, v in units:
        db[k] = v
    for k, v in offsets:
        off[k] = v
    db.close()


def test_min_key_holes_and_a_queue_without_a_max_entry(fixture_copy):
    """Cleaned units below a `min` entry, a queue whose `max` entry is missing (found from its
    units, with a warning), a queue cut by a hole."""
    import shutil
    root = fixture_copy(NAME)
    raw = _raw("default")
    units, offsets = [], []
    for e in raw:
        t, q, o = e["key"]["topic"], e["key"]["queueId"], e["key"]["cqOffset"]
        if (t, q) == ("RocksTopic", 1) and o < 5:
            continue  # cleaned
        if (t, q) == ("Orders-Rocks", 2) and o == 10:
            continue  # a hole
        v = e["value"]
        if (t, q, o) == ("RocksTopic", 2, 3):  # a unit whose store time disagrees with its record
            units.append((bytes.fromhex(e["keyHex"]), fmt.encode_cq_value(v["phyOffset"], v["msgSize"], v["tagsCode"],
                                                                          v["storeTimestamp"] + 1)))
            continue
        units.append((bytes.fromhex(e["keyHex"]), bytes.fromhex(e["valueHex"])))
    for e in _raw("offset"):
        if (e["key"]["topic"], e["key"]["queueId"]) != ("Orders-Rocks", 3):
            offsets.append((bytes.fromhex(e["keyHex"]), bytes.fromhex(e["valueHex"])))
    first = next(e for e in raw if (e["key"]["topic"], e["key"]["queueId"], e["key"]["cqOffset"]) == ("RocksTopic", 1, 5))
    offsets.append((fmt.offset_key("RocksTopic", "min", 1), fmt.encode_offset_value(first["value"]["phyOffset"], 5)))
    shutil.rmtree(root / "consumequeue")
    _write_db(root / "consumequeue", units, offsets)
    assert (root / "consumequeue" / "rocksdict-config.json").exists()  # never written through a link
    before = _snapshot(root)
    with MessageStore.open(root) as s:
        cq = s.find_queue("RocksTopic", 1)
        assert (cq.min_offset, cq.max_offset) == (5, 33)
        assert s.get_message("RocksTopic", 1, 4, 32, broker=True).status == "OFFSET_TOO_SMALL"
        r = s.get_message("RocksTopic", 1, 5, 32, broker=True)
        assert r.status == "FOUND" and r.messages[0].queueOffset == 5
        lost = s.find_queue("Orders-Rocks", 3)
        assert (lost.min_offset, lost.max_offset) == (0, 33)
        assert any("Orders-Rocks/3" in w for w in s.warnings)
        # no `min` entry: RocketMQ's getMinCqOffset binary-searches for the first unit whose record is in
        # the commitlog, and its search steps over the hole at 10: the queue starts at 11 (with a warning)
        holed = s.find_queue("Orders-Rocks", 2)
        assert (holed.min_offset, len(holed.units(0, 22))) == (11, 11)
        assert s.get_message("Orders-Rocks", 2, 8, 32, broker=True).status == "OFFSET_TOO_SMALL"
        assert any("Orders-Rocks/2 has no unit at 10" in w for w in s.warnings)
        from engine.analysis.check import check_store
        report = check_store(s)
        assert [p["detail"] for p in report["problems"] if p["kind"] == "cq-time"] == \
            [f"RocksTopic/2 unit 3: storeTimestamp {s.find_queue('RocksTopic', 2).store_time(3)}, the record says "
             f"{s.find_queue('RocksTopic', 2).store_time(3) - 1}"]
    assert _snapshot(root) == before
    import json
    p = _cli("scan", str(root), "consistency", "--local", "--json")
    rows = json.loads(p.stdout)["rows"]
    assert any((r["topic"], r["queueId"], r["queueOffset"], r["problem"], r["file"], r["fileOffset"]) ==
               ("Orders-Rocks", 2, 10, "unit missing", "consumequeue", None) for r in rows), p.stdout[:500]


def test_without_the_binding_the_message_says_what_to_install():
    code = ("import sys; sys.modules['rocksdict'] = None\n"
            "from engine.cli.app import main\n"
            f"sys.exit(main(['info', {str(unpack(NAME))!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "rocksdict" in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_a_store_opened_before_its_files_learns_its_queues_are_in_rocksdb(tmp_path):
    """Opened read-only while still empty, then a 5.x broker with RocksDB consume queues writes
    its files: the refresh that finds the sizes reloads the store with the queue store the files
    call for (not the ConsumeQueue files chosen for the empty folder)."""
    import shutil
    src = unpack("v5_rocksdb_cq")
    root = tmp_path / "s"
    (root / "commitlog").mkdir(parents=True)
    with MessageStore.open(root) as store:
        assert store.queues == {}
        for p in src.iterdir():
            if p.name != "lock":
                (shutil.copytree(p, root / p.name, dirs_exist_ok=True) if p.is_dir() else shutil.copy2(p, root / p.name))
        assert store.refresh()
        assert store.info()["consumeQueueStore"]["storeType"] == "defaultRocksDB"
        assert store.cq_file_size == 0 and len(store.queues) == len(manifest("v5_rocksdb_cq")["consume_queues"])
        assert store.max_offset == 101635
        key = sorted(store.queues)[0]
        assert store.get_message(*key, 0, 2).status == "FOUND"
