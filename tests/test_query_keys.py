"""Many keys at once: MessageStore.query_messages (the batched index walk, each candidate checked)
against query_message key by key on the real RocketMQ stores, and the `query-keys` command."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import defaultdict

import pytest

from conftest import CLEAN, manifest, unpack
from engine import MessageStore


def _pairs(name: str) -> dict[str, list[str]]:
    kq = manifest(name)["key_queries"]
    pairs = [(q["topic"], q["key"]) for q in kq] if isinstance(kq, list) else [p[:2] for p in kq["all_pairs"]]
    by_topic = defaultdict(list)
    for topic, key in pairs:
        by_topic[topic].append(key)
    return by_topic


def _same(a, b) -> bool:
    return (a.offsets, a.false_hits, a.truncated, a.indexLastUpdateTimestamp, a.indexLastUpdatePhyoffset) == \
        (b.offsets, b.false_hits, b.truncated, b.indexLastUpdateTimestamp, b.indexLastUpdatePhyoffset)


@pytest.mark.parametrize("name", CLEAN + ["dledger", "crashed"])
def test_query_messages_is_query_message_for_each_key(name):
    with MessageStore.open(unpack(name)) as store:
        for topic, keys in _pairs(name).items():
            keys = keys + ["no-such-key", keys[0]]   # an absent key, a key twice
            times = sorted(m.storeTimestamp for m in store.query_message(topic, keys[0], max_num=0).messages)
            for begin, end, max_num in ((0, 2**63 - 1, 64), (times[0] + 1, times[-1], 1), (0, 2**63 - 1, 0)):
                got = store.query_messages(topic, keys, begin, end, max_num)
                want = [store.query_message(topic, k, begin, end, max_num) for k in keys]
                assert len(got) == len(keys)
                assert all(_same(g, w) for g, w in zip(got, want)), (topic, begin, end, max_num)
            assert store.query_messages(topic, []) == []


def _run(*argv, stdin=None):
    p = subprocess.run([sys.executable, "-m", "engine", *map(str, argv)], capture_output=True, text=True,
                       timeout=60, input=stdin)
    return p.returncode, p.stdout, p.stderr


def _tree(root):
    return {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_query_keys_command(tmp_path):
    root = unpack("default")
    topic, keys = next(iter(_pairs("default").items()))
    keys = keys[:20]
    before = _tree(root)
    kf = tmp_path / "keys.txt"
    kf.write_text("\n".join(keys + ["", "no-such-key"]) + "\n")
    rc, out, err = _run("query-keys", root, topic, kf, "--json")
    assert rc == 1, err   # one key is not there
    d = json.loads(out)
    assert (d["keys"], d["found"], d["missing"]) == (len(keys) + 1, len(keys), ["no-such-key"])
    with MessageStore.open(root) as store:
        for a in d["answers"][:-1]:
            r = store.query_message(topic, a["key"])
            assert a["offsets"] == r.offsets and a["storeTimestamps"] == [m.storeTimestamp for m in r.messages]
    rc, out, err = _run("query-keys", root, topic, "-", stdin="\n".join(keys))   # standard input, every key found
    assert rc == 0 and out.strip().endswith(f"({len(keys)} of {len(keys)} keys found)")
    rc, out, err = _run("query-keys", root, topic, tmp_path / "absent.txt")
    assert rc == 2 and "cannot read the key file" in err and "Traceback" not in err
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00k")
    rc, out, err = _run("query-keys", root, topic, tmp_path / "bin.txt")
    assert rc == 2 and "not UTF-8" in err and "Traceback" not in err
    assert _tree(root) == before   # read-only: not one byte written
