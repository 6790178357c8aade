"""The GUI's Qt-free parts: block cache, body formatting, filters, times, send rules, rows."""
from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from gui import body_format as bf
from gui import send_logic as sl
from gui.models.block_cache import BlockCache
from engine.format.text import parse_tags_expression as parse_tag_expression
from gui.models.filters import MessageFilter, scan
from gui.models.queue_rows import read_rows
from gui.timefmt import format_ms, parse_time


@pytest.fixture(scope="module")
def small():
    with MessageStore.open(unpack("small")) as s:
        yield s


# ---- block cache ---------------------------------------------------------------------------
def test_block_cache_against_a_dict_oracle():
    rng = random.Random(4)
    cache = BlockCache(block_size=8, max_blocks=5)
    oracle: dict[int, int] = {}
    for _ in range(2000):
        b = rng.randrange(40)
        lo, hi = cache.block_range(b)
        start = max(lo, 3)
        rows = [q * 10 for q in range(start, hi)]
        cache.put(b, start, rows)
        for q in range(start, hi):
            oracle[q] = q * 10
        assert len(cache) <= 5
        q = rng.randrange(320)
        got = cache.get(q)
        if got is not None:
            assert got == oracle[q]
        if cache.has_block(cache.block_of(q)) and q >= 3:
            assert got == q * 10


def test_block_cache_evicts_least_recently_used_and_tracks_pending():
    cache = BlockCache(block_size=4, max_blocks=2)
    cache.put(0, 0, [0, 1, 2, 3])
    cache.put(1, 4, [4, 5, 6, 7])
    assert cache.get(1) == 1          # block 0 is now the most recent
    cache.put(2, 8, [8, 9])           # short block at the end of a range
    assert cache.blocks() == [0, 2]
    assert cache.get(5) is None and cache.get(9) == 9 and cache.get(10) is None
    assert cache.missing(0, 15) == [1, 3]
    cache.mark_pending(1)
    assert cache.missing(0, 15) == [3]
    cache.put(1, 4, [4, 5, 6, 7])
    assert not cache.is_pending(1)
    with pytest.raises(ValueError):
        cache.put(3, 11, [1, 2])      # starts before its block
    cache.clear()
    assert len(cache) == 0 and cache.missing(0, 3) == [0]


def test_block_cache_loaded_span():
    cache = BlockCache(block_size=10, max_blocks=10)
    assert cache.loaded_span() is None
    cache.put(3, 30, list(range(10)))
    cache.put(4, 40, list(range(5)))
    cache.put(8, 80, list(range(10)))
    cache.get(41)
    assert cache.loaded_span() == (30, 45)


# ---- body formatting -------------------------------------------------------------------------
@pytest.mark.parametrize("data", [b"", b"Hello RocketMQ #0", bytes(range(256)) * 3, b"\0" * 100 + b"x",
                                  b"A" * 16 * 5 + b"B" * 7, "鍵值 ✓ 🎉".encode()])
def test_hexdump_matches_hexdump_c(data, tmp_path):
    if shutil.which("hexdump") is None:
        pytest.skip("no hexdump(1) on this machine")
    f = tmp_path / "body.bin"
    f.write_bytes(data)
    expected = subprocess.run(["hexdump", "-C", str(f)], capture_output=True, text=True, check=True).stdout
    assert bf.hexdump_c(data) + ("\n" if data else "") == expected


def test_detect_and_render_modes():
    assert bf.detect(b'{"a": [1, 2]}') == bf.JSON
    assert bf.detect(b"plain text\nline two") == bf.UTF8
    assert bf.detect("中文内容，编码是GBK".encode("gbk")) == bf.GBK
    assert bf.detect(bytes(range(256))) == bf.HEX
    text, used, shown, trunc = bf.render(b'{"a":1,"b":"\xc3\xa9"}', bf.AUTO)
    assert used == bf.JSON and '"b": "é"' in text and not trunc
    text, used, _, _ = bf.render(b"{not json", bf.JSON)
    assert used == bf.UTF8 and text == "{not json"
    big = b"x" * (bf.TEXT_LIMIT + 10)
    text, used, shown, trunc = bf.render(big, bf.UTF8)
    assert trunc and shown == bf.TEXT_LIMIT and len(text) == bf.TEXT_LIMIT
    text, _, shown, trunc = bf.render(big, bf.UTF8, show_all=True)
    assert not trunc and len(text) == len(big)
    text, used, shown, trunc = bf.render(bytes(bf.HEX_LIMIT + 1), bf.HEX)
    assert trunc and text.endswith(f"{bf.HEX_LIMIT + 1:08x}")


def test_escape_sequences_and_bidi_are_shown_not_acted_on():
    raw = "\x1b[31mred\x1b[0m\x07 \u202eevil\r\nnext\ttab"
    out = bf.visible_text(raw)
    assert "\x1b" not in out and "\u241b[31m" in out and "\u2407" in out
    assert "\\u202e" in out and "\u202e" not in out
    assert "\n" in out and "\t" in out
    assert "\n" not in bf.visible_text("a\nb", one_line=True)


