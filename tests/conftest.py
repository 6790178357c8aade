import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import ctypes
import fcntl
import gc
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The conformance fixtures: stores written by the real RocketMQ 4.9.7 / 5.3.3 (sparse tarballs,
# byte-identical to the originals) and what RocketMQ answered about them (xz-compressed JSON
# manifests). See tests/fixtures/README.md.
FIXTURE_DIR = ROOT / "tests" / "fixtures"
UNPACKED = ROOT / "build" / "conformance"
FIXTURES = ["small", "default", "v5", "crashed", "crashed_live", "crashed_torn", "crashed_badcrc", "v5_crashed"]
CLEAN = ["small", "default", "v5"]
CRASHED = ["crashed", "crashed_live", "crashed_torn", "crashed_badcrc", "v5_crashed"]
# in tests/fixtures too, described by README_DLEDGER.md / README_5X_LAYOUTS.md
MORE_FIXTURES = ["dledger", "dledger_crashed", "dledger_mixed", "dledger_terms", "v5_timer", "v5_lmq", "v5_rocksdb_cq", "v5_batchcq"]
ALL_FIXTURES = FIXTURES + MORE_FIXTURES
# manifests of a shape of their own (README_LINEAGE.md): kept apart from the tests that read ALL_FIXTURES' manifests
SHAPED_APART = ["lineage", "tiered_store", "compaction_store"]  # + README_TIERED.md, README_COMPACTION.md
EVERY_FIXTURE = ALL_FIXTURES + SHAPED_APART
FIXTURE_READMES = ["README.md", "README_5X_LAYOUTS.md", "README_DLEDGER.md", "README_LINEAGE.md", "README_TIERED.md",
                    "README_COMPACTION.md"]


def archive_path(name: str) -> Path:
    return FIXTURE_DIR / f"{name}.tar.gz"


def manifest_path(name: str) -> Path:
    return FIXTURE_DIR / f"{name}.manifest.json.xz"


def _require(path: Path) -> Path:
    """A missing fixture fails the test (or the collection), it never skips."""
    if not path.is_file():
        pytest.fail(f"conformance fixture missing: {path} (tests/fixtures must hold every fixture)",
                    pytrace=False)
    return path


_unpacked: dict[str, Path] = {}


def unpack(name: str, folder: Path = FIXTURE_DIR) -> Path:
    """The pristine fixture folder (unpacked once per checkout, sparse). Never write to it:
    tests that modify a store use `fixture_copy`. `folder`: where NAME.tar.gz is (the
    conformance fixtures, or tests/differential's stores)."""
    if name in _unpacked:
        return _unpacked[name]
    archive = _require(folder / f"{name}.tar.gz")
    target = UNPACKED / name
    stamp = UNPACKED / f".{name}.stamp"
    key = hashlib.sha256(archive.read_bytes()).hexdigest()
    UNPACKED.mkdir(parents=True, exist_ok=True)
    # several pytest runs may share a checkout: one unpacks, the others wait for it
    with open(UNPACKED / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == key and target.is_dir()):
            stamp.unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=True)
            tmp = UNPACKED / f".{name}.unpacking"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            subprocess.run(["tar", "--sparse", "-xzf", str(archive), "-C", str(tmp)], check=True)
            (tmp / name).rename(target)
            tmp.rmdir()
            stamp.write_text(key)
    _unpacked[name] = target
    return target


def read_manifest(name: str) -> dict:
    """The manifest, decompressed and parsed afresh (not cached)."""
    with lzma.open(_require(manifest_path(name)), "rt", encoding="utf-8") as fh:
        return json.load(fh)


@lru_cache(maxsize=None)
def manifest(name: str) -> dict:
    return read_manifest(name)


def tolerant_check(root) -> dict:
    """check's report as the CLI makes it (its tolerant open: engine/cli/app.py)."""
    from engine import MessageStore
    from engine.analysis import check_store
    with MessageStore.open(root, tolerant=True) as s:
        return check_store(s)


