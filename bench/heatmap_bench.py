"""Slot heat map + chain-length histogram of a default-size index file (5,000,000 slots,
20,000,000 entries), timed against the raw read of the same file's bytes.

    python bench/heatmap_bench.py [--quick]        or   run(quick) -> list[dict]

A synthetic file is built in a temp dir with numpy the way put_key would have written it
(random 31-bit key hashes, each entry linked to its slot's previous newest entry), at load
factor 2 (10,000,000 entries). Figures, each the best of a few runs, with the page cache warm:

* baseline A: raw read of the slot table (np.frombuffer(...).copy(), 20 MB);
* baseline B: raw read of the slot table and the used entries, the bytes chain lengths need;
* cold: chain length of every slot + histogram + stats + binning + drawing the view (grab),
  i.e. what the view's worker (compute_slots) and _apply do for a file not seen yet;
* warm: re-binning cached chain lengths + drawing (what a resize or a re-selection costs);
* slot heat map alone: used slots per pixel from the slot table (the picture the view shows
  at once for a new file), to its indexed image, and the heat-map panel drawn (grab);
* chain lengths alone: engine.analysis.chain_lengths (the compiled kernel, engine/accel/_index.pyx,
  when built) and its numpy twin (chain_lengths_numpy).

Why the issue's "<= 3x the slot table" holds for the occupancy map but not for the full
figure: a slot holds only its newest entry number, so a chain length needs every used entry's
prevIndex (or keyHash): at load 2 that is 10M x 20 B = 200 MB next to the 20 MB slot table,
11x the bytes, before any computing. See bench/NOTES.md, "heatmap".

Not part of the test suite."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):          # run as a script: make the repo importable, and drop
    here = Path(__file__).resolve().parent    # bench/ itself (its profile.py shadows the stdlib's)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))

from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, IndexFile  # noqa: E402

SLOTS = 5_000_000
INDEX_NUM = 20_000_000
TARGET = 3.0


def build_index(path: Path, slots: int = SLOTS, index_num: int = INDEX_NUM, entries: int = 2 * SLOTS,
                seed: int = 7) -> None:
    """Write a full-size index file holding `entries` entries (numpy, a few seconds)."""
    rng = np.random.default_rng(seed)
    kh = rng.integers(0, 2 ** 31 - 1, size=entries, dtype=np.int64)
    slot = kh % slots
    order = np.argsort(slot, kind="stable")           # entries of one slot, oldest first
    ss = slot[order]
    same = ss[1:] == ss[:-1]
    prev = np.zeros(entries, dtype=np.int64)
    prev[order[1:][same]] = order[:-1][same] + 1      # entry numbers start at 1
    newest = np.ones(entries, dtype=bool)
    newest[:-1] = ~same
    table = np.zeros(slots, dtype=">i4")
    table[ss[newest]] = order[newest] + 1
    e = np.zeros(entries + 1, dtype=INDEX_ENTRY_DTYPE)
    e["keyHash"][1:] = kh
    e["commitLogOffset"][1:] = np.arange(entries, dtype=np.int64) * 1024
    e["timeDiff"][1:] = np.arange(entries, dtype=np.int64) // 100_000
    e["prevIndex"][1:] = prev
    h = np.zeros(1, dtype=INDEX_HEADER_DTYPE)
    h["beginTimestamp"], h["endTimestamp"] = 1_795_310_747_485, 1_795_310_747_485 + entries // 100
    h["endPhyOffset"] = (entries - 1) * 1024
    h["hashSlotCount"], h["indexCount"] = int(newest.sum()), entries + 1
    with open(path, "wb") as fh:
        fh.truncate(40 + 4 * slots + 20 * index_num)   # sparse beyond the used entries
        fh.write(h.tobytes())
        fh.write(table.tobytes())
        fh.write(e.tobytes())


def _best(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _row(name: str, value: float, baseline: str, baseline_value: float, target: str | None = "<= 3x",
         **extra) -> dict:
    ratio = value / baseline_value if baseline_value else None
    met = None if target is None or ratio is None else ratio <= TARGET
    return {"name": name, "value": round(value, 6), "unit": "s", "baseline": baseline,
            "baselineValue": round(baseline_value, 6), "ratio": None if ratio is None else round(ratio, 2),
            "target": target, "met": met, **extra}


def run(quick: bool = False) -> list[dict]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication
    app = QApplication.instance() or QApplication(sys.argv[:1])
    from engine import analysis as A
    from engine.accel import load
    from gui.internals import heatmap as H
    from gui.internals.slot_heatmap import SlotHeatmapView, compute_slots
    accel = load("_index") is not None

    repeats = 2 if quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="rmqstore-heatmap-"))
    try:
        path = tmp / "20261122012547514"
        t = time.perf_counter()
        build_index(path)
        build_s = time.perf_counter() - t
        f = IndexFile(path, SLOTS, INDEX_NUM)
        count = f.header.indexCount
        mm = f.file.mm

        def raw_slots():
            return np.frombuffer(mm, dtype=">i4", count=SLOTS, offset=40).copy()

        def raw_used():
            return np.frombuffer(mm, dtype=np.uint8, count=4 * SLOTS + 20 * (count + 1), offset=40).copy()

        raw_slots(), raw_used()                        # warm the page cache
        base_a = _best(repeats * 2, raw_slots)
        base_b = _best(repeats, raw_used)

        view = SlotHeatmapView()
        view.resize(1200, 800)
        view.show()
        view.grab()                                    # lay out once so the pixel budget is known
        w, h = view._budget()
        entries = count - 1
        state = {}

        def cold():
            res, heat = compute_slots(f, w, h, "max")       # what the view's worker runs
            view._apply((res, heat))
            view.grab()
            state["res"] = res

        def warm():
            view._show_heat(H.slot_heatmap(state["res"].lengths, w, h, "max"))
            view._draw_histogram()
            view.grab()

        def lengths_only():
            return A.chain_lengths(f)

        def lengths_numpy():
            return A.chain_lengths_numpy(f)

        def occupancy():
            view._show_heat(H.slot_occupancy(f, w, h), SLOTS)
            view.heat_widget.grab()

        t_cold = _best(repeats, cold)
        t_warm = _best(repeats * 2, warm)
        t_len = _best(repeats, lengths_only)
        t_numpy = _best(max(1, repeats // 2), lengths_numpy)
        t_occ = _best(max(20, repeats * 4), occupancy)
        assert np.array_equal(A.chain_lengths_numpy(f), state["res"].lengths)
        max_chain = int(state["res"].lengths.max())
        info = {"slots": SLOTS, "entries": entries, "loadFactor": entries / SLOTS, "maxChain": max_chain,
                "pixels": [w, h], "slotsPerPixel": view.heat.slots_per_bin, "buildSeconds": round(build_s, 2),
                "compiledKernel": accel}
        used_mb = (4 * SLOTS + 20 * count) / 1e6
        why = ("a slot holds only its newest entry number: chain lengths need every used entry's prevIndex "
               f"({20 * entries / 1e6:.0f} MB of entries next to the {4 * SLOTS / 1e6:.0f} MB slot table, "
               f"{(4 * SLOTS + 20 * entries) / (4 * SLOTS):.0f}x the bytes at load {entries / SLOTS:g}), so "
               "<= 3x the slot-table read is out of reach for the histogram; the occupancy map meets it")
        rows = [
            _row("slot heat map + histogram, cold: chain lengths of 5,000,000 slots, bin, draw",
                 t_cold, "raw read of the slot table (20 MB)", base_a, **info, whyNotMet=why,
                 ratioVsBytesRead=round(t_cold / base_b, 2)),
            _row("slot heat map + histogram, cold (same work)",
                 t_cold, f"raw read of slot table + used entries ({used_mb:.0f} MB)", base_b,
                 note="the bytes chain lengths must read"),
            _row("slot heat map + histogram, warm: re-bin cached lengths and draw",
                 t_warm, "raw read of the slot table (20 MB)", base_a),
            _row("slot heat map alone: used slots per pixel from the slot table, bin, draw the map",
                 t_occ, "raw read of the slot table (20 MB)", base_a,
                 reads="slot table only (gui.internals.heatmap.slot_occupancy)", draws="heat-map panel grab (image + colour bar)",
                 compiledKernel=accel),
            _row("chain lengths alone (engine.analysis)", t_len, "raw read of slot table + used entries",
                 base_b, target=None, compiledKernel=accel),
            _row("chain lengths alone (numpy walk, the pure-Python fallback)", t_numpy,
                 "raw read of slot table + used entries", base_b, target=None),
        ]
        view.close()
        del view
        f.close()
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    import json
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rows = run(quick)
    for r in rows:
        print(f"{r['name']}: {r['value']:.4f} s vs {r['baseline']} {r['baselineValue']:.4f} s "
              f"-> {r['ratio']}x  target {r['target']}  met {r['met']}")
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
