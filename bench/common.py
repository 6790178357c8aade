"""Result rows, timing helpers, the machine description and the printed table."""
from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

MB = 1_000_000
GiB = 1 << 30
MiB = 1 << 20


@dataclass
class Row:
    """One figure: `value` in `unit`, compared with `baselineValue` of `baseline` (same unit).

    ratio = value / baselineValue for throughputs (higher is better); for costs (seconds,
    bytes) the row says so in `better` and the ratio is still value / baselineValue.
    `target` is the issue's target as text, `met` True/False, or None when only reported."""
    name: str
    value: float | None
    unit: str
    baseline: str | None = None
    baselineValue: float | None = None
    ratio: float | None = None
    target: str | None = None
    met: bool | None = None
    better: str = "higher"
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("value", "baselineValue", "ratio"):
            if isinstance(d[k], float):
                d[k] = round(d[k], 6 if abs(d[k]) < 1 else 3)
        return d


def row(name, value, unit, baseline=None, baseline_value=None, target_ratio=None, target=None,
        better="higher", ratio=None, met=None, **extra) -> Row:
    """A row whose ratio is computed (unless given) and whose target, when `target_ratio`
    is given, is checked on the ratio: >= for throughputs, <= for costs."""
    if ratio is None and value is not None and baseline_value:
        ratio = value / baseline_value
    if target_ratio is not None and ratio is not None:
        cmp = ">=" if better == "higher" else "<="
        target = target or f"ratio {cmp} {target_ratio:g}"
        met = ratio >= target_ratio if better == "higher" else ratio <= target_ratio
    return Row(name, value, unit, baseline, baseline_value, ratio, target, met, better, extra)


class Timer:
    """Wall and CPU time of a block: `with Timer() as t: ...; t.wall, t.cpu`."""

    def __enter__(self):
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._w
        self.cpu = time.process_time() - self._c


def best_of(n: int, fn):
    """Run fn() n times; return the result with the smallest wall time (fn returns (wall, ...))."""
    results = [fn() for _ in range(max(1, n))]
    return min(results, key=lambda r: r[0])


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    import numpy
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memoryBytes": mem,
        "os": f"{platform.system()} {platform.release()}", "python": sys.version.split()[0],
        "numpy": numpy.__version__, "loadAverageAtStart": list(os.getloadavg()),
    }


def disk_free(path: Path) -> int:
    return shutil.disk_usage(path).free


def fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        a = abs(v)
        s = f"{v:,.0f}" if a >= 1000 else f"{v:.3g}" if a >= 1 else f"{v:.3g}"
    else:
        s = f"{v:,}" if isinstance(v, int) else str(v)
    return f"{s} {unit}".strip()


def table(rows: list[Row]) -> str:
    head = ["figure", "value", "baseline", "baseline value", "ratio", "target", "met"]
    lines = [[r.name, fmt(r.value, r.unit), r.baseline or "-", fmt(r.baselineValue, r.unit),
              "-" if r.ratio is None else f"{r.ratio:.3g}", r.target or "-",
              "-" if r.met is None else ("yes" if r.met else "NO")] for r in rows]
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(l, widths)) for l in lines]
    return "\n".join(out)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
