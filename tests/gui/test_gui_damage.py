"""The browser shows damage as damage: a CQ unit pointing at nothing is a marked row with its
offset, the rows around it stay readable, and the table model does not fail."""
from __future__ import annotations

from engine import MessageStore
from gui.models.queue_rows import OK, read_rows


def test_damaged_units_are_marked_rows_and_the_rest_stays_usable(fixture_copy):
    root = fixture_copy("small")
    cq = root / "consumequeue" / "TopicTest" / "0" / "00000000000000000000"
    data = bytearray(cq.read_bytes())
    data[3 * 20:3 * 20 + 8] = (123457).to_bytes(8, "big")   # unit 3 -> the middle of some record
    data[4 * 20:4 * 20 + 8] = (10 ** 9).to_bytes(8, "big")  # unit 4 -> far past the commitlog end
    cq.write_bytes(bytes(data))
    with MessageStore.open(root) as store:
        rows = read_rows(store, "TopicTest", 0, 0, 8)
    assert [r.queueOffset for r in rows] == list(range(8))
    bad = {r.queueOffset: r for r in rows if not r.ok}
    assert set(bad) == {3, 4}
    assert bad[3].commitLogOffset == 123457 and "no valid record" in bad[3].preview
    assert bad[4].commitLogOffset == 10 ** 9
    assert all(r.status == OK and r.msgId for r in rows if r.queueOffset not in bad)
