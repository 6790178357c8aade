"""Markdown tables from a results file, for the README's performance section:
`python -m bench.markdown [bench/results/latest.json]`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .common import fmt

HERE = Path(__file__).resolve().parent


def results_table(d: dict) -> str:
    out = ["| figure | value | baseline | baseline value | ratio | target | met |", "|---|---|---|---|---|---|---|"]
    for r in d["results"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "**no**")
        out.append(f"| {r['name']} | {fmt(r['value'], r['unit'])} | {r['baseline'] or '-'} | "
                   f"{fmt(r['baselineValue'], r['unit'])} | {ratio} | {r['target'] or '-'} | {met} |")
    return "\n".join(out)


def scaling_table(d: dict) -> str:
    s = d.get("scaling", {})
    rows = {p["storeGiB"]: {"GiB": p["storeGiB"], "messages": p["messages"]} for p in s.get("append", [])}
    for key, field, label in (("append", "usPerMessage", "append us/msg"),
                              ("append", "userUsPerMessage", "append user us/msg"),
                              ("append", "sysUsPerMessage", "append sys us/msg"), ("open", "seconds", "open s"),
                              ("getPage", "usPerMessage", "get-page us/msg"), ("query", "usPerQuery", "query us"),
                              ("scan", "usPerMessage", "scan us/msg")):
        for p in s.get(key, []):
            rows.setdefault(p["storeGiB"], {})[label] = p[field]
    cols = ["GiB", "messages", "append us/msg", "append user us/msg", "append sys us/msg", "open s",
            "get-page us/msg", "query us", "scan us/msg"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for k in sorted(rows):
        out.append("| " + " | ".join(fmt(rows[k].get(c)) for c in cols) + " |")
    return "\n".join(out)


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else argv
    d = json.loads(Path(args[0] if args else HERE / "results" / "latest.json").read_text())
    m = d["machine"]
    print(f"{d['mode']} run of {d['startedAt']}, {d['seconds']} s; {m['cpu']}, {m['cores']} cores, "
          f"load average at start {', '.join(f'{x:.1f}' for x in m['loadAverageAtStart'])}\n")
    print(results_table(d))
    print()
    print(scaling_table(d))


if __name__ == "__main__":
    main()
