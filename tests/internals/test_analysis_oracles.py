"""engine.analysis (and the heat map's pixels, gui.internals.heatmap, no Qt) against what the real RocketMQ wrote: the manifests of the
small and default conformance stores, plus crafted index files with broken links and cycles."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, IndexFile
from engine.format.javahash import index_key_hash
from engine import analysis as A
from gui.internals import heatmap as H
from internals_helpers import chain_length_counts, commitlog_oracle, index_oracle

FIXTURES = ["small", "default"]


@pytest.fixture(scope="module", params=FIXTURES)
def opened(request):
    store = MessageStore.open(unpack(request.param))
    yield request.param, store, manifest(request.param)
    store.close()


def test_analysis_imports_no_qt():
    import subprocess
    import sys
    code = "import sys, engine.analysis, gui.internals.heatmap, gui.internals.colors; print(any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---- segment fill ---------------------------------------------------------------------------
def test_commitlog_fill_matches_manifest(opened):
    name, store, mf = opened
    fills = A.commitlog_fill(store)
    expected = commitlog_oracle(mf)
    assert [f.name for f in fills] == [e["name"] for e in expected]
    size = mf["config"]["mappedFileSizeCommitLog"]
    for f, e in zip(fills, expected):
        assert f.wrote_position == e["wrotePosition"]
        assert f.message_count == e["messages"]
        assert f.message_bytes == e["messageBytes"]
        assert f.blank_tail == e["blankTail"] and f.blank_at == e["blankAt"]
        assert f.fill == pytest.approx(e["messageBytes"] / size)
        assert f.topic_bytes() == e["topicBytes"]
        # the segments tile the whole file: messages, then the blank tail or unwritten space
        seg = f.segments
        assert seg.starts[0] == 0 and seg.ends[-1] == size and np.all(seg.starts[1:] == seg.ends[:-1])
        by = seg.bytes_by_id()
        assert by.get(A.BLANK, 0) == e["blankTail"]
        assert by.get(A.FREE, 0) == size - e["wrotePosition"]
        assert A.DAMAGED not in by
        # every record start is a manifest message, in order
        assert [f.file_from_offset + int(p) for p in f.record_starts] == [m["phyOffset"] for m in e["msgs"]]


def test_fast_walk_agrees_with_engine_walk(opened):
    name, store, mf = opened
    fills = A.commitlog_fill(store)
    mine = [(f.file_from_offset + int(p), int(z), f.topics[int(t)])
            for f in fills for p, z, t in zip(f.record_starts, f.record_sizes, f.record_topics)]
    engine = [(o, r.size, r.message.topic) for o, r in store.walk() if r.message is not None]
    assert mine == engine


@pytest.mark.parametrize("name", ["v5_lmq", "v5_timer", "v5_batchcq", "crashed_torn", "crashed_badcrc", "v5_crashed"])
def test_fill_agrees_with_engine_walk_on_the_odd_stores(name):
    """Records several queues point at (LMQ), timer and batch queues, torn and damaged tails:
    the queue units never name a record's topic wrongly, the records walked match the engine's."""
    with MessageStore.open(unpack(name)) as store:
        fills = A.commitlog_fill(store)
        mine = [(f.file_from_offset + int(p), int(z), f.topics[int(t)])
                for f in fills for p, z, t in zip(f.record_starts, f.record_sizes, f.record_topics) if t >= 0]
        engine = [(o, r.size, r.message.topic) for o, r in store.walk() if r.message is not None]
        assert mine == engine


def test_commitlog_fill_cache_walks_each_file_once(opened):
    name, store, mf = opened
    cache = A.CommitLogFillCache()
    a = A.commitlog_fill(store, cache)
    b = A.commitlog_fill(store, cache)
    assert len(cache) == len(store.commitlog.files)
    assert all(x is y for x, y in zip(a, b))


def test_queue_file_fill_matches_manifest(opened):
    name, store, mf = opened
    per_file = mf["config"]["consumeQueueUnitsPerFile"]
    got = {(q.topic, q.queue_id, q.name): q for q in A.queue_file_fill(store)}
    expected = {(q["topic"], q["queueId"], f["name"]): f["wrotePosition"] // 20
                for q in mf["consume_queues"] for f in q["files"]}
    assert set(got) == set(expected)
    for k, units in expected.items():
        q = got[k]
        assert q.units_per_file == per_file
        assert q.written_units == units == q.valid_units
        assert q.fill == pytest.approx(units / per_file)
        assert q.segments.bytes_by_id() == ({0: units} if units else {}) | (
            {A.FREE: per_file - units} if units < per_file else {})


def test_index_fill_matches_manifest(opened):
    name, store, mf = opened
    got = [A.index_fill(f) for f in store.index.files]
    assert [g.name for g in got] == [x["name"] for x in mf["index_files"]]
    for g, x in zip(got, mf["index_files"]):
        assert g.entries_used == len(x["entries"]) == x["header"]["indexCount"] - 1
        assert g.slots_used == len(x["nonEmptySlots"])
        assert g.hash_slot_count == x["header"]["hashSlotCount"]
        assert g.index_num == mf["config"]["maxIndexNum"] and g.slot_num == mf["config"]["maxHashSlotNum"]
        assert g.entry_fill == pytest.approx(len(x["entries"]) / mf["config"]["maxIndexNum"])
        assert g.slot_fill == pytest.approx(len(x["nonEmptySlots"]) / mf["config"]["maxHashSlotNum"])


# ---- segments sampling ------------------------------------------------------------------------
def test_sample_shows_data_smaller_than_a_pixel():
    seg = A.Segments.from_runs([(0, 100, 3), (100, 10**9, A.FREE)])
    s = seg.sample(0, 10**9, 1000)
    assert s[0] == 3 and np.all(s[1:] == A.FREE)
    seg = A.Segments.from_runs([(0, 10, 0), (10, 20, 1), (20, 40, A.BLANK)])
    assert seg.sample(0, 40, 4).tolist() == [0, 1, A.BLANK, A.BLANK]
    assert seg.sample(40, 80, 2).tolist() == [A.FREE, A.FREE]
    assert seg.at(15) == 1 and seg.at(45) == -1 and seg.used_extent() == 40


# ---- queue series ------------------------------------------------------------------------------
def test_queue_series_matches_manifest_units_and_store_times(opened):
    name, store, mf = opened
    times = {m["phyOffset"]: m["storeTimestamp"] for m in mf["messages"]}
    for q in mf["consume_queues"]:
        s = A.queue_series(store, q["topic"], q["queueId"])
        units = q["units"]
        assert s.queue_offsets.tolist() == [u[0] for u in units]
        assert s.phy_offsets.tolist() == [u[1] for u in units]
        assert s.sizes.tolist() == [u[2] for u in units]
        assert s.tags_codes.tolist() == [u[3] for u in units]
        assert s.store_times.tolist() == [times[u[1]] for u in units]


# ---- slot occupancy ------------------------------------------------------------------------------
def test_chain_lengths_match_the_manifest_walk(opened):
    name, store, mf = opened
    for f in store.index.files:
        o = index_oracle(mf, f.name)
        lengths = A.chain_lengths(f)
        expected = np.zeros(f.slot_num, dtype=np.int64)
        for slot, chain in o["chains"].items():
            expected[slot] = len(chain)
        assert np.array_equal(lengths, expected), f.name
        assert np.array_equal(lengths, A.chain_lengths_numpy(f))


def test_histogram_counts_and_poisson(opened):
    name, store, mf = opened
    for f in store.index.files[:3]:
        x = next(i for i in mf["index_files"] if i["name"] == f.name)
        entries = len(x["entries"])
        h = A.chain_histogram(A.chain_lengths(f), entries)
        counts = chain_length_counts(mf, f.name)
        assert {k: o for k, o, _ in h.rows() if o} == {k: v for k, v in counts.items() if v}
        assert h.observed.sum() == f.slot_num
        load = entries / f.slot_num
        assert h.load == pytest.approx(load)
        for k in range(min(len(h.expected), 6)):
            assert h.expected[k] == pytest.approx(f.slot_num * math.exp(-load) * load ** k / math.factorial(k))
        stats = A.slot_stats(A.chain_lengths(f), entries)
        assert stats.used_slots == len(x["nonEmptySlots"])
        assert stats.reachable == entries
        longest = max(counts)
        assert stats.longest[0][1] == longest


def test_heatmap_bins_against_brute_force(opened):
    name, store, mf = opened
    f = store.index.files[0]
    o = index_oracle(mf, f.name)
    lengths = A.chain_lengths(f)
    for w, h, how in [(8, 8, "max"), (5, 3, "max"), (7, 2, "mean"), (400, 300, "max"), (400, 300, "mean")]:
        hm = H.slot_heatmap(lengths, w, h, how)
        per = hm.slots_per_bin
        assert hm.bins == -(-f.slot_num // per) and hm.bins <= w * h
        flat = hm.image.ravel()
        assert np.all(np.isnan(flat[hm.bins:]))
        expected = np.zeros(hm.bins)
        sums = np.zeros(hm.bins)
        for slot, chain in o["chains"].items():   # only used slots: sparse brute force
            b = slot // per
            expected[b] = max(expected[b], len(chain))
            sums[b] += len(chain)
        if how == "mean":
            counts = np.full(hm.bins, per, dtype=float)
            counts[-1] = f.slot_num - per * (hm.bins - 1)
            expected = sums / counts
        assert np.allclose(flat[:hm.bins], expected), (w, h, how)
        # the slot range of a pixel and the longest chain in it
        r, c = divmod(hm.bins - 1, hm.image.shape[1])
        assert hm.slot_range(r, c)[0] == (hm.bins - 1) * per


def test_heat_indices_and_occupancy_pixels_against_brute_force(opened):
    """The pixels (gui.internals.heatmap, numpy): colour index round(v / top * 254), 255 past
    the last bin; occupancy counts non-zero slots per bin."""
    name, store, mf = opened
    f = store.index.files[0]
    used = {slot for slot, _ in next(x for x in mf["index_files"] if x["name"] == f.name)["nonEmptySlots"]}
    for w, h in ((1, 1), (10, 7), (400, 300)):
        occ = H.slot_occupancy(f, w, h)
        per = occ.slots_per_bin
        ref = np.zeros(occ.bins)
        for s in used:
            ref[s // per] += 1
        assert occ.image.ravel()[:occ.bins].tolist() == ref.tolist() and occ.top == per
        assert occ.nonzero_bins == np.count_nonzero(ref)
        idx = H.heat_indices(occ).ravel()
        expect = [min(254, int(v / per * 254 + 0.5)) for v in ref]
        assert idx[:occ.bins].tolist() == expect and set(idx[occ.bins:].tolist()) <= {H.NAN_INDEX}


# ---- collision chains ----------------------------------------------------------------------------
def _messages(mf):
    return {m["phyOffset"]: m for m in mf["messages"]}


def test_every_chain_resolves_to_its_members_and_keys(opened):
    name, store, mf = opened
    msgs = _messages(mf)
    for f in store.index.files[:4]:
        o = index_oracle(mf, f.name)
        for slot, chain in o["chains"].items():
            r = A.resolve_chain(f, slot=slot, get_message=store.commitlog.get_message)
            assert [e.step.index for e in r.entries] == chain
            assert r.stop == "end of chain" and not r.broken and r.cycle_to is None
            for e in r.entries:
                _, key_hash, phy, diff, prev = o["entries"][e.step.index]
                assert (e.step.keyHash, e.step.commitLogOffset, e.step.timeDiff, e.step.prevIndex) == (key_hash, phy, diff, prev)
                m = msgs[phy]
                cands = [m["uniqKey"]] * bool(m["uniqKey"]) + [k for k in (m["keys"] or "").split(" ") if k]
                keys = sorted({f"{m['topic']}#{k}" for k in cands if index_key_hash(f"{m['topic']}#{k}") == key_hash})
                assert sorted(e.keys) == keys and keys, (f.name, slot, e.step.index)
                assert e.topic == m["topic"]


def test_true_collisions_told_apart_from_slot_sharing(opened):
    """The crafted equal-hash families (Aa/BB, AaAa/BBBB/AaBB/BBAa, +h/-h, MIN/0) collide."""
    name, store, mf = opened
    for f in store.index.files:
        for slot in np.flatnonzero(A.chain_lengths(f)):
            r = A.resolve_chain(f, slot=int(slot), get_message=store.commitlog.get_message)
            by_hash: dict[int, set] = {}
            for e in r.entries:
                by_hash.setdefault(e.step.keyHash, set()).add(tuple(e.keys))
            for e in r.entries:
                group = by_hash[e.step.keyHash]
                if len(group) > 1:
                    assert e.kind == A.COLLISION
                elif sum(1 for x in r.entries if x.step.keyHash == e.step.keyHash) > 1:
                    assert e.kind == A.SAME_KEY
                else:
                    assert e.kind == A.SHARES_SLOT


def test_query_hits_are_what_rocketmq_returned():
    """default has one index file: the entries a query walk returns are exactly the offsets
    the real IndexService returned, in order; MATCH marks those that really have the key."""
    mf = manifest("default")
    with MessageStore.open(unpack("default")) as store:
        f = store.index.files[0]
        pairs = {(t, k): offs for t, k, _, offs in mf["key_queries"]["all_pairs"]}
        checked = 0
        for (topic, key), offs in sorted(pairs.items()):
            if len(offs) >= 64 or not key.isascii():
                continue
            r = A.resolve_chain(f, key=f"{topic}#{key}", get_message=store.commitlog.get_message)
            assert [e.step.commitLogOffset for e in r.hits] == offs, (topic, key)
            for e in r.hits:
                m = store.commitlog.get_message(e.step.commitLogOffset)
                really = m.topic == topic and (key in m.key_list or m.uniqKey == key)
                assert (e.kind == A.MATCH) == really
            checked += 1
        assert checked > 100
        r = A.resolve_chain(f, key="TopicTest#AaAa", get_message=store.commitlog.get_message)
        assert {e.kind for e in r.hits} == {A.MATCH, A.COLLISION}
        assert all(e.keys == ["TopicTest#AaAa"] for e in r.matches)


# ---- damaged index files -----------------------------------------------------------------------
def write_index(path: Path, slots: dict[int, int], entries: dict[int, tuple[int, int, int, int]],
                slot_num: int = 8, index_num: int = 32) -> IndexFile:
    """A hand-made index file: entries[n] = (keyHash, phyOffset, timeDiff, prevIndex)."""
    buf = np.zeros(40 + 4 * slot_num + 20 * index_num, dtype=np.uint8)
    h = np.zeros(1, INDEX_HEADER_DTYPE)
    h["beginTimestamp"], h["endTimestamp"] = 1795310747000, 1795310749000
    h["indexCount"] = max(entries) + 1
    h["hashSlotCount"] = len(slots)
    buf[:40] = h.view(np.uint8)
    st = np.zeros(slot_num, dtype=">i4")
    for s, n in slots.items():
        st[s] = n
    buf[40:40 + 4 * slot_num] = st.view(np.uint8)
    e = np.zeros(index_num, dtype=INDEX_ENTRY_DTYPE)
    for n, (kh, phy, diff, prev) in entries.items():
        e[n] = (kh, phy, diff, prev)
    buf[40 + 4 * slot_num:] = e.view(np.uint8)
    path.write_bytes(buf.tobytes())
    return IndexFile(path, slot_num, index_num)


def damaged_index(tmp_path: Path) -> IndexFile:
    return write_index(tmp_path / "20261122012547514",
                       slots={1: 5, 2: 6, 3: 7, 4: 30, 5: 9},
                       entries={1: (9, 100, 0, 0), 3: (1, 300, 0, 1), 5: (17, 500, 1, 3),   # slot 1: 5 -> 3 -> 1
                                2: (2, 200, 0, 6), 4: (10, 400, 0, 2), 6: (18, 600, 1, 4),   # slot 2: 6 -> 4 -> 2 -> 6
                                7: (3, 700, 1, 99),                                          # slot 3: 7 -> 99 (beyond)
                                8: (4, 800, 1, 0), 9: (5, 900, 1, 9)})                       # slot 5: 9 -> 9 (self)


def test_chain_lengths_on_broken_links_and_cycles(tmp_path):
    f = damaged_index(tmp_path)
    lengths = A.chain_lengths(f)
    assert lengths.tolist() == [0, 3, 3, 1, 0, 1, 0, 0]
    for s in range(8):
        assert lengths[s] == len(f.chain(s)), s
    assert np.array_equal(A.chain_lengths_numpy(f), lengths)
    assert sorted(A.chain_cycles(f)) == [[6, 4, 2], [9]]
    f.close()


def test_resolve_reports_how_a_damaged_chain_ends(tmp_path):
    f = damaged_index(tmp_path)
    r = A.resolve_chain(f, slot=2)
    assert [e.step.index for e in r.entries] == [6, 4, 2] and r.cycle_to == 6 and not r.broken
    r = A.resolve_chain(f, slot=3)
    assert [e.step.index for e in r.entries] == [7] and r.broken and "beyond indexCount" in r.stop
    r = A.resolve_chain(f, slot=4)
    assert r.entries == [] and r.broken and r.stop == "slot points to entry 30 beyond indexCount 10"
    r = A.resolve_chain(f, slot=0)
    assert r.entries == [] and r.stop == "empty slot" and not r.broken
    r = A.resolve_chain(f, slot=5)
    assert [e.step.index for e in r.entries] == [9] and r.cycle_to == 9
    assert all(e.kind == A.UNRESOLVED for e in A.resolve_chain(f, slot=1).entries)   # no messages to resolve
    f.close()
