"""Scan results as text: table cells, columns, aligned tables, one-line errors. Shared by
`rmqstore scan` and the GUI's scan panel, so a cell reads the same in both."""
from __future__ import annotations

import re
import unicodedata

from engine.format.timefmt import UTC, format_time

FILTER_TABLE_COLUMNS = ["commitLogOffset", "topic", "queueId", "queueOffset", "storeTimestamp", "tags", "keys",
                        "uniqKey", "bodyLength"]
MAX_CELL = 48


def one_line(exc: BaseException) -> str:
    """A Spark / Python error as one readable line (the innermost Python error when a worker
    failed, else the first line)."""
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    py = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Unavailable): ", ln)]
    if "Traceback" in text and py:
        return py[-1]
    return lines[0] if lines else type(exc).__name__


def format_cell(key: str, v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and (key.endswith("Timestamp") or key == "bucketStart") and v > 0:
        return format_time(v, UTC) or str(v)
    if isinstance(v, float):
        return f"{v:.2f}".rstrip("0").rstrip(".")
    if isinstance(v, dict):
        s = " ".join(f"{k}={val}" for k, val in v.items())
    elif isinstance(v, (list, tuple)):
        s = ",".join(str(x) for x in v)
    else:
        s = str(v)
    s = s.replace("\n", " ")
    return s if len(s) <= MAX_CELL else s[:MAX_CELL - 1] + "…"


def display_width(s: str) -> int:
    """Terminal columns: East Asian wide/fullwidth characters take two, combining marks none."""
    w = 0
    for ch in s:
        if unicodedata.combining(ch) or ch in "\u200d\ufe0f":
            continue
        w += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return w


def _pad(s: str, width: int, right: bool) -> str:
    fill = " " * max(0, width - display_width(s))
    return fill + s if right else s + fill


def columns_of(rows: list[dict]) -> list[str]:
    """Every key of the rows, in first-seen order (rows of one job may differ in fields)."""
    return list(dict.fromkeys(k for r in rows for k in r))


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """Rows as an aligned text table (numbers right-aligned)."""
    if not rows:
        return ""
    if columns is None:
        columns = columns_of(rows)
    cells = [[format_cell(c, r.get(c)) for c in columns] for r in rows]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) or r.get(c) is None
                   for r in rows) and not (c.endswith("Timestamp") or c == "bucketStart") for c in columns]
    widths = [max(len(c), *(display_width(row[i]) for row in cells)) for i, c in enumerate(columns)]

    def line(vals):
        return "  ".join(_pad(v, w, num) for v, w, num in zip(vals, widths, numeric)).rstrip()
    out = [line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out) + "\n"
