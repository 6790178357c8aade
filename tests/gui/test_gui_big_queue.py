"""A queue of 1,000,000 messages: exact row count, first page painted quickly, only the
visible blocks read. The queue is made by tiling real CQ units of the `default` fixture into
a new ConsumeQueue (four 6 MB files), so every row points at a real record."""
from __future__ import annotations

import json
import time


from conftest import ROOT
from gui.models import message_table as mt
from guitest_support import dialogs, open_and_wait, settings, tile_queue, wait_idle, window  # noqa: F401

N = 1_000_000


def make_big_queue(root):
    return tile_queue(root, "BigQueue", N)


def test_million_row_queue(qtbot, window, fixture_copy):
    root = fixture_copy("default")
    tiled = make_big_queue(root)
    t0 = time.perf_counter()
    store = open_and_wait(qtbot, window, root)
    t_open = time.perf_counter()
    window.show_queue("BigQueue", 0, None)
    table = window.browser.table
    table.viewport().grab()  # paints the first page now
    t_paint = time.perf_counter()
    model = window.browser.model
    assert model.rowCount() == N == store.queues[("BigQueue", 0)].max_offset
    assert model.is_loaded(0) and len(model.cache) <= 2  # only the first page was read

    def check(row):
        phy, size = int(tiled[row]["commitLogOffset"]), int(tiled[row]["size"])
        m = store.commitlog.get_message(phy, size)
        assert model.data(model.index(row, mt.COL_QOFF)) == str(row)
        assert model.data(model.index(row, mt.COL_PHY)) == str(phy)
        assert model.data(model.index(row, mt.COL_MSGID)) == m.msgId

    check(0)
    for target in (N // 2 + 17, N - 1):
        t1 = time.perf_counter()
        window.browser.go_to_offset(target)
        table.viewport().grab()
        qtbot.waitUntil(lambda: model.is_loaded(target), timeout=5000)
        table.viewport().grab()
        jump_ms = (time.perf_counter() - t1) * 1000
        check(target)
        assert jump_ms < 3000
    wait_idle(qtbot, window)
    assert len(model.cache) <= model.cache.max_blocks
    timing = {"rows": N, "open_ms": round((t_open - t0) * 1000, 1),
              "open_to_first_painted_page_ms": round((t_paint - t0) * 1000, 1),
              "last_jump_ms": round(jump_ms, 1)}
    out = ROOT / "build" / "gui-timing.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(timing, indent=2))
    print(timing)
    assert timing["open_to_first_painted_page_ms"] < 5000
