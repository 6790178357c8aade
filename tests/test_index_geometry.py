"""Index geometry (maxHashSlotNum, maxIndexNum) found from the index files, with no settings.

Stores are written with odd geometries, including ones whose size also fits the default
4 x ratio (106 slots / 403 entries = 8484 bytes = 101 / 404), where a size-only rule reads
every key wrong."""
import json

import pytest

from engine.cli import app as cli

from engine.store import index_geometry
from engine.config import StoreConfig
from engine.errors import ConfigError
from engine.store.message_store import MessageStore

from conftest import unpack

GEOMETRIES = [(101, 400), (106, 403), (7, 1000), (1000, 50), (5, 6), (3, 4000)]


def write_store(root, slots, entries, messages):
    cfg = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 6000,
                                    "maxHashSlotNum": slots, "maxIndexNum": entries})
    with MessageStore.create(root, cfg) as st:
        for i in range(messages):
            st.put_message("TopicA", b"x" * 40, None, "tag", [f"k{i}", f"g{i % 7}"])
    return cfg


def tree_state(root):
    """Every file's bytes and mtime: a refused command must change none."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def answers(store, messages):
    return [sorted(m.commitLogOffset for m in store.query_message("TopicA", k, max_num=0).messages)
            for k in [f"k{i}" for i in range(messages)] + [f"g{i}" for i in range(7)]]


@pytest.mark.parametrize("slots,entries", GEOMETRIES)
def test_store_opens_with_no_settings_and_answers_exactly(tmp_path, slots, entries):
    root = tmp_path / "s"
    cfg = write_store(root, slots, entries, 150)
    with MessageStore.open(root, config=cfg) as st:
        expected = answers(st, 150)
    assert all(expected[:150]) and sum(map(len, expected[150:])) == 150
    with MessageStore.open(root) as st:
        assert (st.cfg.maxHashSlotNum, st.cfg.maxIndexNum) == (slots, entries)
        assert "maxHashSlotNum" in st.cfg.detected and st.info()["configSources"]["maxIndexNum"] == "files"
        assert answers(st, 150) == expected
        assert not st.warnings
    # and read-write (a put lands where RocketMQ would look)
    with MessageStore.open(root, read_only=False) as st:
        st.put_message("TopicA", b"y", None, "tag", ["late"])
    with MessageStore.open(root, config=cfg) as st:
        assert len(st.query_message("TopicA", "late", max_num=0).messages) == 1


def test_size_only_rule_would_misread(tmp_path):
    """106/403 is 8484 bytes, which the default ratio reads as 101/404: the entries decide."""
    assert index_geometry.Geometry(106, 403).file_size == index_geometry.Geometry(101, 404).file_size
    write_store(tmp_path / "s", 106, 403, 40)
    verdict = index_geometry.read_store(tmp_path / "s" / "index")
    assert verdict.geometry == index_geometry.Geometry(106, 403)
    assert verdict.files[0].via == "header"


@pytest.mark.parametrize("slots,entries", GEOMETRIES)
def test_header_never_written_is_decided_by_a_scan(tmp_path, slots, entries):
    write_store(tmp_path / "s", slots, entries, 60)
    files = sorted((tmp_path / "s" / "index").iterdir())
    for f in files:
        with open(f, "r+b") as fh:
            fh.write(bytes(40))  # a crashed writer's header: never flushed
        v = index_geometry.read_file(f)
        assert v.geometry == index_geometry.Geometry(slots, entries), (f.name, v)
        assert v.via == "scan"


def test_damaged_entries_fit_no_geometry(tmp_path):
    write_store(tmp_path / "s", 101, 400, 60)
    f = sorted((tmp_path / "s" / "index").iterdir())[0]
    with open(f, "r+b") as fh:   # every slot points past the entries
        fh.seek(40)
        fh.write(b"\x7f\xff\xff\xff" * 101)
    v = index_geometry.read_file(f)
    assert v.geometry is None and "no geometry fits" in v.problem


def test_empty_index_files_are_undecided(tmp_path):
    root = tmp_path / "s"
    cfg = write_store(root, 101, 400, 5)
    for f in (root / "index").iterdir():  # same size, no entries
        f.write_bytes(bytes(f.stat().st_size))
    with MessageStore.open(root) as st:  # a reader loses nothing: there is nothing to read
        assert any("cannot be decided" in w for w in st.warnings)
        assert st.query_message("TopicA", "k1", max_num=0).messages == []
    before = tree_state(root)
    with pytest.raises(ConfigError) as e:  # a writer would put entries where RocketMQ does not look
        MessageStore.open(root, read_only=False)
    assert "pairs fit" in str(e.value) and "maxHashSlotNum=" in str(e.value)
    assert tree_state(root) == before  # refused before anything was written
    with MessageStore.open(root, config=cfg, read_only=False) as st:
        st.put_message("TopicA", b"y", None, "tag", ["late"])


def test_size_fitting_nothing_is_refused_clearly(tmp_path):
    root = tmp_path / "s"
    write_store(root, 101, 400, 5)
    for f in (root / "index").iterdir():
        f.write_bytes(bytes(8443))
    with pytest.raises(ConfigError, match="fits no index geometry"):
        MessageStore.open(root)


@pytest.mark.parametrize("name,slots,entries", [("small", 64, 256), ("default", 5_000_000, 20_000_000),
                                                ("v5", 64, 256), ("crashed", 64, 256)])
def test_rocketmq_written_index_files(name, slots, entries):
    verdict = index_geometry.read_store(unpack(name) / "index")
    assert verdict.geometry == index_geometry.Geometry(slots, entries)


def test_cli_needs_no_set(tmp_path, capsys):
    root = tmp_path / "s"
    write_store(root, 106, 403, 30)
    assert cli.main(["query-key", str(root), "TopicA", "k7", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["messages"]) == 1 and out["messages"][0]["keys"] == "k7 g0"


@pytest.mark.parametrize("at", [0, 1, 4095, 4096, 4097, 12287, 12288, 70000, 299_999])
def test_last_nonzero_word_anywhere_in_a_big_zero_tail(tmp_path, at):
    """The backward scan (doubling chunks, then 4096 words at a time inside the chunk that holds
    data) finds the last non-zero word wherever it lies, in a dense file and a sparse one."""
    import os
    import numpy as np
    from engine.files.mapped_file import map_for_reading
    n = 300_000
    for sparse in (False, True):
        p = tmp_path / f"f{at}-{sparse}"
        data = np.zeros(n, dtype=">i4")
        data[at] = -7
        data[at // 3] = 1
        if sparse:
            with open(p, "wb") as fh:
                fh.truncate(40 + 4 * n)
                fh.seek(40 + 4 * (at // 3))
                fh.write(data[at // 3:at + 1].tobytes())
        else:
            p.write_bytes(bytes(40) + data.tobytes())
        fd = os.open(p, os.O_RDONLY)
        try:
            mm = map_for_reading(fd, 40 + 4 * n)
            words = np.frombuffer(mm, dtype=">i4", offset=40, count=n)
            assert index_geometry._last_nonzero_word(fd, words) == at
            del words
            mm.close()
        finally:
            os.close(fd)
