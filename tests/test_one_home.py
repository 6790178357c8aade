"""Concepts written once (issue 31, item 4), tested at their one home and where it is used:
the index slot of a keyHash (RocketMQ's rule for a negative one), time formatting, the Java
string hash (compiled against Python), and the reserved property names the put refuses."""
import struct
from pathlib import Path

import numpy as np

from engine import MessageStore, StoreConfig
from engine.analysis import check_index, check_records
from engine.analysis.check import check_store
from engine.format.index_layout import NO_SLOT, entry_pos, slot_of, slots_of
from engine.scan.consistency import index_chain_problems

SMALL = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 97,
         "maxIndexNum": 400}


# ---- the slot of a keyHash -------------------------------------------------------------------
def test_slot_of_is_rocketmqs_rule():
    """slotPos = keyHash % hashSlotNum for the non-negative hashes indexKeyHashMethod gives;
    a negative stored keyHash is in no slot (Java's % would give a negative slot)."""
    assert slot_of(0, 97) == 0
    assert slot_of(96, 97) == 96
    assert slot_of(97 * 5 + 3, 97) == 3
    assert slot_of(0x7FFFFFFF, 97) == 0x7FFFFFFF % 97
    for h in (-1, -3, -97, -(1 << 31)):
        assert slot_of(h, 97) == NO_SLOT
    arr = np.array([0, 5, 97 * 3 + 1, -1, -(1 << 31), 0x7FFFFFFF], dtype=np.int32)
    assert slots_of(arr, 97).tolist() == [0, 5, 1, NO_SLOT, NO_SLOT, 0x7FFFFFFF % 97]


def _both_checks(store) -> tuple[dict, dict]:
    a = check_store(store)
    saved = check_records._K, check_index._K
    check_records._K = check_index._K = None
    try:
        b = check_store(store)
    finally:
        check_records._K, check_index._K = saved
    return a, b


def test_negative_hashes_belong_to_no_slot_in_check_and_scan(tmp_path):
    """Two stored keyHashes made negative (a slot's head, and an entry linking to an older one):
    check (compiled and pure) and the scan's chain consistency now say the same thing -- each
    is in no slot, so the chain holding it is wrong. (The scan once took abs(hash) % slots and
    called the head fine; check took Python's floor % and named another slot.)"""
    root = tmp_path / "s"
    s = MessageStore.create(root, StoreConfig.from_mapping(SMALL))
    for i in range(300):
        s.put_message("T", b"b%d" % i, i % 4, None, [f"key-{i}"])
    s.close()
    with MessageStore.open(root, read_only=True) as st:
        f = st.index.files[0]
        S, path = f.slot_num, Path(f.path)
        slots = f.slots.astype(np.int64)
        hashes = f.entries["keyHash"].astype(np.int64)
        prev = f.entries["prevIndex"].astype(np.int64)
        count = f.header.indexCount
    # a head whose negated hash would land elsewhere by floor %, and a linking entry in another slot
    head_slot = next(j for j in range(S) if slots[j] > 0 and hashes[slots[j]] % S not in (0, (-hashes[slots[j]]) % S))
    head = int(slots[head_slot])
    linker = next(k for k in range(count - 1, 0, -1) if prev[k] > 0 and k != head and hashes[k] % S != head_slot)
    older = int(prev[linker])
    with open(path, "r+b") as fh:
        for k in (head, linker):
            fh.seek(entry_pos(S, k))
            fh.write(struct.pack(">i", -int(hashes[k])))

    with MessageStore.open(root, read_only=True) as st:
        a, b = _both_checks(st)
        scan_rows = index_chain_problems(st, 0)
    assert a == b   # the kernel and its twin by the same rule
    details = [p["detail"] for p in a["problems"]]
    assert f"entry {head} has a negative key hash" in details
    assert f"entry {linker} has a negative key hash" in details
    assert f"slot {head_slot} names entry {head}, whose key hashes to no slot (a negative key hash)" in details
    assert (f"entry {older} in the chain of no slot (a negative key hash) hashes to slot {hashes[older] % S}"
            in details)
    wrong = {r["actual"]["index"] for r in scan_rows if r["problem"] == "entry chained from the wrong slot"}
    assert {head, linker} <= wrong
    assert all(r["actual"]["keyHash"] < 0 for r in scan_rows if r["problem"] == "entry chained from the wrong slot")
