"""The rules the CLI and the GUI share are written once in engine/format (topic.py, text.py):
both UIs answer the same for topics, times, previews, templates and tag expressions."""
from __future__ import annotations

import time

import pytest

from engine.cli import app as cli
from engine.errors import MessageRejectedError
from engine.format import text, topic
from engine.store.writer import validate_topic
from gui import body_format, send_logic, timefmt
from gui.models import filters as gui_filters
from engine.scan import filters as scan_filters


def test_one_definition_each():
    assert cli.parse_time is timefmt.parse_time is text.parse_time
    assert cli.preview is body_format.preview is text.preview
    assert send_logic.render_template is text.render_template
    assert send_logic.topic_problem is topic.topic_problem
    assert gui_filters.parse_tags_expression is scan_filters.parse_tags_expression is text.parse_tags_expression


@pytest.mark.parametrize("name,store_ok,producer_ok", [
    ("TopicTest", True, True), ("%RETRY%g", True, True), ("x" * 127, True, True), ("x" * 128, False, False),
    ("", False, False), ("a b", False, False), ("T\n", False, False),
    ("SCHEDULE_TOPIC_XXXX", True, False), ("TBW102", True, False), ("rmq_sys_x", True, False)])
def test_topic_rules(name, store_ok, producer_ok):
    assert (topic.topic_problem(name) is None) == store_ok
    assert (topic.topic_problem(name, producer=True) is None) == producer_ok
    if store_ok:
        assert validate_topic(name, False) is False
    else:
        with pytest.raises(MessageRejectedError):
            validate_topic(name, False)


def test_long_retry_topic_needs_v2():
    long_retry = "%RETRY%" + "g" * 200
    assert topic.topic_problem(long_retry) is not None
    assert validate_topic(long_retry, True) is True


def test_parse_time():
    assert text.parse_time(" 1795310726891 ") == 1795310726891
    assert text.parse_time("2026-11-22T01:25:26.891Z") == 1795310726891
    assert text.parse_time("2026-11-22T01:25:26.891", utc=True) == 1795310726891
    assert text.parse_time("2026-11-22T09:25:26.891+08:00") == 1795310726891
    with pytest.raises(ValueError, match="not a time"):
        text.parse_time("yesterday")


def test_parse_time_without_zone_uses_that_dates_local_offset(monkeypatch):
    """A naive time is local time of its own date (DST counts), not today's offset."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        summer = text.parse_time("2026-07-01T12:00:00")
        winter = text.parse_time("2026-01-01T12:00:00")
        assert summer == text.parse_time("2026-07-01T10:00:00Z")
        assert winter == text.parse_time("2026-01-01T11:00:00Z")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_preview_reads_a_prefix_and_escapes_controls():
    assert text.preview(b"hello") == "hello"
    assert text.preview(b"\x1b[31m" + b"red text " * 5).startswith("\u241b[31mred text")
    assert text.preview(b"\x00\x01\x02binary").startswith("hex: 00 01 02")
    assert text.preview(b"x" * 10_000).endswith(" …")


def test_templates():
    assert text.render_template(None, 3) is None
    assert text.render_template("m{i}/{n}/{count}@{ts}", 3, 5, now_ms=7) == "m3/4/5@7"
    assert len(text.render_template("{uuid}", 0)) == 36


def test_tag_expressions():
    assert text.parse_tags_expression(None) is None and text.parse_tags_expression(" * ") is None
    assert text.parse_tags_expression(" TagA ||TagB") == {"TagA", "TagB"}
    with pytest.raises(ValueError, match="names no tag"):
        text.parse_tags_expression("||")
    with pytest.raises(ValueError):
        scan_filters.MessageFilter.build(tags="||")


def test_cli_send_refuses_a_broker_only_topic(tmp_path, capsys):
    root = tmp_path / "s"
    assert cli.main(["init", str(root)]) == 0
    assert cli.main(["send", str(root), "SCHEDULE_TOPIC_XXXX", "--body", "x"]) != 0
    assert "forbidden" in capsys.readouterr().err
    assert cli.main(["send", str(root), "T", "--body", "m{i} of {count}", "--count", "2", "--queue", "0", "--json"]) == 0
    assert cli.main(["get", str(root), "T", "0", "0", "--count", "2"]) == 0
    out = capsys.readouterr().out
    assert "m0 of 2" in out and "m1 of 2" in out
