"""The compiled first-invalid-unit scan of ConsumeQueue recovery against the numpy rule it
replaces (consume_queue.py keeps both), and recovery results with it on the fixtures."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CLEAN, CRASHED, unpack
from engine import MessageStore
from engine.accel import load
from engine.store.consume_queue import CQ_UNIT_DTYPE

CQ = load("_cq")
needs = pytest.mark.skipif(CQ is None, reason="engine.accel._cq not built or RMQSTORE_PURE_PYTHON=1")


def numpy_rule(units, start, phy_end):
    ok = (units["commitLogOffset"] >= 0) & (units["size"] > 0)
    if phy_end >= 0:
        ok &= units["commitLogOffset"] < phy_end
    ok[:start] = True
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if bad.size else len(units)


unit = st.tuples(st.sampled_from([0, 1, 500, 10_000, -1, -(1 << 62), (1 << 62)]),
                 st.sampled_from([0, 1, 100, -5, 1 << 30]), st.integers(-(1 << 63), (1 << 63) - 1))


@needs
@settings(max_examples=300, deadline=None)
@given(units=st.lists(unit, max_size=40), start=st.integers(0, 2), phy_end=st.sampled_from([-1, 0, 600, 20_000]))
def test_scan_matches_numpy(units, start, phy_end):
    a = np.array(units, dtype=CQ_UNIT_DTYPE)
    assert CQ.first_invalid(a.tobytes(), start, len(a), phy_end) == numpy_rule(a, start, phy_end)


@needs
def test_count_beyond_the_buffer_is_clamped():
    a = np.array([(5, 10, 0)] * 3, dtype=CQ_UNIT_DTYPE)
    assert CQ.first_invalid(a.tobytes(), 0, 1000) == 3


@needs
@pytest.mark.parametrize("name", CLEAN + CRASHED)
def test_fixture_queues_recover_to_the_same_ends(name, monkeypatch):
    """Opening every fixture with and without the compiled scan gives the same queue bounds."""
    import engine.store.consume_queue as cqmod
    root = unpack(name)
    ends = []
    for scan in (CQ, None):
        monkeypatch.setattr(cqmod, "_CQ", scan)
        with MessageStore.open(root) as s:
            ends.append({k: (q.min_offset, q.max_offset, q.max_physic_offset) for k, q in s.queues.items()})
    assert ends[0] == ends[1] and ends[0]


valid_unit = st.tuples(st.integers(0, 1 << 40), st.integers(1, 1 << 20), st.integers(-(1 << 63), (1 << 63) - 1))


@needs
@settings(max_examples=300, deadline=None)
@given(prefix=st.lists(valid_unit, max_size=3000), tail=st.lists(unit, max_size=30), zeros=st.integers(0, 50),
       window=st.sampled_from([1, 16, 1024]))
def test_end_of_units_is_the_linear_answer_for_writer_shaped_files(prefix, tail, zeros, window):
    """Valid units, then whatever a crash leaves (within the window), then the zero tail: the
    binary search plus the window scan gives what the full linear scan gives."""
    if len(tail) > window:
        tail = tail[:window]
    a = np.array(prefix + tail + [(0, 0, 0)] * zeros, dtype=CQ_UNIT_DTYPE)
    # the window reaches back over the whole damaged tail, so the first invalid unit is found
    assert CQ.end_of_units(a.tobytes(), len(a), window) == numpy_rule(a, 0, -1)


@needs
def test_end_of_units_on_empty_and_full_files():
    full = np.array([(i * 10, 10, 0) for i in range(5000)], dtype=CQ_UNIT_DTYPE).tobytes()
    assert CQ.end_of_units(full, 5000) == 5000
    assert CQ.end_of_units(bytes(20 * 100), 100) == 0
    assert CQ.end_of_units(full, 10_000) == 5000        # count clamped to the buffer


@needs
@settings(max_examples=300, deadline=None)
@given(units=st.lists(st.tuples(st.sampled_from([0, 5, 100, 1000, -3]), st.sampled_from([0, 20, 100, 0x7FFFFFFF]),
                                st.integers(-5, 5)), max_size=40),
       cl_min=st.sampled_from([0, 1, 100, 5000]))
def test_first_live_matches_numpy(units, cl_min):
    from engine.store.consume_queue import FILLER_SIZE, is_filler
    a = np.array(units, dtype=CQ_UNIT_DTYPE)
    live = (a["commitLogOffset"] >= cl_min) & ~is_filler(a["commitLogOffset"], a["size"])
    hit = np.flatnonzero(live)
    expect = int(hit[0]) if hit.size else len(a)
    assert CQ.first_live(a.tobytes(), len(a), cl_min, FILLER_SIZE) == expect
