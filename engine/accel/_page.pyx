# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""getMessage's page loop over one commitlog file, in C (engine/format/message.py: check_record and
the loop in MessageStore.get_message stay the reference).

`run` reads CQ units straight from a CQ file's map, checks the record each points at exactly
as check_record classifies it (a MESSAGE whose TOTALSIZE is the unit's size, or not a message)
and writes the fixed fields of every message into one row of a preallocated bytearray (layout:
ROW_FORMAT, the numpy dtype engine.store.page.ROW_DTYPE). No Python object is built per message.
It stops -- leaving the unit to the Python loop -- at anything that needs Python: a filler
unit, a unit outside the file, a unit that is not a message, a record whose answer needs the
Python decoder (a SCHEDULE_TOPIC_XXXX record with a DELAY property, TAGS that are not ASCII),
the page limits, a full row buffer, the end of the units. The broker's page (broker=True) reads
no record: like DefaultMessageStore.getMessage it takes each unit whose bytes were written as
a slice, and a record is checked when the page is first read there (PageState.check_row).

The module is split in three: this file (declarations, the run of CQ units), _page_loop.pxi (the
page loop and getMessage) and _page_decode.pxi (one record into a Message, messages_at and the
key query). The record check is _record's; the byte layouts are engine/format/layout.pxd's."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from operator import index

from engine.accel._message cimport Anchor, Message, new_anchor, parse_props, utf8
from engine.accel._state cimport FileState, FilesState
from engine.format.layout cimport (BLANK_MAGIC, BORNHOST_V6_FLAG, CQ_UNIT_SIZE, FILLER_SIZE, HEAD_SIZE,
                                   MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, OFF_BODY, OFF_BODYCRC, OFF_BODYLENGTH,
                                   OFF_BORNHOST, OFF_BORNTIMESTAMP, OFF_FLAG, OFF_MAGICCODE, OFF_PHYSICALOFFSET,
                                   OFF_PREPAREDTXOFFSET, OFF_QUEUEID, OFF_QUEUEOFFSET, OFF_RECONSUMETIMES,
                                   OFF_STOREHOST, OFF_STORETIMESTAMP, OFF_SYSFLAG, OFF_UNIT_SIZE, OFF_UNIT_TAGS, HOST_V4, HOST_V6,
                                   MAX_FILTER_MESSAGE_SIZE, PROP_CRC_TAIL_SIZE, RECORD_FIXED, STOREHOST_V6_FLAG)

from engine.accel._bytes cimport be16, be32, be64
from engine.accel._javahash cimport index_key_hash, jhash_bytes_or
from engine.accel._record cimport (F_CRC, F_FORCE, F_V2, S_EOF, S_INVALID, S_MESSAGE, S_MISMATCH, S_PY, KeySpans, Row,
                                   check, check_keys, crc32, crc_tail_at, verify_prop_crc)
from engine.accel._objects cimport rmq_new
from engine.accel._query cimport IndexState, query_fast
from engine.accel._results cimport GetMessageResult, QueryResult
from engine.accel._seek cimport (far_apart, find_sep, prefetch_lines, prefetch_record, rmq_prefetch, rmq_sink,
                                 touch_record)
from engine.accel._record import (ACCEPT_V2, CHECK_CRC, END_OF_FILE, FORCE_PROP_CRC, INVALID, MESSAGE,  # noqa: F401 (for Python)
                                  NEEDS_PY, SIZE_MISMATCH, classify, crc32_of)

# why run stopped (the unit at *pu is not consumed): 0 no more units, 1 the page is full (count /
# bytes limits), 2 the row buffer is full (grow it, call again), 3 a filler or a unit outside
# [file start, write position) (the Python loop decides), 4 no valid record of that size there,
# 5 the row is written but check_record must confirm it (and give tagsCode), 6 `single`: one taken
cdef enum:
    UNCHECKED = 0  # a broker page's row not read yet (every record's magic code is not 0)

ROW_SIZE = sizeof(Row)
ROW_FORMAT = "=7q14i"
API = 9  # what engine.store.page expects of this module (9: get_message is MessageStore's own, a GetMessageResult)


# ---- a run of CQ units -----------------------------------------------------------------------
cdef enum:
    PREFETCH_AHEAD = 4  # records whose lines are requested before their turn


cdef int run(const uint8_t* b, Py_ssize_t L, Py_ssize_t limit, int64_t file_from, int64_t file_size,
             const uint8_t* cq, Py_ssize_t* pu, Py_ssize_t u_end, Row* out, Py_ssize_t nrows,
             Py_ssize_t* pj, Py_ssize_t cap, int64_t* pnbytes, int64_t limit_bytes, int file_index,
             int flags, bint single, bint lazy) noexcept nogil:
    """Walk CQ units *pu .. u_end-1 (cq: the CQ file's map) whose records lie in commitlog file b
    (from `file_from`, `file_size` long, written up to `limit`), a row per message at out[*pj].
    The page stops before a unit when it holds `cap` messages or the unit would take it past
    `limit_bytes` (0: none) -- never before its first; `single`: after one (stop 6). `lazy`
    (the broker's page): a unit inside the written bytes is taken unread (row: the unit, bodyPos
    its position, magicCode UNCHECKED; PageState.check_row reads it). Returns why it stopped."""
    cdef Py_ssize_t u = pu[0], j = pj[0], pos, pf = u, pf_end
    cdef int64_t nbytes = pnbytes[0], phy
    cdef int32_t usize, size
    cdef int st, stop
    cdef uint32_t acc = 0
    global rmq_sink
    limit = min(limit, L)
    pf_end = min(u_end, u + min(max(cap - j, 1), 64))   # (a bigger page: the rest as below)
    if not lazy and pf_end > u and far_apart(be64(cq + u * CQ_UNIT_SIZE), be64(cq + (pf_end - 1) * CQ_UNIT_SIZE)):
        while pf < pf_end:   # the page's records far apart: touched first (touch_record)
            acc += touch_record(b, limit, <int64_t>(<uint64_t>be64(cq + pf * CQ_UNIT_SIZE) - <uint64_t>file_from),
                                be32(cq + pf * CQ_UNIT_SIZE + OFF_UNIT_SIZE))
            pf += 1
        rmq_sink = acc
    while True:
        if u >= u_end:
            stop = 0
            break
        while pf < u + PREFETCH_AHEAD and pf < u_end and not lazy:   # close together: asked for ahead
            prefetch_record(b, L, <int64_t>(<uint64_t>be64(cq + pf * CQ_UNIT_SIZE) - <uint64_t>file_from),
                            be32(cq + pf * CQ_UNIT_SIZE + OFF_UNIT_SIZE))
            pf += 1
        phy = be64(cq + u * CQ_UNIT_SIZE)
        usize = be32(cq + u * CQ_UNIT_SIZE + OFF_UNIT_SIZE)
        if j > 0 and (j >= cap or (limit_bytes and nbytes + usize > limit_bytes)):
            stop = 1
            break
        if j >= nrows:
            stop = 2
            break
        if (phy < file_from or phy >= file_from + file_size or phy - file_from >= limit
                or (phy == 0 and usize == FILLER_SIZE)):
            stop = 3
            break
        pos = <Py_ssize_t>(phy - file_from)
        if lazy:  # selectMappedBuffer(pos, size): inside the written bytes, or null
            if usize <= 0 or pos + usize > limit:
                stop = 4
                break
            out[j].commitLogOffset, out[j].storeSize, out[j].bodyPos = phy, usize, <int32_t>pos
            out[j].tagsCode = be64(cq + u * CQ_UNIT_SIZE + OFF_UNIT_TAGS)
            out[j].magicCode, out[j].file = UNCHECKED, file_index
            j += 1
            u += 1
            nbytes += usize
            if single:
                stop = 6
                break
            continue
        st = check(b, L, pos, limit, flags, &out[j], &size)
        if st == S_MESSAGE and size == usize:
            out[j].commitLogOffset = phy
            out[j].file = file_index
            j += 1
            u += 1
            nbytes += usize
            if single:
                stop = 6
                break
            continue
        if st == S_PY and size == usize:  # the row is written; check_record confirms
            out[j].commitLogOffset = phy
            out[j].file = file_index
            stop = 5
            break
        stop = 4  # not a message of the unit's size (a NEEDS_PY record too: its size is TOTALSIZE)
        break
    pu[0] = u
    pj[0] = j
    pnbytes[0] = nbytes
    return stop


include "_page_loop.pxi"
include "_page_decode.pxi"
