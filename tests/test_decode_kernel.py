"""The compiled record decoder (engine/accel/_page_decode.pxi, behind CommitLog.read_record and
walk) against the reference check_record, answer for answer: every record of every conformance
store under each decode option set, and damaged copies (random bytes flipped, sizes and lengths
broken) at every record start and at random positions. Run compiled and with
RMQSTORE_PURE_PYTHON=1 (TWIN_TESTS): with the compiled module off both sides are the reference."""
from __future__ import annotations

import random

import pytest

from conftest import CLEAN, CRASHED, unpack
from engine import MessageStore
from engine.format.message import DecodeOptions, RecordStatus, check_record
from engine.store.commit_log import read_record_at

OPTIONS = [DecodeOptions(), DecodeOptions(check_crc=True), DecodeOptions(check_crc=True, force_verify_prop_crc=True),
           DecodeOptions(accept_v2=False)]
STORES = CLEAN + CRASHED + ["v5_lmq", "v5_batchcq", "v5_timer", "dledger"]


def record_starts(store) -> list[tuple[object, int]]:
    """(file, position) of every record the walk meets."""
    out = []
    files = {f.file_from_offset: f for f in store.commitlog.files}
    for off, _r in store.commitlog.walk():
        f = store.commitlog.queue.find(off)
        if f is not None and f.file_from_offset in files:
            out.append((f, off - f.file_from_offset))
    return out


def same(buf, pos: int, limit: int, offset: int, opts) -> None:
    ref = check_record(buf, pos, limit, offset, opts)
    got = read_record_at(buf, pos, limit, offset, opts)
    assert got == ref, (pos, offset, ref.status, ref.reason, got.status, got.reason)


@pytest.mark.parametrize("name", STORES)
def test_every_record_decodes_as_check_record_does(name):
    with MessageStore.open(unpack(name)) as store:
        starts = record_starts(store)
        assert starts
        messages = 0
        for f, pos in starts:
            for opts in OPTIONS:
                same(f.buf, pos, f.wrote_position, f.file_from_offset + pos, opts)
            messages += check_record(f.buf, pos, f.wrote_position, 0).status is RecordStatus.MESSAGE
        assert messages > 0


@pytest.mark.parametrize("name", ["small", "v5", "crashed_badcrc"])
def test_damaged_bytes_get_the_same_answer(name):
    rnd = random.Random(7)
    with MessageStore.open(unpack(name)) as store:
        starts = record_starts(store)[:300]
        for f, pos in starts:
            size = int.from_bytes(bytes(f.buf[pos:pos + 4]), "big", signed=True)
            if size <= 0 or pos + size > f.wrote_position:
                continue
            rec = bytearray(f.buf[pos:pos + size])
            for _ in range(6):
                bad = bytearray(rec)
                for _ in range(rnd.choice((1, 1, 2, 5))):
                    bad[rnd.randrange(len(bad))] = rnd.randrange(256)
                for opts in OPTIONS:
                    same(bytes(bad), 0, len(bad), 1000 + pos, opts)
                    same(bytes(bad), 0, rnd.randrange(1, len(bad) + 1), 1000 + pos, opts)   # torn
                same(bytes(bad), rnd.randrange(len(bad)), len(bad), 77, OPTIONS[0])          # mid-record
        for f, _ in starts[:20]:
            for _ in range(50):
                p = rnd.randrange(max(1, f.wrote_position))
                same(f.buf, p, f.wrote_position, p, OPTIONS[0])
