"""Store settings by RocketMQ's names: the dialog (typed values checked inline, a broker.conf
imported with only the names it sets), remembered per store and used on every later open;
offered when an open fails for want of settings; the browser's --config / --set."""
from __future__ import annotations

import subprocess
import sys

import pytest
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from conftest import ROOT, unpack
from gui import settings as st
from gui import store_config as sc
from guitest_support import dialogs, open_and_wait, screenshot, settings, window  # noqa: F401

BROKER_CONF = """\
# broker.conf of the broker that wrote the `small` store
brokerClusterName = TestCluster
brokerName = broker-a
namesrvAddr = 127.0.0.1:9876
storePathRootDir = /data/rocketmq/store
storePathCommitLog = /data/rocketmq/store/commitlog
mappedFileSizeCommitLog = 65536
mappedFileSizeConsumeQueue = 1000
maxHashSlotNum = 64
maxIndexNum = 256
flushDiskType = SYNC_FLUSH
enabledAppendPropCRC = false
messageDelayLevel = 1s 5s 10s 30s 1m 2m
"""
IMPORTED = {"mappedFileSizeCommitLog": "65536", "mappedFileSizeConsumeQueue": "1000", "maxHashSlotNum": "64",
            "maxIndexNum": "256", "enabledAppendPropCRC": "false", "messageDelayLevel": "1s 5s 10s 30s 1m 2m",
            "flushDiskType": "SYNC_FLUSH", "brokerClusterName": "TestCluster"}


def _wait_dialog(qtbot, window):
    qtbot.waitUntil(lambda: window.settings_dialog is not None and window.settings_dialog.isVisible(), timeout=5000)
    return window.settings_dialog


def test_settings_cover_the_engine_config_but_not_the_paths():
    from dataclasses import fields

    from engine.config import StoreConfig
    scalar = {f.name for f in fields(StoreConfig) if f.type in ("int", "bool", "str", int, bool, str)}
    assert sc.NAMES == scalar - {"storePathRootDir", "storePathCommitLog", "storePathDLedgerCommitLog"}
    assert [s.name for s in sc.SETTINGS[:4]] == list(sc.SIZE_KEYS)   # the sizes come first
    assert sc.to_config({}) is None and sc.check({"maxIndexNum": "many"}) == "invalid value 'many' for maxIndexNum"
    cfg = sc.to_config({"mappedFileSizeCommitLog": "65536", "messageIndexEnable": "false", "unknown": "1"})
    assert cfg.mappedFileSizeCommitLog == 65536 and cfg.messageIndexEnable is False
    assert sc.from_config(cfg) == {"mappedFileSizeCommitLog": "65536", "messageIndexEnable": "false"}


