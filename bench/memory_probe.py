"""Run in a fresh process: open a store read-only, browse (first, middle and last page of
every queue, each message's properties and body touched), query keys; print peak RSS.

VmHWM is the peak resident set; it counts the store's pages mapped into the process
(RssFile, page cache that the kernel can drop at any time) as well as the heap (RssAnon)."""
from __future__ import annotations

import json
import sys


def status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
    return out


def main(root: str) -> None:
    from engine import MessageStore
    before = status()
    pages = queries = 0
    with MessageStore.open(root) as store:
        after_open = status()
        for (topic, qid), cq in sorted(store.queues.items()):
            for off in (cq.min_offset, (cq.min_offset + cq.max_offset) // 2, max(cq.min_offset, cq.max_offset - 32)):
                r = store.get_message(topic, qid, off, 32)
                for m in r.messages:
                    m.to_json()
                pages += 1
        for t in sorted({t for t, _ in store.queues}):
            for k in range(1, 2000, 97):
                store.query_message(t, f"batch-{k}", max_num=64)
                queries += 1
        end = status()
    print(json.dumps({"VmHWM": end["VmHWM"], "rssAtStart": before["VmRSS"], "rssAfterOpen": after_open["VmRSS"],
                      "rssAnonAtEnd": end["RssAnon"], "rssFileAtEnd": end["RssFile"], "pages": pages,
                      "queries": queries}))


if __name__ == "__main__":
    main(sys.argv[1])
