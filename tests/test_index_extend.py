"""An index file shorter than the configured size (a crash or a copy cut it): a read-write open
(`rmqstore recover`) extends it with zeros first, as RocketMQ 4.9.7's IndexFile does by mapping
it READ_WRITE for the configured size (MappedFile.init), and recovery's rules then apply as to
any file: after a crash one newer than the checkpoint's indexMsgTimestamp is deleted and its
records re-indexed; otherwise it is kept, and the entries past its old end stay lost. The dry
run (a read-only open) lists it and writes nothing. Real fixture copies throughout."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import key_answers, tolerant_check, unpack
from engine import MessageStore
from engine.cli.app import main
from engine.store.index_service import IndexService
from engine.tasks import run
from reliability.relsupport import tree_digest

HALF = 5416 // 2   # the fixtures' index files: maxHashSlotNum 64, maxIndexNum 256


def _copy(name: str, dst):
    subprocess.run(["cp", "-a", "--sparse=always", str(unpack(name)), str(dst)], check=True)
    return dst


def _cut_last_index_file(root, size: int = HALF):
    f = sorted((root / "index").iterdir())[-1]
    os.truncate(f, size)
    return f


def _cli(capsys, *args) -> tuple[int, dict | str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and "--json" in args else err)


@pytest.fixture
def recovered(tmp_path, capsys):
    """The fixture recovered untouched (rmqstore recover): what a cut store must recover to."""
    def make(name: str):
        root = _copy(name, tmp_path / f"{name}-untouched")
        assert _cli(capsys, "recover", str(root))[0] == 0
        return root
    return make


@pytest.mark.parametrize("name", ["crashed", "v5_crashed"])
def test_a_crashed_store_with_its_last_index_file_cut_recovers_as_if_whole(tmp_path, capsys, recovered, name):
    root = _copy(name, tmp_path / name)
    cut = _cut_last_index_file(root)
    before = tree_digest(root)
    code, dry = _cli(capsys, "recover", str(root), "--dry-run", "--json")
    assert code == 0, dry
    assert tree_digest(root) == before, "the dry run wrote"
    with MessageStore.open(unpack(name), served_view=False) as s:
        end_ts = s.index.files[-1].header.endTimestamp
    assert dry["plan"]["indexFilesExtended"] == [{"file": cut.name, "size": HALF, "extendedTo": 5416,
                                                  "endTimestamp": end_ts, "deleted": True}]
    assert dry["indexFilesExtended"] == [cut.name] and cut.name in dry["indexFilesRebuilt"]
    code, done = _cli(capsys, "recover", str(root), "--json")
    assert code == 0, done
    assert done["indexFilesExtended"] == [cut.name] and cut.name in done["indexFilesRebuilt"]
    assert done["plan"]["indexFilesExtended"] == dry["plan"]["indexFilesExtended"]
    assert not (root / "index" / cut.name).exists()   # deleted by the crash rule, its records re-indexed
    rep = tolerant_check(root)
    assert rep["ok"] and rep["problemCount"] == 0 and not rep["recoveryPending"], rep["problems"][:3]
    assert key_answers(name, root) == key_answers(name, recovered(name))


def test_a_cut_index_file_after_a_clean_shutdown_is_extended_and_kept(tmp_path, capsys):
    """No abort: RocketMQ keeps every index file, this one with a zero tail. Its entries past
    the cut are lost, and check says so after the recovery as before it."""
    root = _copy("small", tmp_path / "small")
    cut = _cut_last_index_file(root)
    rep = tolerant_check(root)
    assert not rep["ok"]
    said = [p["detail"] for p in rep["problems"] if p["kind"] == "index-file" and cut.name in p["detail"]]
    assert said and "extends it with zeros and keeps it" in said[0]
    code, dry = _cli(capsys, "recover", str(root), "--dry-run", "--json")
    assert code == 0, dry
    assert dry["plan"]["indexFilesExtended"][0]["deleted"] is False and dry["indexFilesRebuilt"] == []
    code, done = _cli(capsys, "recover", str(root), "--json")
    assert code == 0, done
    assert done["indexFilesExtended"] == [cut.name] and done["indexFilesRebuilt"] == []
    assert cut.stat().st_size == 5416
    with MessageStore.open(root) as s:
        assert s.index.files[-1].name == cut.name and not s.index.refused
    after = tolerant_check(root)
    assert not after["ok"], "entries the cut took are lost: check must not call the store OK"
    assert all(cut.name in p["file"] for p in after["problems"] if p["kind"] == "index-chain")
    missing = [p for p in after["problems"] if p["kind"] == "index-missing"]
    assert missing
    with MessageStore.open(root) as s:   # and it is real: the key named cannot be found
        m = s.commitlog.get_message(missing[0]["offset"])
        key = missing[0]["detail"].split("'")[1]
        assert m.physicalOffsetField not in [x.commitLogOffset for x in s.query_message(m.topic, key).messages]
    code, again = _cli(capsys, "recover", str(root), "--json")   # nothing left to extend
    assert code == 0 and again["indexFilesExtended"] == [] and again["plan"]["indexFilesExtended"] == []
    twin = _copy("small", tmp_path / "twin")   # killed right after the extension, then recovered
    _cut_last_index_file(twin)
    _open_killed_at(twin, -1)
    assert _cli(capsys, "recover", str(twin))[0] == 0
    assert key_answers("small", twin) == key_answers("small", root)


def _progress_points(root) -> int:
    n = [0]
    run(MessageStore.open_task(root, read_only=False), lambda p: n.__setitem__(0, n[0] + 1)).close()
    return n[0]


class _Killed(Exception):
    pass


def _open_killed_at(root, k: int) -> None:
    """A read-write open stopped at its k-th progress report (-1: right after the index load
    extended the file, before the plan): the open's generator is dropped there, as a kill
    leaves it (the maps' pages stay written; no close of the session, `abort` stays)."""
    if k < 0:
        with MessageStore.open(root, served_view=False) as probe:
            cfg = probe.cfg
        short = {f: f.read_bytes() for f in (root / "index").iterdir() if f.stat().st_size < cfg.index_file_size}
        index = IndexService(cfg, writable=True).load()
        assert [(f.name, len(b)) for f, b in short.items()] == index.extended_files
        index.close()
        for f, had in short.items():   # the bytes it had, then zeros
            data = f.read_bytes()
            assert len(data) == cfg.index_file_size and data[:len(had)] == had and not any(data[len(had):])
        return
    seen = [0]

    def at(p):
        seen[0] += 1
        if seen[0] > k:
            raise _Killed()
    task = MessageStore.open_task(root, read_only=False)
    with pytest.raises(_Killed):
        run(task, at)
    task.close()


def test_a_recovery_killed_at_any_point_then_run_again_loses_nothing(tmp_path, capsys, recovered):
    """The extension comes first (fsynced before the plan), and a second load finds a file of
    the configured size: whatever point a kill stops the recovery at, the next one ends where
    a recovery of the uncut store ends."""
    want = key_answers("crashed", recovered("crashed"))
    points = _progress_points(_copy("crashed", tmp_path / "count"))
    assert points > 3
    for k in range(-1, points):
        root = _copy("crashed", tmp_path / f"k{k}")
        cut = _cut_last_index_file(root)
        _open_killed_at(root, k)
        assert (root / "abort").exists()
        assert not (root / "index" / cut.name).exists() or cut.stat().st_size == 5416
        code, done = _cli(capsys, "recover", str(root), "--json")
        assert code == 0, done
        assert done["indexFilesExtended"] == [], k   # done once, by the killed open
        rep = tolerant_check(root)
        assert rep["ok"] and rep["problemCount"] == 0, (k, rep["problems"][:3])
        assert key_answers("crashed", root) == want, k


@pytest.mark.parametrize("how", ["longer", "no whole header"])
def test_an_index_file_rocketmq_would_map_otherwise_is_still_refused(tmp_path, capsys, how):
    """Longer than configured (RocketMQ maps its first fileSize bytes; no crash grows a file:
    other settings) or cut inside its 40-byte header (its fields would be half zeros):
    recover refuses, exit 2, and changes nothing."""
    root = _copy("crashed", tmp_path / "c")
    f = sorted((root / "index").iterdir())[-1]
    if how == "longer":
        with open(f, "ab") as fh:
            fh.write(b"\0" * 20)
    else:
        os.truncate(f, 20)
    before = tree_digest(root)
    code, err = _cli(capsys, "recover", str(root))
    assert code == 2 and "index file" in err and f.name in err, err
    if how == "no whole header":
        assert "40-byte header" in err
    assert tree_digest(root) == before