def test_dialog_round_trip_import_and_remembered_on_reopen(qtbot, window, settings, tmp_path, monkeypatch):
    root = unpack("small")
    open_and_wait(qtbot, window, root)
    assert window.session.config is None and window.current_settings() == {}
    window.act_store_settings.trigger()
    dlg = _wait_dialog(qtbot, window)
    assert dlg.values() == {} and dlg.ok_button.isEnabled() and not dlg.problem
    assert "storePathCommitLog" not in dlg.editors and "storePathRootDir" not in dlg.editors
    assert dlg.editors["mappedFileSizeCommitLog"].placeholderText() == "detected from the files"
    # a bad value is explained in the dialog (one line, no traceback) and OK waits for a good one
    qtbot.keyClicks(dlg.editors["maxIndexNum"], "lots")
    assert dlg.problem == "invalid value 'lots' for maxIndexNum" and not dlg.ok_button.isEnabled()
    assert dlg.error.isVisible()
    dlg.editors["maxIndexNum"].setText("256")
    dlg.set_value("messageDelayLevel", "1s 5x")
    assert "messageDelayLevel" in dlg.problem and not dlg.ok_button.isEnabled()
    dlg.set_value("messageDelayLevel", "")
    assert not dlg.problem and dlg.values() == {"maxIndexNum": "256"}
    # import a broker.conf: only what it sets; the store's location is never taken from it
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(conf), "")))
    with qtbot.waitSignal(dlg.imported, timeout=2000):
        qtbot.mouseClick(dlg.import_button, Qt.LeftButton)
    assert dlg.values() == IMPORTED
    assert dlg.from_file == set(IMPORTED) and dlg.labels["maxHashSlotNum"].font().bold()
    assert not dlg.labels["listenPort"].font().bold() and dlg.editors["listenPort"].text() == ""
    assert "ignored: storePathCommitLog, storePathRootDir" in dlg.import_info.text()
    assert dlg.editors["flushDiskType"].currentData() == "SYNC_FLUSH"
    screenshot(dlg, "store-settings.png")
    # OK: remembered for this store, and the store is reopened with them
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        qtbot.mouseClick(dlg.ok_button, Qt.LeftButton)
    assert st.store_settings(settings, root) == IMPORTED
    cfg = window.session.config
    assert cfg.flushDiskType == "SYNC_FLUSH" and cfg.brokerClusterName == "TestCluster"
    assert cfg.mappedFileSizeCommitLog == 65536 and "mappedFileSizeCommitLog" in cfg.explicit
    assert window.session.store.cfg.delay_level_millis == [1000, 5000, 10000, 30000, 60000, 120000]
    assert window.current_settings() == IMPORTED
    # every later open of the store uses them: plain open, then from the recent list
    window.close_store()
    assert window.session.config is None
    open_and_wait(qtbot, window, root)
    assert sc.from_config(window.session.config) == IMPORTED
    window.close_store()
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.recent_actions[0].trigger()
    assert sc.from_config(window.session.config) == IMPORTED
    assert window.session.store.cfg.flushDiskType == "SYNC_FLUSH"
    # the dialog opens with what is in force; "Clear all" + OK forgets them: everything detected again
    window.act_store_settings.trigger()
    dlg = _wait_dialog(qtbot, window)
    assert dlg.values() == IMPORTED
    qtbot.mouseClick(dlg.clear_button, Qt.LeftButton)
    assert dlg.values() == {}
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        qtbot.mouseClick(dlg.ok_button, Qt.LeftButton)
    assert window.session.config is None and st.store_settings(settings, root) == {}


def test_settings_are_kept_per_store(settings, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    st.set_store_settings(settings, a, {"maxHashSlotNum": "64"})
    assert st.store_settings(settings, a) == {"maxHashSlotNum": "64"}
    assert st.store_settings(settings, tmp_path / "x" / ".." / "a") == {"maxHashSlotNum": "64"}  # resolved
    assert st.store_settings(settings, b) == {}
    settings.sync()
    from PySide6.QtCore import QSettings
    again = QSettings(settings.fileName(), QSettings.IniFormat)
    assert st.store_settings(again, a) == {"maxHashSlotNum": "64"}


def test_open_failure_offers_the_settings_dialog(qtbot, window, dialogs, settings):
    root = unpack("small")
    # a wrong file size remembered for the store (as `--set` would give it): the engine refuses
    st.set_store_settings(settings, root, {"mappedFileSizeCommitLog": "1000"})
    with qtbot.waitSignal(window.session.openFailed, timeout=10000):
        window.open_store(root)
    assert dialogs.kinds() == ["critical"] and len(dialogs.boxes) == 1
    kind, title, text = dialogs.calls[0]
    assert title == "Cannot open store" and "1000" in text and "Traceback" not in text
    box = dialogs.boxes[0]
    assert box.isVisible() and box.action_button.text() == "Store settings…"
    qtbot.mouseClick(box.action_button, Qt.LeftButton)
    dlg = _wait_dialog(qtbot, window)
    assert not shiboken6.isValid(box) or not box.isVisible()   # closed (and deleted) first
    assert dlg.values() == {"mappedFileSizeCommitLog": "1000"}          # what was tried
    assert dlg.reason.isVisibleTo(dlg) and "1000" in dlg.reason.text()
    screenshot(dlg, "store-settings-failed.png")
    dlg.editors["mappedFileSizeCommitLog"].clear()                       # detect it from the files
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        qtbot.mouseClick(dlg.ok_button, Qt.LeftButton)
    assert window.session.store.cfg.mappedFileSizeCommitLog == 65536
    assert st.store_settings(settings, root) == {}


def test_failures_that_settings_cannot_fix_get_the_plain_dialog(qtbot, window, dialogs, tmp_path):
    with qtbot.waitSignal(window.session.openFailed, timeout=10000):
        window.open_store(tmp_path)   # an empty folder: not a store
    assert dialogs.kinds() == ["critical"] and dialogs.boxes == []


def test_sizes_that_fit_no_file_are_offered_settings(qtbot, window, dialogs, tmp_path):
    """Commitlog files of two sizes: the engine cannot tell which one is right."""
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / "00000000000000000000").write_bytes(b"\0" * 1000)
    (tmp_path / "commitlog" / "00000000000000001000").write_bytes(b"\0" * 2000)
    with qtbot.waitSignal(window.session.openFailed, timeout=10000):
        window.open_store(tmp_path)
    assert len(dialogs.boxes) == 1 and "different sizes" in dialogs.calls[0][2]
    dialogs.boxes[0].close()


