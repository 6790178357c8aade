"""Bodies that are not quite what they say: a compressed body cut short or damaged decodes
what its codec gives (and says it was cut), never an exception; a Confluent-framed Avro body
(0x00, a 4-byte big-endian schema id, the Avro binary) is read past its frame, its schema id
reported, through the pipeline and `rmqstore get --json`."""
from __future__ import annotations

import json
import random
import zlib

import lz4.frame
import pytest
import zstandard

from engine import MessageStore
from engine.cli.app import main
from engine.format import body_decode as bd
from test_body_decode import AVRO_SCHEMA, av_str, avro_record, zigzag

COMPRESS = {0: zlib.compress, 1: lambda b: lz4.frame.compress(b, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
            2: lambda b: zstandard.ZstdCompressor().compress(b)}


def lines_body(n: int = 12000) -> bytes:
    """JSON Lines of pseudo-random names (~500 KiB; several LZ4 and ZSTD blocks)."""
    rnd = random.Random(7)
    return b"".join(json.dumps({"id": i, "name": "".join(rnd.choice("abcdefghij") for _ in range(30))}).encode()
                    + b"\n" for i in range(n))


@pytest.mark.parametrize("ctype", [0, 1, 2])
def test_a_cut_compressed_body_decodes_what_it_gives(ctype):
    raw = lines_body()
    packed = COMPRESS[ctype](raw)
    d = bd.decode_body(packed[:len(packed) // 2], 1 | ctype << 8)
    j = d.to_json()
    assert j["truncated"] is True and j["compression"] == bd.COMPRESSION_NAMES[ctype]
    assert "is cut or damaged: decoded the first" in j["note"]
    assert d.format == "text" and 0 < len(d.value) < len(raw) and raw.startswith(d.value.encode())
    whole = bd.decode_body(packed, 1 | ctype << 8)   # the whole body: no note, not truncated
    assert whole.format == "text" and whole.value.encode() == raw and "truncated" not in whole.to_json()


@pytest.mark.parametrize("ctype", [0, 1, 2])
def test_a_body_cut_before_its_first_block_says_why(ctype):
    packed = COMPRESS[ctype](b'{"a": 1}' * 50)
    for cut in (1, 5, len(packed) - 1):
        d = bd.decode_body(packed[:cut], 1 | ctype << 8)
        json.dumps(d.to_json())
        if d.format == "hex":
            assert "does not decompress" in d.note and d.value == {"$bytes": packed[:cut].hex()}
        else:   # zlib gives a prefix of its stream
            assert d.truncated and d.to_json()["note"].startswith(f"the {bd.COMPRESSION_NAMES[ctype]} body is cut")


def test_zstd_frames_follow_each_other_and_bombs_stay_refused(monkeypatch):
    one = zstandard.ZstdCompressor().compress(b'{"a": 1}')
    assert bd.decompressed(one + one, 1 | 2 << 8) == (b'{"a": 1}{"a": 1}', "zstd", "")
    cut = bd.decompressed(one + one[:-3], 1 | 2 << 8)
    assert cut[0].startswith(b'{"a": 1}') and "cut or damaged" in cut[2]
    monkeypatch.setattr(bd, "DECOMPRESS_LIMIT", 1 << 20)
    for ctype in (0, 1, 2):
        d = bd.decode_body(COMPRESS[ctype](b"\0" * (4 << 20)), 1 | ctype << 8)
        assert d.format == "hex" and "more than 1,048,576 bytes" in d.note, ctype


def confluent(schema_id: int, record: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + record


def test_confluent_framed_avro_reports_its_schema_id(tmp_path):
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(AVRO_SCHEMA))
    s = bd.Schemas(avro_schema=str(avsc))
    d = bd.decode_body(confluent(4242, avro_record()), 0, s)
    assert (d.format, d.value, d.schema_id) == ("avro", {"id": "A-1", "qty": -3, "tags": ["x", "y"]}, 4242)
    assert d.to_json()["schemaId"] == 4242 and "schema id 4242" in d.note
    plain = bd.decode_body(avro_record(), 0, s)
    assert plain.format == "avro" and plain.schema_id is None and "schemaId" not in plain.to_json()
    empty_id = av_str("") + zigzag(7) + zigzag(0)   # {"id": "", "qty": 7, "tags": []} starts with a 0 byte too
    e = bd.decode_body(empty_id, 0, s)
    assert (e.value, e.schema_id) == ({"id": "", "qty": 7, "tags": []}, None)
    bad = bd.decode_body(confluent(1, b"\x05"), 0, s)   # framed, but no record after the frame
    assert bad.format != "avro" and "avro schema" in bad.note


def test_cli_get_json_carries_the_schema_id(tmp_path, capsys):
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(AVRO_SCHEMA))
    root = tmp_path / "store"
    with MessageStore.create(root) as st:
        st.put_message("Orders", confluent(7, avro_record("B-2", 5)), queue_id=0)
    assert main(["get", str(root), "Orders", "0", "0", "--json", "--avro-schema", str(avsc)]) == 0
    dec = json.loads(capsys.readouterr().out)["messages"][0]["decodedBody"]
    assert dec["format"] == "avro" and dec["schemaId"] == 7 and dec["value"]["id"] == "B-2"


def test_a_cut_zstd_body_fails_as_the_consumer_fails_and_check_says_so():
    """A ZSTD frame cut short decompresses to nothing whole: decompress_body raises (with and
    without a limit) instead of handing back the part it made, and check's decompression_error
    names it; the whole frame still decompresses."""
    import os
    import zstandard
    from engine.format.message import decompress_body, decompression_error
    data = os.urandom(64) * 80
    frame = zstandard.ZstdCompressor().compress(data)
    assert decompress_body(frame, 2) == data == decompress_body(frame, 2, 1 << 20)
    assert decompression_error(frame, 2) is None
    for cut in (frame[:len(frame) // 2], frame[:-1]):
        for limit in (None, 1 << 20):
            with pytest.raises(zstandard.ZstdError):
                decompress_body(cut, 2, limit)
        assert "ends early" in decompression_error(cut, 2)


def test_cli_output_stays_utf8_json_for_a_body_with_a_non_utf8_string(tmp_path):
    """A MessagePack-looking body whose string is not UTF-8 (random bytes often look like one):
    `get --json` prints UTF-8 that parses as JSON, in a C locale too (where Python's stdout would
    otherwise write a lone surrogate as the raw byte)."""
    import json
    import os
    import subprocess
    import sys
    from engine import MessageStore
    body = b"\x81\xa1\xde\x01"   # {<1-byte str 0xDE>: 1}
    with MessageStore.create(tmp_path / "s") as s:
        s.put_message("T", body, queue_id=0)
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONUTF8="1")
    r = subprocess.run([sys.executable, "-m", "engine", "get", str(tmp_path / "s"), "T", "0", "0", "--json"],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    doc = json.loads(r.stdout.decode("utf-8"))
    (m,) = doc["messages"]
    assert m["decodedBody"]["format"] != "msgpack"