def test_preview_never_reads_past_its_prefix():
    body = b"A" * 10_000
    p = bf.preview(body)
    assert p.endswith("…") and len(p) < 100
    assert bf.preview(b"\x00\x01\x02binary").startswith("hex: 00 01 02")
    assert bf.preview(b"x", compressed=True).startswith("[compressed, 1 B]")
    # a multi-byte character cut by the prefix is not an error
    assert "…" in bf.preview("é".encode() * 200)


# ---- filters ------------------------------------------------------------------------------------
def test_tag_expressions():
    assert parse_tag_expression("") is None and parse_tag_expression(" * ") is None
    assert parse_tag_expression("TagA || TagB") == {"TagA", "TagB"}
    with pytest.raises(ValueError):
        parse_tag_expression("||")


def test_filter_scan_matches_a_brute_force_oracle(small):
    cq = small.queues[("TopicTest", 0)]
    msgs = small.get_message("TopicTest", 0, cq.min_offset, max_count=cq.max_offset).messages
    cases = [MessageFilter(tags="TagA || TagB"), MessageFilter(key="order-dup-001"),
             MessageFilter(prop="region=eu-west"), MessageFilter(prop="region"),
             MessageFilter(body="rocketmq"), MessageFilter(tags="TagA", body="hello")]
    for flt in cases:
        pred = flt.predicate()
        expected = [m.queueOffset for m in msgs if pred(m)]
        gen = scan(small, "TopicTest", 0, cq.min_offset, cq.max_offset, flt, step=50)
        steps = []
        try:
            while True:
                steps.append(next(gen))
        except StopIteration as stop:
            matches, end = stop.value
        assert [r.queueOffset for r in matches] == expected, flt
        assert end == cq.max_offset and steps[-1] == (cq.max_offset, cq.max_offset)
    assert expected  # the last case is not vacuous
    with pytest.raises(ValueError):
        MessageFilter(prop="=x").predicate()
    with pytest.raises(ValueError):
        MessageFilter(body="hex:zz").predicate()


# ---- rows ------------------------------------------------------------------------------------------
def test_rows_equal_what_the_engine_returns(small):
    cq = small.queues[("Orders_v2-EU", 1)]
    rows = read_rows(small, "Orders_v2-EU", 1, cq.min_offset - 5, cq.max_offset + 5)
    res = small.get_message("Orders_v2-EU", 1, cq.min_offset, max_count=cq.max_offset)
    assert len(rows) == cq.max_offset - cq.min_offset == len(res.messages)
    for r, m in zip(rows, res.messages):
        assert (r.queueOffset, r.commitLogOffset, r.size, r.storeTimestamp, r.msgId) == \
               (m.queueOffset, m.commitLogOffset, m.storeSize, m.storeTimestamp, m.msgId)
        assert r.tags == (m.tags or "") and r.keys == (m.keys or "") and r.uniqKey == (m.uniqKey or "")
        assert r.bodyLength == len(m.body)


# ---- time ------------------------------------------------------------------------------------------
def test_times_are_iso_with_milliseconds_and_zone():
    assert format_ms(1795310726891, utc=True) == "2026-11-22T01:25:26.891+00:00"
    assert format_ms(-1) == "—"
    local = format_ms(1795310726891)
    assert local[23] in "+-" and ".891" in local
    assert parse_time("2026-11-22T01:25:26.891Z") == 1795310726891
    assert parse_time("2026-11-22T01:25:26.891", utc=True) == 1795310726891
    assert parse_time("1795310726891") == 1795310726891


# ---- send rules ----------------------------------------------------------------------------------
@pytest.mark.parametrize("topic,ok", [("TopicTest", True), ("Audit|log", True), ("%RETRY%g", True),
                                      ("", False), ("has space", False), ("中文", False), ("x" * 127, True),
                                      ("x" * 128, False), ("SCHEDULE_TOPIC_XXXX", False), ("TBW102", False),
                                      ("RMQ_SYS_TRANS_HALF_TOPIC", False)])
def test_topic_rules(topic, ok):
    assert (sl.topic_problem(topic, producer=True) is None) == ok


def test_send_plan_properties_templates_and_bodies(tmp_path):
    assert sl.parse_properties("a=1\n# c\n\nb = x=y") == {"a": "1", "b": " x=y"}
    with pytest.raises(ValueError, match="used by system"):
        sl.parse_properties("KEYS=x")
    with pytest.raises(ValueError):
        sl.parse_properties("novalue")
    plan = sl.SendPlan("TopicTest", sl.BODY_JSON, '{"n": {n}, "of": {count}}', count=3, keys="k-{i}",
                       properties={"p": "v{n}"})
    plan.check()
    m = plan.message(2)
    assert m["body"] == b'{"n": 3, "of": 3}' and m["keys"] == "k-2" and m["properties"] == {"p": "v3"}
    with pytest.raises(ValueError, match="JSON"):
        sl.SendPlan("TopicTest", sl.BODY_JSON, "{oops").check()
    assert sl.body_from(sl.BODY_HEX, "0a 1b\nff") == b"\x0a\x1b\xff"
    f = tmp_path / "b.bin"
    f.write_bytes(b"\x00\x01")
    assert sl.SendPlan("T", sl.BODY_FILE, str(f)).message(0)["body"] == b"\x00\x01"


def test_manifest_is_there():
    assert manifest("small")["key_queries"]["cases"]
