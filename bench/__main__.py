"""python -m bench [--quick] [--only SECTION ...] [--keep] [--dir DIR] [--java-lib DIR]

Writes bench/results/latest.json ({"machine", "mode", "results", "scaling", ...}) and prints
the table. Sections: baselines, first-contact (disk of a new store, read-write against
read-only open), append, key-query, scaling (get-page mix, scan-local,
scan-spark, memory and the curves), get-page, open (open, gui-first-page), heatmap, internals-scan,
demo (`rmqstore demo` against single puts of its messages), big-store (a kept 10M-message
store: GUI open + first page, segment fill, Scan tab against the CLI, open and key-query
scaling; bench/big.py), check (the whole check of a >= 1 GiB store against a raw
read of its commitlog), lineage (a lineage query on a 10M-message store, bench/lineage_bench.py); with
--java-lib also java (the same workloads against RocketMQ's DefaultMessageStore, side by side)."""
from __future__ import annotations

import os

# numpy's OpenBLAS threads spin between calls; the store never uses BLAS, and on a 2-core
# machine a spinning thread takes the core the kernel's page-fault and writeback work needs
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import baselines
from .common import MB, Row, disk_free, log, machine, row, table

HERE = Path(__file__).resolve().parent
SECTIONS = ["baselines", "first-contact", "append", "key-query", "scaling", "get-page", "open", "heatmap", "internals-scan", "demo",
            "big-store", "check", "body-decode", "lineage"]
JAVA = "java"  # only with --java-lib (bench/java_side.py)


class Context:
    def __init__(self, tmp: Path, quick: bool):
        self.tmp = tmp
        self.quick = quick
        self.reps = 3
        self.stores: dict[str, Path] = {}   # stores a later section reuses
        self.scaling: dict = {}             # the curves
        self.java_lib: str | None = None    # RocketMQ's jars, for the java section


def baseline_rows(ctx) -> list[Row]:
    data = os.urandom(1 << 20) * 256
    w = min(baselines.raw_write(data, ctx.tmp) for _ in range(ctx.reps))
    p = ctx.tmp / "raw-read.tmp"
    p.write_bytes(data)
    r_secs, r_bytes = baselines.raw_read([(p, 0, len(data))])
    p.unlink()
    m = baselines.memcpy()
    return [row("baseline raw mmap write (256 MiB)", len(data) / w / MB, "MB/s", target="reference"),
            row("baseline raw mmap read (256 MiB)", r_bytes / r_secs / MB, "MB/s", target="reference"),
            row("baseline memcpy (256 MiB)", m / MB, "MB/s", target="reference")]


def heatmap_rows(ctx) -> list:
    path = HERE / "heatmap_bench.py"
    if not path.exists():
        log("heatmap: bench/heatmap_bench.py not found, skipped")
        return [row("heatmap", None, "s", target="<= 3x the raw read of the slot table", missing="bench/heatmap_bench.py")]
    from . import heatmap_bench
    out = []
    for r in heatmap_bench.run(ctx.quick):
        d = dict(r)
        known = {k: d.pop(k) for k in ("name", "value", "unit", "baseline", "baselineValue", "ratio", "target", "met")
                 if k in d}
        out.append(Row(known.get("name", "heatmap"), known.get("value"), known.get("unit", ""), known.get("baseline"),
                       known.get("baselineValue"), known.get("ratio"), known.get("target"), known.get("met"),
                       extra=d))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller stores: under 10 minutes on 2 cores")
    ap.add_argument("--only", nargs="+", choices=SECTIONS + [JAVA], help="run only these sections")
    ap.add_argument("--dir", help="where the temporary stores go (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary stores")
    ap.add_argument("--out", default=str(HERE / "results" / "latest.json"))
    ap.add_argument("--java-lib", metavar="DIR", help="RocketMQ 4.9.7's jars (a binary distribution's lib/): "
                    "adds the java section, our workloads against DefaultMessageStore side by side")
    args = ap.parse_args(argv)
    sections = list(args.only or SECTIONS)
    if args.java_lib:
        from . import java_side
        try:  # a wrong JAVA_LIB fails here, not after the other sections
            java_side.compile_driver(Path(args.java_lib))
        except java_side.JavaSideError as e:
            print(f"bench: {e}", file=sys.stderr)
            return 2
        if JAVA not in sections:
            sections.append(JAVA)
    elif JAVA in sections:
        print("bench: the java section needs --java-lib DIR (make bench JAVA_LIB=DIR)", file=sys.stderr)
        return 2
    if "get-page" in sections and "append" not in sections:
        sections = ["append"] + sections  # get-page walks the append-batch stores
    try:
        if args.dir:
            Path(args.dir).mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="rmqstore-bench-", dir=args.dir))
    except OSError as e:
        print(f"bench: cannot make a folder for the stores in {args.dir or tempfile.gettempdir()}: {e}",
              file=sys.stderr)
        return 2
    ctx = Context(tmp, args.quick)
    ctx.java_lib = args.java_lib
    started = time.time()
    log(f"bench ({'quick' if args.quick else 'full'}) in {tmp}, {disk_free(tmp) / (1 << 30):.0f} GiB free")
    rows: list[Row] = []
    runners = {
        "baselines": baseline_rows,
        "first-contact": lambda c: __import__("bench.first_contact", fromlist=["run"]).run(c),
        "append": lambda c: __import__("bench.append", fromlist=["run"]).run(c),
        "key-query": lambda c: __import__("bench.query", fromlist=["run"]).run(c),
        "scaling": lambda c: __import__("bench.scaling", fromlist=["run"]).run(c),
        "get-page": lambda c: __import__("bench.get_page", fromlist=["run"]).run(c),
        "open": lambda c: __import__("bench.open_gui", fromlist=["run"]).run(c),
        "heatmap": heatmap_rows,
        "internals-scan": lambda c: __import__("bench.internals_scan", fromlist=["run"]).run(c),
        "demo": lambda c: __import__("bench.demo_write", fromlist=["run"]).run(c),
        "big-store": lambda c: __import__("bench.big", fromlist=["run"]).run(c),
        "check": lambda c: __import__("bench.check_speed", fromlist=["run"]).run(c),
        "body-decode": lambda c: __import__("bench.body_decode", fromlist=["run"]).run(c),
        "lineage": lambda c: __import__("bench.lineage_bench", fromlist=["run"]).run(c),
        JAVA: lambda c: __import__("bench.java_side", fromlist=["run"]).run(c),
    }
    try:
        for name in SECTIONS + [JAVA]:
            if name in sections:
                t = time.time()
                rows += runners[name](ctx)
                log(f"{name}: {time.time() - t:.0f} s")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    result = {"machine": machine(), "mode": "quick" if args.quick else "full",
              "startedAt": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
              "seconds": round(time.time() - started), "sections": sections,
              "results": [r.to_json() for r in rows], "scaling": ctx.scaling}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(rows))
    print(f"\n{result['mode']} run, {result['seconds']} s; results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
