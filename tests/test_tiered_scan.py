"""`rmqstore scan` over tiered storage: a tier folder on its own and a store with its tier
(tieredStoreFilePath), against the tiered_store manifest (what TieredMessageStore returned):
every message once, with the tier's per-queue commit-log offsets where the tier holds it."""
from __future__ import annotations

import json
from collections import Counter

from conftest import manifest, unpack
from engine.cli.app import main
from engine.scan.planning import plan_commitlog
from engine.store.tiered import TieredStore
from test_tiered import tree_hash


def scan(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["scan", *argv, "--local"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def per_queue(rows) -> dict:
    return {(r["topic"], r["queueId"]): (r["messages"], r["bytes"], r["firstStoreTimestamp"], r["lastStoreTimestamp"])
            for r in rows}


def expected_per_queue() -> dict:
    want: dict = {}
    for e in manifest("tiered_store")["messages"]:
        n, b, first, last = want.get((e["topic"], e["queueId"]), (0, 0, 1 << 62, 0))
        want[(e["topic"], e["queueId"])] = (n + 1, b + e["storeSize"], min(first, e["storeTimestamp"]),
                                            max(last, e["storeTimestamp"]))
    return want


def exported(capsys, tmp_path, store, *options) -> dict:
    out = tmp_path / "rows.jsonl"
    rc, _, err = scan(capsys, store, "export", "--out", str(out), "--format", "jsonl", "--overwrite", *options)
    assert rc == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    keyed = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
    assert len(keyed) == len(rows)     # each message once
    return keyed


def test_scan_of_a_tier_folder_counts_as_its_manifest(capsys, tmp_path):
    root = unpack("tiered_store") / "tiered"
    before = tree_hash(root)
    for split in ([], ["--split-bytes", "1500"]):   # whole segments, then cut at CQ-named record starts
        rc, out, err = scan(capsys, str(root), "topic-stats", "--by-queue", "--json", *split)
        assert rc == 0, err
        assert per_queue(json.loads(out)["rows"]) == expected_per_queue()
    rows = exported(capsys, tmp_path, str(root))
    want = {(e["topic"], e["queueId"], e["queueOffset"]): e for e in manifest("tiered_store")["messages"]}
    assert rows.keys() == want.keys()
    for k, e in want.items():   # offsets as the tier holds them: per queue, PHYSICALOFFSET rewritten
        assert (rows[k]["commitLogOffset"], rows[k]["uniqKey"], rows[k]["bodyCRC"], rows[k]["storeSize"]) == (
            e["commitLogOffset"], e["uniqKey"], e["bodyCRC"], e["storeSize"]), k
    rc, out, err = scan(capsys, str(root), "top-tags", "--json")
    assert rc == 0 and {(r["topic"], r["tags"]): r["messages"] for r in json.loads(out)["rows"]} == dict(
        Counter((e["topic"], e["tags"]) for e in want.values()))
    assert tree_hash(root) == before


def test_the_plan_cuts_segments_at_record_starts():
    with TieredStore.open(unpack("tiered_store") / "tiered") as t:
        whole = plan_commitlog(t)
        cut = plan_commitlog(t, split_bytes=1500)
        segments = [s for q in t.queues.values() for s in q.commitlog.segments]
        assert len(whole.commitlog) == len(segments)
        assert len(cut.commitlog) > len(segments)
        starts = {(str(s.path), u[0] - s.base) for q in t.queues.values() for u in
                  q.units(q.min_offset, q.max_offset).tolist() for s in q.commitlog.segments if s.base <= u[0] < s.end}
        assert all((s.path, s.start) in starts for s in cut.commitlog)


def test_scan_of_a_store_with_its_tier_reads_each_message_once(capsys, tmp_path, fixture_copy):
    root = fixture_copy("tiered_store")
    tier = root / "tiered"
    with_tier = [str(root / "store"), "--set", f"tieredStoreFilePath={tier}"]
    # the local store still holds every message: the tier adds none of them again
    rc, out, err = scan(capsys, *with_tier[:1], "topic-stats", "--by-queue", "--json", *with_tier[1:])
    assert rc == 0, err
    assert per_queue(json.loads(out)["rows"]) == expected_per_queue()
    m = manifest("tiered_store")
    local = {(p["topic"], p["queueId"], p["queueOffset"]): p["localCommitLogOffset"] for p in m["puts"]}
    rows = exported(capsys, tmp_path, *with_tier)
    assert {k: r["commitLogOffset"] for k, r in rows.items()} == local
    # retention deleted the local commitlog: every message now comes from the tier
    (root / "store" / "commitlog" / "00000000000000000000").unlink()
    before = tree_hash(tier)
    rc, out, err = scan(capsys, *with_tier[:1], "topic-stats", "--by-queue", "--json", *with_tier[1:])
    assert rc == 0, err
    assert per_queue(json.loads(out)["rows"]) == expected_per_queue()
    rows = exported(capsys, tmp_path, *with_tier)
    assert {k: r["commitLogOffset"] for k, r in rows.items()} == {
        (e["topic"], e["queueId"], e["queueOffset"]): e["commitLogOffset"] for e in m["messages"]}
    rc, out, _ = scan(capsys, str(root / "store"), "topic-stats", "--json")   # without the tier: nothing
    assert rc == 0 and json.loads(out)["rows"] == []
    assert tree_hash(tier) == before


def test_scan_jobs_a_tier_does_not_answer_are_refused_in_one_line(capsys):
    root = str(unpack("tiered_store") / "tiered")
    for argv, word in (([root, "consistency"], "rmqstore check TIER"),
                       ([root, "filter", "--topic", "TopicA", "--via-consume-queue"], "--via-consume-queue"),
                       ([root, "topic-stats", "--set", "brokerName=nobody"], "holds no broker nobody")):
        rc, out, err = scan(capsys, *argv)
        assert rc == 2 and word in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_the_scan_tab_scans_a_tier(qtbot):
    """The GUI's Scan tab over a tier folder opened in the browser: the same plan, the same rows."""
    from PySide6.QtCore import Qt
    from gui.scan_panel import ScanPanel
    from gui.session import StoreSession
    session = StoreSession()
    with qtbot.waitSignal(session.opened, timeout=30_000):   # the session's opener (open_blocking is classic only)
        session.open(unpack("tiered_store") / "tiered")
    p = ScanPanel(session)
    qtbot.addWidget(p)
    p.show()
    try:
        p.engine_box.setCurrentIndex(p.engine_box.findData("local"))
        p.job_box.setCurrentText("topic-stats")
        with qtbot.waitSignal(p.finished, timeout=60_000):
            qtbot.mouseClick(p.run_button, Qt.LeftButton)
        per_topic: dict = {}
        for (t, _q), (n, b, _f, _l) in expected_per_queue().items():
            per_topic[t] = (per_topic.get(t, (0, 0))[0] + n, per_topic.get(t, (0, 0))[1] + b)
        assert {r["topic"]: (r["messages"], r["bytes"]) for r in p.model.rows} == per_topic
    finally:
        p.cancel()
        session.close()


def test_a_store_whose_retention_deleted_its_first_files_takes_the_rest_from_the_tier(tmp_path, capsys):
    """The local store holds the same queues (written here in the broker's put order, small
    commitlog files) and retention deleted its first two files: the scan reads the local records
    that remain and, from the tier, exactly the queue offsets below each queue's first local one."""
    from engine import MessageStore, StoreConfig
    m = manifest("tiered_store")
    body = {(e["topic"], e["queueId"], e["queueOffset"]): e["body"] for e in m["messages"]}
    local = tmp_path / "store"
    w = MessageStore.create(local, StoreConfig(mappedFileSizeCommitLog=32768, mappedFileSizeConsumeQueue=6000))
    try:
        for p in m["puts"]:
            r = w.put_message(p["topic"], body[(p["topic"], p["queueId"], p["queueOffset"])].encode(),
                              queue_id=p["queueId"], keys="k")
            assert r.queueOffset == p["queueOffset"]
    finally:
        w.close()
    files = sorted((local / "commitlog").iterdir())
    assert len(files) >= 4
    for f in files[:2]:
        f.unlink()
    local_min = int(files[2].name)
    rows = exported(capsys, tmp_path, str(local), "--set", f"tieredStoreFilePath={unpack('tiered_store') / 'tiered'}")
    tier_off = {(e["topic"], e["queueId"], e["queueOffset"]): e["commitLogOffset"] for e in m["messages"]}
    assert rows.keys() == tier_off.keys()                     # every message once
    from_tier = {k for k, r in rows.items() if r["keys"] != "k"}   # the tier's copies carry the real keys
    assert 0 < len(from_tier) < len(rows)
    for (t, q), (n, _b, _f, _l) in expected_per_queue().items():
        offs = sorted(o for tt, qq, o in from_tier if (tt, qq) == (t, q))
        assert offs == list(range(len(offs))), (t, q)           # a prefix of each queue
        local_offs = [rows[(t, q, o)]["commitLogOffset"] for o in range(len(offs), n)]
        assert all(o >= local_min for o in local_offs)
    assert all(rows[k]["commitLogOffset"] == tier_off[k] for k in from_tier)
