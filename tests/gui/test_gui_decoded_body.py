"""The detail pane's Decoded view: hand-encoded Protobuf, MessagePack and LZ4-compressed CBOR
bodies sent with the engine, opened in the browser, shown as a tree; the format chooser; a
topic's Protobuf schema kept per store and giving field names. Screenshot
build/screenshots/decoded-body.png (run it under Xvfb with QT_QPA_PLATFORM=xcb for the real
rendering)."""
from __future__ import annotations

import lz4.frame
from PySide6.QtWidgets import QTreeWidgetItemIterator

from engine import MessageStore
from gui import body_format as bf
from gui.views.decoded_view import SchemaDialog
from guitest_support import dialogs, open_and_wait, screenshot, settings, window  # noqa: F401
from test_body_decode import cbor_body, descriptor_set, msgpack_body, order_pb, pb_len, pb_varint


def _select(qtbot, window, topic, qid, offset):
    item = window.tree_model.find_queue_item(topic, qid)
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(item))
    window.tabs.setCurrentWidget(window.browser)
    window.browser.go_to_offset(offset)
    d = window.browser.detail
    qtbot.waitUntil(lambda: d.message is not None and d.message.topic == topic and d.message.queueOffset == offset,
                    timeout=5000)
    return d


def _rows(tree) -> list[tuple[str, str, str]]:
    out = []
    it = QTreeWidgetItemIterator(tree)
    while it.value():
        i = it.value()
        depth, p = 0, i.parent()
        while p is not None:
            depth, p = depth + 1, p.parent()
        out.append(("  " * depth + i.text(0), i.text(1), i.text(2)))
        it += 1
    return out


def _store(tmp_path):
    root = tmp_path / "store"
    order = order_pb() + pb_len(5, pb_len(1, b"sku-8") + pb_varint(2, 250)) + pb_varint(6, 1732800000000)
    with MessageStore.create(root) as s:
        s.put_message("Orders", order, queue_id=0, tags="pb")
        s.put_message("Orders", msgpack_body(), queue_id=0, tags="mp")
        s.put_message("Orders", lz4.frame.compress(cbor_body()), queue_id=0, tags="cbor", sys_flag=1 | 1 << 8)
        s.put_message("Orders", b"plain text body", queue_id=0)
    return root


def test_decoded_view_shows_a_protobuf_tree_and_the_chooser_overrides(qtbot, window, tmp_path):
    open_and_wait(qtbot, window, _store(tmp_path))
    d = _select(qtbot, window, "Orders", 0, 0)
    body = d.body
    # Auto: a binary body that decodes confidently goes to the Decoded view
    assert body.mode_used == bf.DECODED and body.stack.currentWidget() is body.decoded_view
    view = body.decoded_view
    assert view.info.text().startswith("Protobuf (confidence 0.90")
    rows = _rows(view.tree)
    assert ("1", "A-1", "string") in rows and ("2", "3", "int") in rows and ("4", "gift", "string") in rows
    assert ("3", "2 fields", "message") in rows and ("  1", "sku-7", "string") in rows
    assert ("  2", "1999", "int") in rows and ("6", "1732800000000", "int") in rows
    window.resize(1500, 860)
    d.split.setSizes([420, 1040])
    screenshot(window, "decoded-body.png")
    # the chooser: read the same bytes as hex, then back to detected
    view.format.setCurrentIndex(view.format.findData(bf.bd.HEX))
    assert _rows(view.tree)[0][2] == f"bytes[{len(d.message.body)}]"
    view.format.setCurrentIndex(view.format.findData(None))
    assert view.decoded.format == "protobuf"
    # the text modes are still there
    body.set_mode(bf.HEX)
    assert body.stack.currentWidget() is body.text and body.text.toPlainText().startswith("00000000  0a 03 41 2d 31")
    body.set_mode(bf.AUTO)


def test_msgpack_and_compressed_cbor_and_text(qtbot, window, tmp_path):
    open_and_wait(qtbot, window, _store(tmp_path))
    d = _select(qtbot, window, "Orders", 0, 1)
    rows = _rows(d.body.decoded_view.tree)
    assert d.body.decoded_view.decoded.format == "msgpack"
    assert ("qty", "300", "int") in rows and ("tags", "2 members", "array") in rows and ("  [1]", "y", "string") in rows
    d = _select(qtbot, window, "Orders", 0, 2)
    assert d.body.mode_used == bf.DECODED
    assert "decompressed from lz4" in d.body.decoded_view.info.text()
    assert ("delta", "-5", "int") in _rows(d.body.decoded_view.tree)
    d = _select(qtbot, window, "Orders", 0, 3)
    assert d.body.mode_used == bf.UTF8 and d.body.text.toPlainText() == "plain text body"
    d.body.set_mode(bf.DECODED)   # text in the Decoded view: one leaf
    assert _rows(d.body.decoded_view.tree) == [("(body)", "plain text body", "string")]
    d.body.set_mode(bf.AUTO)


