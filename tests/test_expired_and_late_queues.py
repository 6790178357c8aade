"""Stores whose oldest files were deleted (§13): a first commitlog file that does not start
at 0, CQ units pointing below the commitlog minimum, and queues rebuilt to start late
(filler units, §8.4)."""
import shutil

from conftest import manifest
from engine import MessageStore, StoreConfig
from engine.cli.write import rebuild
from engine.store.consume_queue import FILLER_SIZE

SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256)


def _expire_first_files(root, n=2):
    for f in sorted((root / "commitlog").iterdir())[:n]:
        f.unlink()


def test_reader_tolerates_files_deleted_from_the_front(fixture_copy):
    root = fixture_copy("small")
    _expire_first_files(root)
    m = manifest("small")
    with MessageStore.open(root) as s:
        assert s.min_offset == 131072
        msgs = list(s.iter_messages())
        assert [x.commitLogOffset for x in msgs] == [x["phyOffset"] for x in m["messages"] if x["phyOffset"] >= 131072]
        for q in m["consume_queues"]:
            cq = s.find_queue(q["topic"], q["queueId"])
            if cq is None or q["maxOffset"] == 0:
                continue
            live = [u for u in q["units"] if u[1] >= 131072]
            want_min = live[0][0] if live else q["maxOffset"]
            assert (cq.min_offset, cq.max_offset) == (want_min, q["maxOffset"]), q["topic"]
            if live:
                r = s.get_message(q["topic"], q["queueId"], 0, 5)
                assert r.status == "OFFSET_TOO_SMALL" and r.nextBeginOffset == want_min
                r = s.get_message(q["topic"], q["queueId"], want_min, 1)
                assert r.status == "FOUND" and r.messages[0].commitLogOffset == live[0][1]
        # the index still holds keys of expired messages: exact queries skip them
        old = next(x for x in m["messages"] if x["phyOffset"] < 131072 and x["keys"])
        key = old["keys"].split()[0]
        assert all(x.commitLogOffset >= 131072 for x in s.query_message(old["topic"], key, max_num=0).messages)


def test_rebuild_after_expiry_starts_queues_late_with_fillers(fixture_copy):
    root = fixture_copy("small")
    _expire_first_files(root, 3)
    rebuild(root, StoreConfig.from_mapping(SMALL))
    m = manifest("small")
    with MessageStore.open(root) as s:
        q = next(q for q in m["consume_queues"] if (q["topic"], q["queueId"]) == ("TopicTest", 0))
        first_live = next(u for u in q["units"] if u[1] >= 196608)
        cq = s.find_queue("TopicTest", 0)
        assert cq.min_offset == first_live[0] and cq.max_offset == q["maxOffset"]
        start_file = cq.queue.files[0]
        assert start_file.file_from_offset == first_live[0] * 20 - (first_live[0] * 20) % 1000
        fillers = cq.view(start_file)[: (first_live[0] * 20 % 1000) // 20]
        assert len(fillers) and all(int(u["size"]) == FILLER_SIZE and int(u["commitLogOffset"]) == 0 for u in fillers)
        got = cq.units(cq.min_offset, cq.max_offset).tolist()
        assert [[cq.min_offset + i, *u] for i, u in enumerate(got)] == [u for u in q["units"] if u[0] >= first_live[0]]
        r = s.get_message("TopicTest", 0, cq.min_offset, 3)
        assert [x.queueOffset for x in r.messages] == [cq.min_offset + i for i in range(3)]