def test_store_menu_without_a_store_asks_for_the_folder(qtbot, window, monkeypatch):
    root = unpack("small")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(root)))
    titles = [a.text() for a in window.menuBar().actions()]
    store_menu = window.menuBar().actions()[titles.index("&Store")].menu()
    assert window.act_store_settings in store_menu.actions() and window.act_store_settings.isEnabled()
    window.act_store_settings.trigger()
    dlg = _wait_dialog(qtbot, window)
    assert dlg.store_path == str(root)
    dlg.set_value("maxMessageSize", "1048576")
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        dlg.accept()
    assert window.session.store.cfg.maxMessageSize == 1048576


# ---- command line ---------------------------------------------------------------------------------
def test_browser_command_line_config_and_set(tmp_path, capsys):
    from gui.app import parse_args
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)
    args, values = parse_args(["STORE", "--config", str(conf), "--set", "maxHashSlotNum=64",
                               "--set", "flushDiskType=ASYNC_FLUSH", "--set", "brokerName=x"])
    assert args.store == "STORE" and values == {**IMPORTED, "flushDiskType": "ASYNC_FLUSH"}
    err = capsys.readouterr().err
    assert "ignored storePathCommitLog, storePathRootDir" in err and "ignored --set brokerName" in err
    args, values = parse_args(["STORE"])
    assert values == {} and not args.config and args.set == []
    for bad, message in ((["--set", "maxIndexNum=lots"], "invalid value 'lots' for maxIndexNum"),
                         (["--set", "novalue"], "--set expects KEY=VALUE"),
                         (["--config", str(tmp_path / "missing.conf")], "cannot read config file")):
        with pytest.raises(SystemExit) as e:
            parse_args(["STORE", *bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("rmqstore-browser: error: ") and message in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        parse_args(["--set", "maxIndexNum=4"])   # settings without a store
    assert e.value.code == 2


def test_browser_bad_setting_exits_2_with_one_line():
    out = subprocess.run([sys.executable, "-m", "gui.app", str(unpack("small")), "--set",
                          "mappedFileSizeCommitLog=64k"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == "rmqstore-browser: error: invalid value '64k' for mappedFileSizeCommitLog"


def test_command_line_settings_open_the_store_and_are_remembered(qtbot, window, settings, dialogs):
    from gui.app import parse_args
    root = unpack("small")
    _, values = parse_args([str(root), "--set", "mappedFileSizeCommitLog=65536", "--set", "maxMessageSize=999999"])
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.open_store(root, read_only=True, settings=values, remember=True)
    assert window.session.store.cfg.maxMessageSize == 999999
    assert st.store_settings(settings, root) == values
    # a wrong size from the command line: refused, the settings dialog offered, nothing remembered
    _, wrong = parse_args([str(root), "--set", "mappedFileSizeCommitLog=4096"])
    with qtbot.waitSignal(window.session.openFailed, timeout=10000):
        window.open_store(root, read_only=True, settings=wrong, remember=True)
    assert len(dialogs.boxes) == 1 and st.store_settings(settings, root) == values
    assert window.session.store.cfg.maxMessageSize == 999999   # the open store stays
    dialogs.boxes[0].button(QMessageBox.Close).click()
