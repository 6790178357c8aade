"""The search panel on the small fixture: key search (exact and RocketMQ's raw hash match
with its false hits marked) against the manifest, msgId, time -> queue offset, export."""
from __future__ import annotations

import csv
import json

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from conftest import manifest, unpack
from guitest_support import dialogs, open_and_wait, screenshot, settings, window  # noqa: F401


def _case(label_start, topic, key):
    return next(c for c in manifest("small")["key_queries"]["cases"]
                if c["label"].startswith(label_start) and c["topic"] == topic and c["key"] == key)


def _search(qtbot, panel, topic, key, raw=False, cap=64):
    panel.window().tabs.setCurrentWidget(panel)
    panel.k_topic.setCurrentText(topic)
    panel.k_key.setText(key)
    panel.k_raw.setChecked(raw)
    panel.k_cap.setValue(cap)
    with qtbot.waitSignal(panel.results.modelReset, timeout=3000, raising=False) as blocker:
        qtbot.mouseClick(panel.k_search, Qt.LeftButton)
    assert blocker.signal_triggered, panel.summary.text()
    return [h.message.commitLogOffset for h in panel.results.hits]


def test_key_search_finds_the_manifest_messages(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    p = window.search
    window.tabs.setCurrentWidget(p)
    case = _case("dup key, full range, maxNum 64", "TopicTest", "order-dup-001")
    got = _search(qtbot, p, "TopicTest", "order-dup-001")
    assert sorted(got) == sorted(case["queryMessage_phyOffsets"])
    assert "TRUNCATED" in p.summary.text() and p.last_outcome.truncated
    # a larger cap shows every message carrying the key, newest first
    got_all = _search(qtbot, p, "TopicTest", "order-dup-001", cap=0)
    every = store.query_message("TopicTest", "order-dup-001", max_num=0).offsets
    assert got_all == every and len(every) > 64 and "TRUNCATED" not in p.summary.text()
    times = [h.message.storeTimestamp for h in p.results.hits]
    assert times == sorted(times, reverse=True)
    assert all("order-dup-001" in h.message.key_list for h in p.results.hits)
    # the selected result opens in the detail pane
    assert p.detail.message is not None and p.detail.message.commitLogOffset == got_all[0]


def test_raw_hash_match_marks_false_hits(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    p = window.search
    window.tabs.setCurrentWidget(p)
    case = _case("equal String.hashCode family", "TopicTest", "Aa")
    raw = _search(qtbot, p, "TopicTest", "Aa", raw=True)
    assert raw == case["queryMessage_phyOffsets"]         # RocketMQ's own answer, in queryMessage's order
    hits = p.results.hits
    false = [h for h in hits if h.false_hit]
    assert false and all("Aa" not in h.message.key_list for h in false)
    assert all("Aa" in h.message.key_list or h.message.uniqKey == "Aa" for h in hits if not h.false_hit)
    assert p.results.data(p.results.index(hits.index(false[0]), 1)) == "FALSE HIT (hash only)"
    assert "false hit" in p.summary.text()
    p.table.selectRow(hits.index(false[0]))
    window.resize(1440, 900)
    screenshot(window, "browser-search.png")
    # exact (default): only the messages that carry the key; collisions are said, not shown
    exact = _search(qtbot, p, "TopicTest", "Aa")
    assert set(exact) == {h.message.commitLogOffset for h in hits if not h.false_hit}
    assert "collision" in p.summary.text()


def test_time_range_narrows_the_key_search(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    p = window.search
    case = _case("window first half", "TopicTest", "order-dup-001")
    p.k_any_time.setChecked(False)
    p.k_begin.set_ms(case["begin"])
    p.k_end.set_ms(case["end"])
    got = _search(qtbot, p, "TopicTest", "order-dup-001", cap=0)
    expected = store.query_message("TopicTest", "order-dup-001", case["begin"], case["end"], max_num=0).offsets
    assert got == expected and got
    assert all(case["begin"] <= h.message.storeTimestamp <= case["end"] for h in p.results.hits)


def test_msgid_box_tells_which_kind(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    p = window.search
    window.tabs.setCurrentWidget(p)
    p.modes.setCurrentIndex(1)
    m = store.commitlog.get_message(0)

    def look(text):
        p.i_text.setText(text)
        with qtbot.waitSignal(p.results.modelReset, timeout=10000):
            qtbot.mouseClick(p.i_find, Qt.LeftButton)
        return p.last_outcome

    out = look(m.msgId)
    assert out.kind == "offset" and [x.commitLogOffset for x in out.messages] == [0]
    assert p.i_result.text().startswith("offset msgId") and "commitlog offset 0" in p.i_result.text()
    out = look(m.uniqKey.lower())
    assert out.kind == "uniq" and out.messages[0].uniqKey == m.uniqKey
    assert "UNIQ_KEY" in p.i_result.text()
    out = look("0A00000500002A9F00000000DEADBEEF")
    assert out.kind == "unknown" and "no message found" in p.i_result.text()
    p.i_text.setText(m.msgId)
    qtbot.mouseClick(p.i_decode, Qt.LeftButton)
    assert "store host 10.0.0.5:10911, commitlog offset 0" in p.i_result.text()


def test_time_to_queue_offset_and_open_in_browser(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    p = window.search
    window.tabs.setCurrentWidget(p)
    p.modes.setCurrentIndex(2)
    p.t_topic.setCurrentText("TopicTest")
    p.t_queue.setCurrentIndex(p.t_queue.findData(2))
    case = next(c for c in manifest("small")["time_lookups"]["cases"] if (c["topic"], c["queueId"]) == ("TopicTest", 2))
    p.t_time.set_ms(case["storeTimeAtMid"])
    with qtbot.waitSignal(p.lane.runner.idle, timeout=10000):
        qtbot.mouseClick(p.t_find, Qt.LeftButton)
    expected = store.get_offset_in_queue_by_time("TopicTest", 2, case["storeTimeAtMid"], boundary=None)
    assert p.last_time_result["offset"] == expected  # the default: small is a 4.x store, the 4.9 rule
    assert f"queue offset {expected}" in p.t_result.text()
    assert "rule 4.9 (the store's generation)" in p.t_result.text()
    qtbot.mouseClick(p.t_open, Qt.LeftButton)
    b = window.browser
    assert window.tabs.currentWidget() is b and (b.model.topic, b.model.queue_id) == ("TopicTest", 2)
    assert b.model.offset_of_row(b.table.currentIndex().row()) == expected


def test_export_csv_and_jsonl(qtbot, window, tmp_path, monkeypatch):
    open_and_wait(qtbot, window, unpack("small"))
    p = window.search
    got = _search(qtbot, p, "TopicTest", "AaAa", raw=True)
    out = {"csv": tmp_path / "r.csv", "jsonl": tmp_path / "r.jsonl"}
    for kind, button in (("csv", p.export_csv), ("jsonl", p.export_jsonl)):
        monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, k=kind, **kw: (str(out[k]), "")))
        qtbot.mouseClick(button, Qt.LeftButton)
    rows = list(csv.DictReader(out["csv"].open(encoding="utf-8")))
    assert [int(r["commitLogOffset"]) for r in rows] == got
    assert {r["match"] for r in rows} <= {"exact", "FALSE HIT (hash only)"}
    lines = [json.loads(x) for x in out["jsonl"].read_text(encoding="utf-8").splitlines()]
    assert [x["commitLogOffset"] for x in lines] == got and all("body" in x and "falseHit" in x for x in lines)