def key_answers(name: str, root) -> list:
    """Every key case and pair of fixture `name`'s manifest as a read-only open of `root`
    answers it: queryOffset, the raw queryMessage and the exact answer with its lost marks."""
    from engine import MessageStore
    from engine.store.index_file import LONG_MAX
    m, out = manifest(name), []
    with MessageStore.open(root) as s:
        for c in m["key_queries"]["cases"]:
            args = c["topic"], c["key"], c["begin"], c["end"], c["maxNum"]
            exact = s.query_message(*args)
            out.append((s.index.query_offset(c["topic"], c["key"], c["maxNum"], c["begin"], c["end"])[0],
                        [x.commitLogOffset for x in s.query_message(*args, raw=True).messages],
                        [x.commitLogOffset for x in exact.messages], sorted(exact.index_lost)))
        out += [s.index.query_offset(topic, key, 64, 0, LONG_MAX)[0]
                for topic, key, _src, _ in m["key_queries"]["all_pairs"]]
    return out


def data_ranges(path) -> list[tuple[int, int]]:
    """A file's data extents (SEEK_DATA/SEEK_HOLE; dirty mapped pages count as data), widened to
    whole 4 KiB blocks. Everything else is a hole and reads as zeros."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size, pos = os.fstat(fd).st_size, 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only holes left
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start - start % 4096, end))
            pos = end
    finally:
        os.close(fd)
    return out


def assert_same_file_bytes(a, b) -> None:
    """Files a and b hold the same bytes. Only the blocks where either has data are read, 16 MiB
    at a time: a default-size store's files (1 GiB commitlog, 420 MB index) are almost all
    holes, and reading them whole costs their full size in memory."""
    sa, sb = os.path.getsize(a), os.path.getsize(b)
    assert sa == sb, f"{a}: size {sa} != {sb}"
    with open(a, "rb", buffering=0) as fa, open(b, "rb", buffering=0) as fb:
        pos = 0
        for start, end in sorted(data_ranges(a) + data_ranges(b)):
            start = max(start, pos)
            while start < end:
                n = min(end, start + (16 << 20)) - start
                assert os.pread(fa.fileno(), n, start) == os.pread(fb.fileno(), n, start), \
                    f"{a} and {b} differ in [{start}, {start + n})"
                start = pos = start + n


@pytest.fixture
def fixture_copy(tmp_path):
    """A private, writable copy of a fixture (sparse, mtimes kept)."""
    def make(name: str) -> Path:
        src = unpack(name)
        dst = tmp_path / name
        subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
        return dst
    return make


# ---- the fast subset (`make test-fast`: -m "not slow") and the order of the Spark tests ---------
# Marked `slow` here, by folder, file or file::function (every parametrization): the packaging
# builds, the reliability runs, the tests that took 2 s or more in a profile of the whole suite
# (two cores, loaded) and then 1 s or more in a run of the rest; besides them every test marked
# spark or cluster, or that needs a Spark session or the S3 server (SLOW_FIXTURES).
# `make test` runs them all.
SLOW = [
    "tests/packaging/test_pkg_bundle.py", "tests/packaging/test_pkg_wheel.py", "tests/reliability/",
    *(f"tests/accel/test_page.py::test_{t}" for t in (
        "compiled_pages_equal_reference_pages_on_fixtures", "damaged_fixture", "expired_files_and_late_queues",
        "damaged_crafted_store", "crafted_store", "crafted_store_broker_limits", "v2_refused_when_not_accepted")),
    "tests/accel/test_cq_scan.py::test_first_live_matches_numpy",
    "tests/accel/test_cq_scan.py::test_end_of_units_is_the_linear_answer_for_writer_shaped_files",
    "tests/accel/test_append.py::test_fast_and_python_paths_write_the_same_bytes",
    "tests/gui/test_gui_big_queue.py", "tests/gui/test_gui_xcb.py",
    "tests/gui/test_gui_dledger.py::test_dledger_store_browses_and_shows_its_entries",
    "tests/gui/test_gui_browser.py::test_control_characters_in_tags_and_keys_stay_on_one_line",
    "tests/gui/test_gui_browser.py::test_filter_row",
    "tests/gui/test_gui_rocksdb.py::test_rocksdb_store_internals_and_read_write_refusal",
    "tests/gui/test_gui_desktop_fixes.py::test_time_fields_take_typed_and_pasted_times_and_say_what_they_read",
    "tests/gui/test_gui_desktop_fixes.py::test_segment_fill_reaches_every_file_with_readable_names",
    "tests/gui/test_gui_polish.py::test_filter_the_whole_queue_in_the_background_and_cancel",
    "tests/gui/test_gui_check.py::test_check_dialog_lists_the_damage_and_writes_nothing",
    "tests/gui/test_gui_compare.py::test_compare_dialog_lists_what_the_copy_has_more",
    "tests/scan/test_scan_fs.py::test_ranged_reader_equals_the_mapped_one_across_windows",
    "tests/scan/test_scan_fs.py::test_fsspec_filesystems_through_pyarrow",
    "tests/scan/test_scan_fs.py::test_every_commitlog_job_equal_local",
    "tests/scan/test_scan_fs_queues.py::test_remote_dledger_store_equals_the_mapped_one",
    "tests/test_check_kernel.py::test_compiled_and_pure_reports_agree_on_damaged_stores",
    "tests/test_check_kernel.py::test_cli_progress_goes_to_stderr_only",
    *(f"tests/test_check.py::test_{t}" for t in (
        "check_runs_on_a_store_other_commands_refuse", "index_file_truncated_to_half", "cq_unit_past_the_log",
        "tags_that_no_longer_hash_to_the_units_tags_code", "index_chain_closed_into_a_cycle",
        "consumer_offset_past_the_queue", "index_file_deleted_from_the_middle")),
    "tests/test_bench_java.py::test_our_append_and_walk_sides",
    "tests/test_query_keys.py::test_query_keys_command",
    "tests/test_dledger.py::test_cli_info_get_and_refusals",
    "tests/test_dledger.py::test_read_only_open_writes_nothing_and_writes_are_refused",
    "tests/test_dledger_real.py::test_read_only_open_changes_no_byte",
    "tests/test_dledger_crash.py::test_cli_and_gui_mark_what_rocketmq_lost",
    "tests/test_dledger_crash.py::test_crash_loses_the_deleted_index_files_keys_and_reindexes_reputs",
    "tests/test_dledger_crash.py::test_units_reput_had_not_written_are_served",
    "tests/test_index_accel.py::test_copies_on_real_stores_answer_as_the_reference",
    "tests/test_live_and_cli.py::test_cli_json_contracts",
    "tests/test_live_and_cli.py::test_read_only_session_changes_not_one_byte",
    "tests/test_trust.py::test_full_tmpfs_with_sparse_files_is_an_error_never_sigbus",
    "tests/test_rocksdb_cq.py::test_cli_info_cq_check_and_scans",
    "tests/test_rocksdb_cq.py::test_writes_are_refused",
    "tests/test_query_batch.py::test_batch_equals_single_queries_on_real_stores",
    "tests/test_optional_spark.py::test_core_modules_do_not_load_pyspark_or_pyarrow",
    "tests/test_generation.py::test_every_fixture_names_the_generation_that_wrote_it",
    "tests/test_write_path.py::test_hypothesis_round_trip",
    "tests/test_one_home.py::test_cli_send_prop_refuses_a_reserved_name",
    "tests/test_message_kernel.py::test_a_single_read_is_a_snapshot_and_a_page_reads_the_map",
    "tests/test_demo_task.py::test_ctrl_c_in_the_cli_leaves_no_half_store",
    # a second round: 1 s or more in a run of the fast subset (the refusal walk: 180 cases, 16 s;
    # test_first_contact's refused sends stay in it)
    "tests/test_refusals.py::test_a_refused_write_command_changes_not_one_byte",
    "tests/scan/test_scan_planning.py::test_every_record_once_whatever_the_split",
    "tests/scan/test_scan_local.py::test_local_export_round_trips",
    "tests/scan/test_scan_local.py::test_columns_decode_every_fixture_like_the_engine",
    "tests/scan/test_scan_queue_reader.py::test_queue_records_are_what_rocketmq_dispatched",
    "tests/internals/test_big_store_views.py::test_scan_tab_local_job_answers_as_the_cli",
    "tests/internals/test_big_store_views.py::test_fill_with_a_queue_file_out_of_order",
    "tests/internals/test_views.py::test_cq_units_series_selection_and_screenshot",
    "tests/internals/test_views.py::test_slot_heatmap_numbers_histogram_and_screenshot",
    "tests/gui/test_gui_open.py::test_live_tail_follows_another_writer",
    "tests/gui/test_gui_timers.py::test_timer_messages_by_fire_time_and_where_each_one_is",
    "tests/gui/test_gui_rocksdb.py::test_rocksdb_store_browses_like_any_store",
    "tests/test_index_accel_build.py::test_builds_agree_on_real_stores",
    "tests/test_lmq_batchcq_read.py::test_cli_info_and_get_json_leave_the_store_untouched",
    "tests/test_write_path.py::test_recover_dry_run_changes_nothing",
    "tests/test_live_and_cli.py::test_send_via_cli_then_read_back",
    "tests/accel/test_cq_scan.py::test_scan_matches_numpy",
    "tests/test_trust.py::test_rebuild_without_a_terminal_needs_yes",
    "tests/test_dledger_crash.py::test_torn_last_entry_is_not_served",
    # a third round (issue 31): 1 s or more in a run of the fast subset at load 1.6-2.3 (183 s, 1,206 tests)
    "tests/test_body_decode_detect.py::test_a_value_kept_as_it_is_equals_the_converted_one",
    "tests/test_body_decode_detect.py::test_compiled_decode_raw_is_walk_score_and_to_value",
    "tests/test_body_decode_detect.py::test_compiled_to_value_is_the_pure_one",
    "tests/test_body_decode.py::test_compiled_wire_walk_is_the_pure_one",
    "tests/test_architecture.py::test_rules_shared_by_cli_and_gui_are_defined_once",
    "tests/internals/test_views.py::test_panel_heatmap_click_walks_the_chain",
    # Ctrl-C in real processes on stores big enough to be still working when it arrives (5-20 s)
    "tests/test_cli_ctrl_c.py::test_ctrl_c_cancels_check",
    "tests/test_cli_ctrl_c.py::test_ctrl_c_cancels_rebuild_and_recover_and_the_next_open_finishes",
]
SLOW_FIXTURES = {"spark", "s3_stores"}


def pytest_collection_modifyitems(config, items):
    """Mark the SLOW tests (and every Spark one) `slow`. Then order the Spark tests so the shared
    local session's JVM starts once a run: the tests that stop it (marked restarts_spark) after
    its last other user, and the cluster tests (their own Spark master and worker, or Connect
    server, which stop it too) after them."""
    slow = pytest.mark.slow
    for item in items:
        node = item.nodeid.split("[")[0]
        if item.get_closest_marker("spark") or item.get_closest_marker("cluster") or \
                SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or \
                any(node == s or (s.endswith(("/", ".py")) and node.startswith(s)) for s in SLOW):
            item.add_marker(slow)
    late = [i for i in items if i.get_closest_marker("restarts_spark")] + \
        [i for i in items if i.get_closest_marker("cluster")]
    rest = [i for i in items if not (i.get_closest_marker("restarts_spark") or i.get_closest_marker("cluster"))]
    last = max((n for n, i in enumerate(rest) if "spark" in getattr(i, "fixturenames", ())), default=None)
    if late and last is not None:
        items[:] = rest[:last + 1] + late + rest[last + 1:]
    if os.environ.get(_GROUPS_ENV) and hasattr(config, "workerinput"):
        _xdist_groups(items)


# ---- pytest-xdist (`make test`: -n 2 --dist loadgroup) -------------------------------------------
# Every test that touches Spark (the process's one session and JVM, and the cluster and Connect
# servers that stop it) runs on one worker, in the order above; the reliability tests on one
# worker (one process writes their report); each other file's tests together on one worker (a
# module fixture such as the wheel or the bundle build is made once). The longest shares are
# handed out first: Spark, reliability, packaging, then the rest in collection order.
# xdist's own loadgroup reads `xdist_group` marks through item._nodeid, which pytest 9 no longer
# uses, so the workers write each test's group to a file and the scheduler below reads it.
_GROUPS_ENV = "RMQSTORE_XDIST_GROUPS"


def _group_of(item) -> str:
    rel = item.path.relative_to(ROOT).as_posix()
    if item.get_closest_marker("spark") or item.get_closest_marker("cluster") or \
            item.get_closest_marker("restarts_spark") or "spark" in getattr(item, "fixturenames", ()):
        return "spark"
    return "tests/reliability" if rel.startswith("tests/reliability/") else rel


def _xdist_groups(items) -> None:
    """On a worker: order the items by share (see above) and write {nodeid: group}."""
    groups = {id(i): _group_of(i) for i in items}
    first = {g: n for n, g in enumerate(dict.fromkeys(groups.values()))}

    def share(item):
        g = groups[id(item)]
        return ({"spark": 0, "tests/reliability": 1}.get(g, 2 if g.startswith("tests/packaging/") else 3), first[g])
    items.sort(key=share)   # stable: the order above holds within a group
    path = os.environ[_GROUPS_ENV]
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump({i.nodeid: groups[id(i)] for i in items}, fh)
    os.replace(tmp, path)


def pytest_configure(config):
    """On xdist's controller with --dist loadgroup: the file the workers write the groups to."""
    if getattr(config.option, "dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        import tempfile
        fd, path = tempfile.mkstemp(prefix="rmqstore-xdist-groups-", suffix=".json")
        os.close(fd)
        os.environ[_GROUPS_ENV] = path
        config.add_cleanup(lambda: os.path.exists(path) and os.unlink(path))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if getattr(config.option, "dist", "no") != "loadgroup" or not os.environ.get(_GROUPS_ENV):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByShare(LoadScopeScheduling):
        """xdist's scope scheduling with the workers' groups as the scopes, in the workers' order."""
        groups: dict | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:   # first asked once every worker's collection is in
                with open(os.environ[_GROUPS_ENV]) as fh:
                    self.groups = json.load(fh)
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False
    return ByShare(config, log)


# ---- memory: the Spark JVM lives only as long as the tests that use it -------------------------
_last_spark_user: list = []


def pytest_collection_finish(session):
    users = [i for i, item in enumerate(session.items) if "spark" in getattr(item, "fixturenames", ())]
    _last_spark_user[:] = [session.items[users[-1]]] if users else []


def pytest_runtest_teardown(item, nextitem):
    """After the last test using the `spark` fixture, stop the session and its JVM (and with it
    the Python workers): kept to the end of the run they held ~1.4 GB through every later test.
    Between test files, drop the cached manifests (~50 MB parsed; a file reads the ones it
    needs again in well under a second) and give freed heap back to the system."""
    if _last_spark_user and item is _last_spark_user[0] and "pyspark" in sys.modules:
        stop_spark()
    if nextitem is None or nextitem.path != item.path:
        manifest.cache_clear()
        gc.collect()
        _malloc_trim()


def _malloc_trim() -> None:
    try:
        ctypes.CDLL(None).malloc_trim(0)  # glibc; elsewhere nothing to do
    except (AttributeError, OSError):
        pass


def stop_spark() -> None:
    from engine.scan.spark_session import shutdown
    shutdown()   # the session, then its gateway JVM


def pytest_addoption(parser):
    parser.addoption("--soak", action="store_true", default=False, help="run the long soak/fuzz suite")


def as_typed_at_a_terminal() -> None:
    """preexec_fn for a command a Ctrl-C test starts: SIGINT at its default and not blocked, as
    in a shell. A child inherits an ignored or blocked SIGINT from the process that starts it
    (a test worker whose SIGINT some library or earlier test left ignored or masked), and the
    commands rightly leave an inherited ignored SIGINT ignored (a background job): the test
    would then see the command run to its end (seen in CI, in different tests run to run)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.fixture(autouse=True)
def _gc_on_the_ui_thread(request):
    """As the app does (gui.gc_guard): while a test has Qt up, the cyclic collector runs only on
    the main thread, from the event loop while the test waits and after it; on a pool thread it
    could finalize a Qt object of the UI thread (a CI run segfaulted so). A test without Qt gets
    the automatic collector back once no Qt pool thread is left running."""
    qt = "qtbot" in request.fixturenames or "qapp" in request.fixturenames
    if qt:
        from gui import gc_guard
        gc_guard.install(request.getfixturevalue("qapp"))
    elif "gui.gc_guard" in sys.modules and not gc.isenabled() and _qt_pools_idle():
        sys.modules["gui.gc_guard"].collect_due()
        gc.enable()
    yield
    guard = sys.modules.get("gui.gc_guard")
    if guard is not None and not gc.isenabled():
        guard.collect_due()


def _qt_pools_idle() -> bool:
    """No runnable running in Qt's global pool nor the internals views' (a test's own TaskRunner
    pools die with their widgets, and QThreadPool's destructor waits for its threads). Asked,
    not waited for: a pool busy with a long job (the Spark warm-up) keeps the collector on the
    main thread for this test, and the next one asks again."""
    from PySide6.QtCore import QThreadPool
    workers = sys.modules.get("gui.workers")
    pools = [QThreadPool.globalInstance()] + ([workers._POOL] if workers is not None and workers._POOL else [])
    return all(p.activeThreadCount() == 0 for p in pools)
