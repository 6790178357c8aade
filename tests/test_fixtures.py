"""The conformance fixtures live in the repository (tests/fixtures): every one the suite and later
work use is present, every archive is a sparse tarball holding exactly its store folder, every
manifest decompresses to JSON. A missing fixture fails here (and in every test that unpacks it)."""
from __future__ import annotations

import tarfile

import pytest

from conftest import (ALL_FIXTURES, CLEAN, EVERY_FIXTURE, CRASHED, FIXTURE_DIR, FIXTURE_READMES, FIXTURES, archive_path,
                      manifest_path, read_manifest)


def test_every_listed_fixture_is_present():
    missing = [str(p) for n in EVERY_FIXTURE for p in (archive_path(n), manifest_path(n)) if not p.is_file()]
    missing += [str(FIXTURE_DIR / r) for r in FIXTURE_READMES if not (FIXTURE_DIR / r).is_file()]
    assert not missing, missing
    assert set(CLEAN) | set(CRASHED) <= set(FIXTURES)
    assert len(set(ALL_FIXTURES)) == len(ALL_FIXTURES) == 16
    assert len(set(EVERY_FIXTURE)) == len(EVERY_FIXTURE) == 19


def test_nothing_unlisted_in_the_fixture_folder():
    listed = {archive_path(n).name for n in EVERY_FIXTURE} | {manifest_path(n).name for n in EVERY_FIXTURE}
    listed |= set(FIXTURE_READMES)
    assert sorted(p.name for p in FIXTURE_DIR.iterdir() if p.name not in listed) == []


@pytest.mark.parametrize("name", EVERY_FIXTURE)
def test_manifest_decompresses_to_json(name):
    doc = read_manifest(name)
    assert isinstance(doc, dict) and doc


@pytest.mark.parametrize("name", EVERY_FIXTURE)
def test_archive_holds_its_store_folder(name):
    with tarfile.open(archive_path(name), "r:gz") as tf:
        members = tf.getmembers()
    assert members
    assert {m.name.split("/", 1)[0] for m in members} == {name}
    assert all(not m.name.startswith("/") and ".." not in m.name.split("/") for m in members)
    names = {m.name for m in members}  # a store folder as the store left it (a tier's beside its store/)
    assert f"{name}/lock" in names or f"{name}/store/lock" in names
