"""One slot's index chain resolved to messages: which entries are the query's hits, which are
true collisions (the same 32-bit keyHash for different keys, a hash-only query cannot tell them
apart) and which only share the slot (a different keyHash)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.format.javahash import index_key_hash
from engine.store.index_file import ChainStep

MATCH = "match"             # the query's key: a query returns it and it is that key
COLLISION = "collision"     # same keyHash as another key: a hash-only query cannot tell them apart
SAME_KEY = "same-key"       # same keyHash and the same key as another entry (a key used again)
SHARES_SLOT = "shares-slot"  # different keyHash, only the slot is shared
UNRESOLVED = "unresolved"   # no message there, or none of its keys hashes to keyHash


@dataclass
class ResolvedEntry:
    step: ChainStep
    position: int                  # 0 = head of the chain (newest)
    topic: str | None              # of the message at commitLogOffset
    queue_id: int | None
    queue_offset: int | None
    store_timestamp: int | None
    keys: list[str]                # "topic#key" strings of that message whose hash == keyHash
    kind: str = SHARES_SLOT
    query_hit: bool = False        # select() for the query key returns this entry
    hash_group: int = -1           # entries with equal keyHash share a group number (>= 0 if 2+)

    @property
    def label(self) -> str:
        return " | ".join(self.keys) if self.keys else "(key not found)"


@dataclass
class ChainResolution:
    file_name: str
    slot: int
    head: int                      # the slot's value: newest entry number (0 = empty)
    entries: list[ResolvedEntry]
    stop: str                      # why the walk ended
    broken: bool                   # a link points outside the file's entries
    cycle_to: int | None           # entry number a cycle links back to
    query: str | None = None
    query_hash: int | None = None

    @property
    def matches(self) -> list[ResolvedEntry]:
        return [e for e in self.entries if e.kind == MATCH]

    @property
    def hits(self) -> list[ResolvedEntry]:
        return [e for e in self.entries if e.query_hit]


def resolve_chain(f, slot: int | None = None, key: str | None = None, get_message=None,
                  limit: int = 1000) -> ChainResolution:
    """Walk a slot's chain (or the slot of "topic#key") and resolve each entry.

    `get_message(commitLogOffset)` returns an engine Message or None. With a key, entries are
    `query_hit` when IndexFile.select(key, ...) over all time would return them; of those,
    MATCH when the message really carries the key, COLLISION otherwise."""
    qhash = index_key_hash(key) if key is not None else None
    if slot is None:
        if key is None:
            raise ValueError("give a slot or a key")
        slot = qhash % f.slot_num
    if not 0 <= slot < f.slot_num:
        raise ValueError(f"slot {slot} is outside 0..{f.slot_num - 1}")
    head = int(f.slots[slot])
    count = f.header.indexCount
    steps = f.chain(slot, limit=limit) if head > 0 else []
    if head <= 0:
        stop = "empty slot"
    elif not steps:
        stop = f"slot points to entry {head} beyond indexCount {count}"
    else:
        stop = steps[-1].stop or "end of chain"
    broken = "beyond" in stop
    cycle_to = int(stop.rsplit(" ", 1)[1]) if stop.startswith("cycle back to entry") else None
    out: list[ResolvedEntry] = []
    for i, s in enumerate(steps):
        m = get_message(s.commitLogOffset) if get_message is not None else None
        keys: list[str] = []
        if m is not None:
            cands = ([m.uniqKey] if m.uniqKey else []) + list(m.key_list)
            for k in cands:
                ks = f"{m.topic}#{k}"
                if ks not in keys and index_key_hash(ks) == s.keyHash:
                    keys.append(ks)
        out.append(ResolvedEntry(s, i, m.topic if m else None, m.queueId if m else None,
                                 m.queueOffset if m else None, m.storeTimestamp if m else None, keys))
    # groups of equal keyHash; a group whose entries carry different keys is a true collision
    by_hash: dict[int, list[ResolvedEntry]] = {}
    for e in out:
        by_hash.setdefault(e.step.keyHash, []).append(e)
    gid = 0
    for h, group in by_hash.items():
        if len(group) < 2 and h != qhash:
            continue
        if len(group) >= 2:
            for e in group:
                e.hash_group = gid
            gid += 1
        keysets = {tuple(e.keys) for e in group if e.keys}
        for e in group:
            if len(keysets) > 1:
                e.kind = COLLISION
            elif len(group) >= 2:
                e.kind = SAME_KEY
    # what a query for `key` would match: select() over all time walks until timeDiff < 0
    if key is not None:
        alive = True
        for e in out:
            if e.step.timeDiff < 0:
                alive = False
            e.query_hit = alive and e.step.keyHash == qhash
            if e.step.keyHash == qhash:
                e.kind = MATCH if key in e.keys else COLLISION
    for e in out:
        if not e.keys:
            e.kind = UNRESOLVED
    return ChainResolution(f.name, slot, head, out, stop, broken, cycle_to, key, qhash)