def test_a_topic_schema_gives_field_names_and_is_kept_per_store(qtbot, window, settings, tmp_path, monkeypatch):
    root = _store(tmp_path)
    open_and_wait(qtbot, window, root)
    desc = descriptor_set(tmp_path)
    assert "shop.Order" in bf.proto_types(str(desc)) and "shop.Item" in bf.proto_types(str(desc))
    d = _select(qtbot, window, "Orders", 0, 0)
    view = d.body.decoded_view
    assert view.decoded.confidence < 1.0

    def fill_and_accept(dlg):   # the Schema… dialog, filled in as a user would
        assert dlg.windowTitle() == "Body schema for Orders"
        dlg.desc.setText(str(desc))
        dlg._types()
        assert dlg.type.findText("shop.Order") >= 0
        dlg.type.setCurrentText("shop.Order")
        dlg.accept()
        return dlg.result()
    monkeypatch.setattr(SchemaDialog, "exec", fill_and_accept)
    view.schema_button.click()
    assert bf.load_schema(settings, window.session.store.root, "Orders")["protoType"] == "shop.Order"
    assert view.decoded.format == "protobuf" and view.decoded.confidence == 1.0
    rows = _rows(view.tree)
    assert ("id", "A-1", "string") in rows and ("item", "2 fields", "message") in rows
    assert ("  sku", "sku-7", "string") in rows and ("  price_cents", "1999", "string") in rows
    # fields the schema does not name stay, by number
    assert ("$unknown", "2 fields", "message") in rows and ("  6", "1732800000000", "int") in rows
    # a body the schema does not fit still decodes, and says the schema did not
    d = _select(qtbot, window, "Orders", 0, 1)
    assert d.body.decoded_view.decoded.format == "msgpack" and "protobuf schema" in d.body.decoded_view.info.text()
    # another store: no schema
    assert bf.load_schema(settings, tmp_path / "other", "Orders") == {}
    # a broken schema file is said, not raised
    (tmp_path / "broken.desc").write_bytes(b"\xff\xff")
    bf.save_schema(settings, window.session.store.root, "Orders",
                   {"protoDesc": str(tmp_path / "broken.desc"), "protoType": "shop.Order"})
    d = _select(qtbot, window, "Orders", 0, 0)
    d.body._render()
    assert "schema not used" in d.body.decoded_view.info.text()
    assert d.body.decoded_view.decoded.format == "protobuf" and d.body.decoded_view.decoded.confidence < 1.0


def test_scan_panel_searches_the_decoded_body(qtbot, tmp_path):
    """The Scan tab's "Search the decoded body": a regex only the decoded MessagePack text holds."""
    from PySide6.QtCore import Qt

    from gui.scan_panel import ScanPanel
    from gui.session import StoreSession
    session = StoreSession()
    session.open_blocking(_store(tmp_path))
    p = ScanPanel(session)
    qtbot.addWidget(p)
    p.show()
    try:
        p.engine_box.setCurrentIndex(p.engine_box.findData("local"))
        p.job_box.setCurrentText("filter")
        p.body_edit.setText('"qty": 300')
        assert p.body_decoded.isVisible()
        for checked, found in ((False, []), (True, ["mp"])):
            p.body_decoded.setChecked(checked)
            with qtbot.waitSignal(p.finished, timeout=30_000):
                qtbot.mouseClick(p.run_button, Qt.LeftButton)
            assert [r["tags"] for r in p.model.rows] == found, checked
        p.job_box.setCurrentText("top-keys")
        assert not p.body_decoded.isVisible() and not p.params().filter.body_decoded
    finally:
        p.cancel()
        session.close()


def test_a_long_array_is_shown_in_part(qtbot):
    """6,000 members: the tree makes TREE_NODES items and says the rest are not shown."""
    from engine.format import body_decode as bd
    from gui.views.decoded_view import DecodedView
    v = DecodedView()
    qtbot.addWidget(v)
    body = b"\xdc" + (6000).to_bytes(2, "big") + b"\x01" * 6000   # MessagePack array16 of 6,000 ones
    v.show_decoded(bd.decode_body(body))
    assert v.decoded.format == "msgpack" and v.tree.topLevelItemCount() == bf.TREE_NODES + 1
    assert v.tree.topLevelItem(bf.TREE_NODES).text(0) == "… 6000 members, not all shown"


def test_the_table_previews_binary_bodies_decoded(qtbot, window, tmp_path):
    """The Body preview column: a binary or compressed body's decoded value on one line,
    text as it is, undecodable bytes still as hex."""
    from gui.models import message_table as mt
    root = _store(tmp_path)
    with MessageStore.open(root, read_only=False) as s:
        s.put_message("Orders", b"\x00\x01\x02\xff\xfe", queue_id=0)
    open_and_wait(qtbot, window, root)
    _select(qtbot, window, "Orders", 0, 0)
    model = window.browser.model
    qtbot.waitUntil(lambda: model.is_loaded(4), timeout=5000)
    cells = [model.data(model.index(r, mt.COL_BODY)) for r in range(5)]
    assert cells[0].startswith('protobuf: {"1": "A-1", "2": 3, "3": {"1": "sku-7", "2": 1999}')
    assert cells[1].startswith('msgpack: {"id": "A-1", "qty": 300') and cells[1].endswith(" …")
    assert cells[2].startswith('cbor, lz4: {"id": "A-1", "qty": 3, "delta": -5')
    assert cells[3] == "plain text body"
    assert cells[4] == "hex: 00 01 02 ff fe"
