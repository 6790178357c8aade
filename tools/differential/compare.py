"""Compare rmqstore with what RocketMQ answered about a store GeoDiff5 wrote (README.md here).

usage: python tools/differential/compare.py STORE ANSWERS.json[.xz] LABEL [--no-cli]

The engine's answers are compared by tests/test_differential.py's `compare` (the same rules the
suite applies to the stores under tests/differential); this script adds the CLI: each command
must exit 0 without a traceback, answer what RocketMQ answered, and leave every byte and mtime
of the store as it was. Prints one JSON summary line; the differences go to
LABEL.mismatches.jsonl in the current folder."""
from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from engine import MessageStore  # noqa: E402
from test_differential import CRASH_VIEW_WARNING, compare, digest  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "rmqstore"


def load(path: str) -> dict:
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


class Cli:
    """Read-only CLI calls against one store, each checked for its exit, a traceback and writes."""

    def __init__(self, store: Path):
        self.store, self.before, self.count, self.bad = store, digest(store), 0, []

    def __call__(self, args: list[str], operands: list[str] = ()) -> dict | None:
        p = subprocess.run([str(CLI), args[0], "--json", *args[1:], "--", str(self.store), *operands],
                           capture_output=True, text=True)
        self.count += 1
        if p.returncode != 0 or "Traceback" in p.stderr:
            self.bad.append(("cli", args + list(operands), p.returncode, p.stderr[-600:]))
        now = digest(self.store)
        if now != self.before:
            self.bad.append(("cli wrote", args + list(operands), sorted(k for k in now if now.get(k) != self.before.get(k))))
            self.before = now
        try:
            return json.loads(p.stdout) if p.stdout.strip() else None
        except json.JSONDecodeError:
            return None

    def eq(self, what, java, ours) -> None:
        self.count += 1
        if java != ours:
            self.bad.append((what, java, ours))


def cli_checks(store: Path, geo: dict, j: dict) -> Cli:
    c = Cli(store)
    info = c(["info"])
    if info:
        for k in ("mappedFileSizeCommitLog", "maxHashSlotNum", "maxIndexNum"):
            c.eq(("info", k), geo[k], info["config"].get(k))
    chk = c(["check"])
    if chk is not None:
        c.eq(("check", "ok"), True, chk.get("ok"))
    compacted = {q["topic"] for q in j.get("compacted", {}).get("queues", [])}
    firsts = list({q["topic"]: q for q in reversed(j["queues"])}.values())[:4]   # each topic's first queue
    for q in firsts:
        t, qid, pages = q["topic"], str(q["queueId"]), q["pages"]
        for p in (pages[0], pages[len(pages) // 2], pages[-1]) if t not in compacted else ():   # (its get --broker: below)
            g = c(["get", "--broker", "--count", "32"], [t, qid, str(p["offset"])])
            if g is not None:
                c.eq(("get", t, qid, p["offset"]), [p["status"], p["nextBeginOffset"], p["phyOffsets"]],
                     [g.get("status"), g.get("nextBeginOffset"), [m["commitLogOffset"] for m in g.get("messages", [])]])
        for ts, lower, _ in q["timeLookups"][:6]:
            tt = c(["time"], [t, qid, str(ts)])
            if tt is not None:
                c.eq(("time", t, qid, ts), lower, tt.get("offset"))
    scanned = {(a["topic"], a["queueId"]) for a in j.get("compacted", {}).get("afterScan", [])}
    for q in j.get("compacted", {}).get("queues", [])[:6]:   # a compacted topic's get --broker: its compacted view
        if (q["topic"], q["queueId"]) in scanned:   # (no log on disk: answered as after the broker's topic scan)
            continue
        t, qid, walk, probes = q["topic"], str(q["queueId"]), q["walk"], q["probes"]
        for p, n in [(walk[0], 32), (walk[-1], 32)] + [(x["page"], x["maxNum"]) for x in probes[::max(1, len(probes) // 4)]]:
            g = c(["get", "--broker", "--count", str(n)], [t, qid, str(p["offset"])])
            if g is not None:
                c.eq(("get compacted", t, qid, p["offset"], n), [p["status"], p["nextBeginOffset"], p["phyOffsets"], p["queueOffsets"]],
                     [g.get("status"), g.get("nextBeginOffset"), [m["commitLogOffset"] for m in g.get("messages", [])],
                      [m["queueOffset"] for m in g.get("messages", [])]])
    for k in j["keyQueries"][::6]:
        qk = c(["query-key", "--raw"], [k["topic"], k["key"]])
        if qk is not None:
            c.eq(("query-key --raw", k["topic"], k["key"]), [k["phyOffsets"], k["queryOffset"]],
                 [[m["commitLogOffset"] for m in qk.get("messages", [])], qk.get("offsets")])
    return c


def main(argv: list[str]) -> int:
    store, label = Path(argv[0]), argv[2]
    j, geo = load(argv[1]), json.loads((Path(store) / "geo.json").read_text(encoding="utf-8"))
    before = digest(store)
    with MessageStore.open(store) as s:
        bad = [("warning", w) for w in s.warnings if not w.startswith(CRASH_VIEW_WARNING)]
        d = compare(s, geo, j)
    bad += d.bad + ([("engine wrote", "open and queries")] if digest(store) != before else [])
    counts = {"engine": d.count}
    if "--no-cli" not in argv:
        c = cli_checks(store, geo, j)
        bad += c.bad
        counts["cli"] = c.count
    with open(f"{label}.mismatches.jsonl", "w", encoding="utf-8") as f:
        for b in bad:
            f.write(json.dumps(b, ensure_ascii=False, default=str) + "\n")
    print(json.dumps({"label": label, "compared": counts, "mismatched": len(bad)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
