"""The scan panel over more stores than the session's: a list of folders, a broker column."""
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402

from conftest import manifest, unpack  # noqa: E402
from gui.scan_panel import ScanPanel  # noqa: E402
from gui.session import StoreSession  # noqa: E402
from scan_support import SHOTS  # noqa: E402


def test_two_stores_in_one_local_job(qtbot):
    session = StoreSession()
    session.open_blocking(unpack("small"))
    p = ScanPanel(session)
    qtbot.addWidget(p)
    p.resize(1280, 800)
    p.show()
    try:
        p.engine_box.setCurrentIndex(p.engine_box.findData("local"))
        p.job_box.setCurrentText("topic-stats")
        p.stores_list.addItem(str(unpack("v5")))
        assert p.extra_stores() == [str(unpack("v5"))] and p.stores_list.isVisible()
        with qtbot.waitSignal(p.finished, timeout=60_000) as blocker:
            qtbot.mouseClick(p.run_button, Qt.LeftButton)
        result = blocker.args[0]
        assert [s["broker"] for s in result.stores] == ["small", "v5"]
        assert p.model.columns[0] == "broker" and {r["broker"] for r in p.model.rows} == {"small", "v5"}
        for b in ("small", "v5"):
            assert sum(r["messages"] for r in p.model.rows if r["broker"] == b) == len(manifest(b)["messages"])
        SHOTS.mkdir(parents=True, exist_ok=True)
        assert p.grab().save(str(SHOTS / "scan-panel-stores.png"))
    finally:
        session.close()
    assert not p.lane.busy
