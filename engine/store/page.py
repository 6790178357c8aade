"""getMessage pages: the page loop and the lazy page it returns.

`read_page` is MessageStore.get_message's loop (the store does the bounds and the statuses
before it). With the compiled kernel (engine/accel/_page.pyx) it runs through the CQ units of
a page in C, one call per run of records in one commitlog file, and writes each message's
fixed fields into one row of a byte buffer: no Python object per message. Everything the
kernel does not decide (fillers, expired records, units pointing elsewhere, damaged records,
SCHEDULE_TOPIC_XXXX delays, non-ASCII tags) goes through the reference loop body and
check_record, so both paths give the same page. Without the kernel (not built, or
RMQSTORE_PURE_PYTHON=1) the reference loop decodes every record with check_record.

The broker's page (broker=True) reads no record, as DefaultMessageStore.getMessage hands out
commitLog.getMessage(offset, size) slices unread: a unit whose bytes lie inside the written part
of its commitlog file is a message of the page, any other is null (rollNextFile past the rest of
that file). Each record is checked when the page is first read there (an item, the columns); one
that is not a message of the unit's size raises CorruptDataError then. The default page checks
every record while it is made and passes over the bad ones (`skipped`).

`MessagePage` is what GetMessageResult.messages holds: a read-only sequence of Message that
builds a Message only when an item is first read (and keeps it), plus the decoded columns
for callers that want no objects at all (`page.columns["storeTimestamp"]`, `page.body(i)`).
A page keeps the commitlog files it points into mapped (its own buffer export: closing the
store leaves those maps to the page) and reads the record bytes when an item is first read."""
from __future__ import annotations

import struct
from collections.abc import Sequence
from operator import index

import numpy as np

from engine import accel
from engine.format.cq_unit import (CQ_UNIT_HEAD, CQ_UNIT_SIZE, FILLER_SIZE, WHY_EXPIRED, WHY_FILLER,  # noqa: F401
                                   WHY_INVALID, broker_unit_cap)
from engine.errors import CorruptDataError
from engine.format.message import MESSAGE_MAGIC_V2, Message, RecordStatus, check_record
from engine.format.properties import parse_properties
from engine.format.record import (BORNHOST_V6_FLAG, HOST_V4, HOST_V6, OFF_BODY, OFF_BORNHOST, OFF_STOREHOST,
                                  STOREHOST_V6_FLAG, host_sizes)

ROW_FIELDS = [
    ("commitLogOffset", "i8"), ("queueOffset", "i8"), ("physicalOffsetField", "i8"),
    ("bornTimestamp", "i8"), ("storeTimestamp", "i8"), ("preparedTransactionOffset", "i8"),
    ("tagsCode", "i8"),
    ("storeSize", "i4"), ("magicCode", "i4"), ("bodyCRC", "i4"), ("queueId", "i4"), ("flag", "i4"),
    ("sysFlag", "i4"), ("reconsumeTimes", "i4"),
    # where the variable parts are inside the commitlog file row["file"] of the page
    ("bodyPos", "i4"), ("bodyLength", "i4"), ("topicPos", "i4"), ("topicLength", "i4"),
    ("propertiesPos", "i4"), ("propertiesLength", "i4"), ("file", "i4"),
]
ROW_DTYPE = np.dtype([(n, "=" + t) for n, t in ROW_FIELDS])
ROW_STRUCT = struct.Struct("=7q14i")
ROW_SIZE = ROW_STRUCT.size
assert ROW_DTYPE.itemsize == ROW_SIZE
_TAGS_AT = ROW_DTYPE.fields["tagsCode"][1]
_I64 = struct.Struct("=q")
_I8, _I16 = struct.Struct(">b"), struct.Struct(">h")
_unpack_row = ROW_STRUCT.unpack_from

KERNEL = accel.load("_page")
if KERNEL is not None and (KERNEL.ROW_SIZE != ROW_SIZE or KERNEL.ROW_FORMAT != ROW_STRUCT.format
                           or getattr(KERNEL, "API", 0) != 9):
    KERNEL = None  # a stale build (another row layout or interface): not used

class PageState:
    """A MessagePage's storage, owned by the page: its rows (the compiled loop's; its PageState,
    engine/accel/_page_loop.pxi, is this class's compiled twin) or the reference loop's messages,
    the commitlog views they are read from, and each Message once built."""
    __slots__ = ("n", "rows", "views", "cache", "cols", "fidx", "froms", "opts", "files", "units")

    def __init__(self, n: int = 0, rows=None, views=(), cache=None):
        self.n = n
        self.rows = rows            # bytearray of ROW_SIZE rows (None: built from messages)
        self.views = views          # memoryview per commitlog file (row["file"] indexes it)
        self.cache = cache          # list of Message | None once an item was read
        self.cols = None
        self.fidx = None
        self.froms = None
        self.opts = None
        self.files = None
        self.units = None           # a broker page's (commitLogOffset, size) per row: read when asked for

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.get(k) for k in range(*i.indices(self.n))]
        n = self.n
        i = index(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("page index out of range")
        return self.get(i)

    def get(self, i: int) -> Message:
        c = self.cache
        if c is None:
            c = self.cache = [None] * self.n
        m = c[i]
        if m is None:
            m = c[i] = self.unit_message(i) if self.rows is None else self.row_message(i)
        return m

    def __iter__(self):
        get = self.get
        for i in range(self.n):
            yield get(i)

    def fill(self):
        """Every row checked (the compiled page's; a pure page's rows are its messages)."""

    def unit_message(self, i: int) -> Message:
        """A broker page's message i, read when first asked for: the broker hands out the
        unit's bytes unread, so a record that is not a message of the unit's size is found
        here (CorruptDataError), not by getMessage."""
        phy, size = self.units[i]
        fi = self.fidx[i]
        pos = phy - self.froms[fi]
        r = check_record(self.views[fi], pos, pos + size, phy, self.opts)
        if r.status is RecordStatus.MESSAGE and r.size == size:
            return r.message
        raise CorruptDataError(f"no message of the ConsumeQueue unit's size ({size}) at commitlog offset {phy}",
                               path=getattr(self.files[fi], "path", None), offset=phy)

    def row_message(self, i: int) -> Message:
        """Message i from its row (the compiled page_message's twin)."""
        (clo, qoff, phys, born_ts, store_ts, prep, tcode, size, magic, crc, qid, flag, sysflag, recons,
         bp, bl, tp, tl, pp, pl, fi) = _unpack_row(self.rows, i * ROW_SIZE)
        buf = self.views[fi]
        bh = HOST_V6 if sysflag & BORNHOST_V6_FLAG else HOST_V4
        sh = HOST_V6 if sysflag & STOREHOST_V6_FLAG else HOST_V4
        hp = bp - (OFF_BODY - OFF_BORNHOST) - sh - bh  # the born host
        sp = hp + bh + (OFF_STOREHOST - OFF_BORNHOST)  # the store host
        raw = str(buf[pp:pp + pl], "utf-8", "replace") if pl > 0 else ""
        return Message(str(buf[tp:tp + tl], "utf-8", "replace"), qid, qoff, clo, size, crc, flag, sysflag,
                       born_ts, bytes(buf[hp:hp + bh]), store_ts, bytes(buf[sp:sp + sh]),
                       recons, prep, bytes(buf[bp:bp + bl]) if bl > 0 else b"", raw,
                       parse_properties(raw) if pl > 0 else {}, magic, phys, tcode)


def _state_len(page) -> int:
    return len(page.state)


def _state_bool(page) -> bool:
    return len(page.state) > 0


def _state_item(page, i):
    return page.state[i]


def _state_iter(page):
    return iter(page.state)


_STATE = accel.load("_state")   # len, bool, [i] and iter of an owner by its state, compiled
_BY_STATE = ((_state_len, _state_bool, _state_item, _state_iter) if _STATE is None
             else (_STATE.state_len, _STATE.state_bool, _STATE.state_item, _STATE.state_iter))


class MessagePage(Sequence):
    """A page of messages: len, [i] (negative too), [a:b] (a list), iteration, bool and == a
    list behave like the list of Message it stands for; a Message is built on first access.
    The page owns its storage, `state`: the compiled loop's PageState, or the pure one.

    Columns (numpy, no objects): `columns` is a structured array with one row per message
    (ROW_FIELDS: the record's fixed fields as check_record decodes them, tagsCode included,
    and where body, topic and properties are in the file); `body(i)`, `topic(i)` and
    `properties_raw(i)` read the variable parts."""
    __slots__ = ("state",)
    __hash__ = None

    def __init__(self, state: PageState | None = None):
        self.state = PageState() if state is None else state

    @classmethod
    def from_messages(cls, messages: list, file_index: list[int] | None = None, views=(),
                      file_starts=()) -> "MessagePage":
        """A page of already decoded messages (the pure-Python loop); columns are derived
        from them (and the record bytes, for the positions) when first asked for."""
        st = PageState(len(messages), None, views, list(messages))
        st.fidx = file_index
        st.froms = file_starts
        return cls(st)

    # ---- the list: its state's answers (compiled ones have no Python frame around them) -----
    __len__, __bool__, __getitem__, __iter__ = _BY_STATE

    def __reversed__(self):
        get = self.state.get
        for i in range(len(self.state) - 1, -1, -1):
            yield get(i)

    def __eq__(self, other):
        if isinstance(other, (MessagePage, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self):
        return list, (list(self),)

    def tolist(self) -> list[Message]:
        return list(self)

    def unit_of(self, i: int) -> tuple[int, int]:
        """Item i's (commitLogOffset, size) as its ConsumeQueue unit gave them, without reading
        its record (a broker page's item may be a record that does not decode)."""
        st = self.state
        if st.rows is not None:
            row = _unpack_row(st.rows, i * ROW_SIZE)
            return row[0], row[7]
        if st.units is not None:
            return st.units[i]
        m = st.get(i)
        return m.commitLogOffset, m.storeSize

    # ---- columns ---------------------------------------------------------------------------
    @property
    def columns(self) -> np.ndarray:
        """One structured row per message (dtype ROW_DTYPE): columns["storeTimestamp"], ..."""
        st = self.state
        cols = st.cols
        if cols is None:
            if st.rows is not None:
                st.fill()
                cols = np.frombuffer(st.rows, ROW_DTYPE, st.n)
            else:
                cols = np.array([self._row_of(i) for i in range(st.n)], ROW_DTYPE)
            st.cols = cols
        return cols

    def column(self, name: str) -> np.ndarray:
        return self.columns[name]

    def _row_of(self, i: int) -> tuple:
        """The row of a decoded message (pure-Python pages): its fields, and the positions
        read back from the record."""
        st = self.state
        m = st.get(i)
        fi = st.fidx[i]
        buf = st.views[fi]
        pos = m.commitLogOffset - st.froms[fi]
        bp = pos + OFF_BODY + sum(host_sizes(m.sysFlag))
        bl = len(m.body)
        if m.magicCode == MESSAGE_MAGIC_V2:
            tl, tp = _I16.unpack_from(buf, bp + bl)[0], bp + bl + 2
        else:
            tl, tp = _I8.unpack_from(buf, bp + bl)[0], bp + bl + 1
        pl = _I16.unpack_from(buf, tp + tl)[0]
        return (m.commitLogOffset, m.queueOffset, m.physicalOffsetField, m.bornTimestamp, m.storeTimestamp,
                m.preparedTransactionOffset, m.tagsCode, m.storeSize, m.magicCode, m.bodyCRC, m.queueId,
                m.flag, m.sysFlag, m.reconsumeTimes, bp, bl, tp, tl, tp + tl + 2, max(pl, 0), fi)

    def _part(self, i: int, at: str, length: str) -> memoryview:
        n = len(self.state)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("page index out of range")
        row = self.columns[i]
        p, k = int(row[at]), int(row[length])
        return self.state.views[int(row["file"])][p:p + k]

    def body(self, i: int) -> memoryview:
        """Message i's body, zero-copy (read-only) from the commitlog map."""
        return self._part(i, "bodyPos", "bodyLength")

    def topic(self, i: int) -> str:
        return str(self._part(i, "topicPos", "topicLength"), "utf-8", "replace")

    def properties_raw(self, i: int) -> str:
        return str(self._part(i, "propertiesPos", "propertiesLength"), "utf-8", "replace")



def read_page(cl, cq, offset: int, mx: int, max_count: int, broker: bool, limit_count: int,
              limit_bytes: int | None, kernel: bool = True):
    """getMessage's loop from queue offset `offset` (min <= offset < mx = the queue's max):
    (status, nextBeginOffset, page, bufferTotalSize, skipped); status None means
    OFFSET_FOUND_NULL (no CQ file holds `offset`). kernel=False: the reference loop."""
    k = KERNEL
    if k is not None and kernel and max_count >= 1:
        return k.read(cl, cq.queue, offset, mx, max_count, broker, limit_count, limit_bytes or 0, MessagePage, confirm)
    return _read_page_py(cl, cq, offset, mx, max_count, broker, limit_count, limit_bytes)


def confirm(cl, f, cqmm, u: int, rows: bytearray, j: int, cache):
    """A row the kernel wrote that check_record decides (a SCHEDULE_TOPIC_XXXX delay, tags
    that are not ASCII): on a MESSAGE of the unit's size its tagsCode goes into row j and the
    Message into the cache at j. Returns (cache, confirmed)."""
    phy, size = CQ_UNIT_HEAD.unpack_from(cqmm, u * CQ_UNIT_SIZE)
    r = check_record(f.buf, phy - f.file_from_offset, f.wrote_position, phy, cl.read_opts)
    if cache is not None and len(cache) > j:
        cache[j] = None
    if r.status is not RecordStatus.MESSAGE or r.size != size:
        return cache, False
    _I64.pack_into(rows, j * ROW_SIZE + _TAGS_AT, r.message.tagsCode)
    if cache is None:
        cache = []
    if len(cache) <= j:
        cache.extend([None] * (j + 1 - len(cache)))
    cache[j] = r.message
    return cache, True



def _read_page_py(cl, cq, offset: int, mx: int, max_count: int, broker: bool, limit_count: int,
                  limit_bytes: int | None):
    """The reference loop: every record through check_record (the broker's page: no record read,
    _read_broker_py)."""
    if broker:
        return _read_broker_py(cl, cq, offset, max_count, limit_count, limit_bytes)
    f = cq.queue.find(offset * CQ_UNIT_SIZE) if getattr(cq, "file_size", 0) > 0 else None   # (RocksDB's: no file)
    if f is not None and offset * CQ_UNIT_SIZE >= f.file_from_offset + f.wrote_position or \
            f is None and cq.queue.files:
        return None, offset, MessagePage(), 0, []   # no CQ file holds it: OFFSET_FOUND_NULL, as the broker
    units = cq.units(offset, offset + max(max_count, 1) * 2 + 64)
    status = "NO_MATCHED_MESSAGE"
    messages: list = []
    fidx: list = []
    files: list = []
    views: list = []
    skipped: list = []
    total = 0
    next_file_start = None
    i = 0
    q = offset
    # the units as Python ints in one go: a numpy scalar per field costs more than the decode
    phys, sizes = units["commitLogOffset"].tolist(), units["size"].tolist()
    cl_min, opts = cl.min_offset, cl.read_opts
    f = None  # commitlog file of the previous record: a page's records mostly share one
    fi = -1
    while True:
        if i >= len(phys):
            if q >= mx or len(messages) >= max_count:
                break
            units, i = cq.units(q, q + max_count * 2 + 64), 0
            if len(units) == 0:
                break
            phys, sizes = units["commitLogOffset"].tolist(), units["size"].tolist()
        phy, size = phys[i], sizes[i]
        if messages and (max_count <= len(messages) or len(messages) >= limit_count
                         or (limit_bytes and total + size > limit_bytes)):
            break
        i += 1
        q += 1
        if next_file_start is not None and phy < next_file_start:
            continue
        if phy == 0 and size == FILLER_SIZE:  # cq_unit.is_filler, inline
            skipped.append((q - 1, WHY_FILLER))
            continue
        msg = None  # cl.get_message(phy, size), without a file lookup per record
        if phy >= cl_min:
            if f is None or not f.file_from_offset <= phy < f.file_from_offset + f.file_size:
                f, fi = _file_of(cl, phy, fi, files, views)
            if f is not None and phy - f.file_from_offset < f.wrote_position:
                r = check_record(f.buf, phy - f.file_from_offset, f.wrote_position, phy, opts)
                if r.status is RecordStatus.MESSAGE and r.size == size:
                    msg = r.message
        if msg is None:
            if not messages:
                status = "MESSAGE_WAS_REMOVING"
            why = WHY_EXPIRED if phy < cl.min_offset else WHY_INVALID
            skipped.append((q - 1, why))
            if phy < cl.min_offset:
                next_file_start = cl.roll_next_file(phy)
            continue
        messages.append(msg)
        fidx.append(fi)
        total += size
        status = "FOUND"
        next_file_start = None
    page = MessagePage.from_messages(messages, fidx, views, [g.file_from_offset for g in files])
    return status, q, page, total, skipped


def _file_of(cl, phy: int, fi: int, files: list, views: list):
    """The commitlog file holding `phy` and its index among the page's files (added, with the
    view the page keeps, when new); (None, fi) when no file holds it."""
    f = cl.queue.find(phy)
    if f is not None:
        if f in files:
            fi = files.index(f)
        else:
            fi = len(files)
            files.append(f)
            views.append(memoryview(f.mm))
    return f, fi


def _read_broker_py(cl, cq, offset: int, max_count: int, limit_count: int, limit_bytes: int | None):
    """DefaultMessageStore.getMessage's loop: one CQ file's units (at most broker_unit_cap), each
    taken as commitLog.getMessage(offset, size) takes it -- a slice of the commitlog file when
    its bytes lie inside the written part, else null (MESSAGE_WAS_REMOVING before the first
    message, and the rest of that commitlog file passed over: rollNextFile). No record is
    read: the page checks each when it is first read (PageState.unit_message)."""
    units = cq.broker_units(offset, max_count)[:broker_unit_cap(max_count)]
    if len(units) == 0:
        return None, offset, MessagePage(), 0, []
    status = "NO_MATCHED_MESSAGE"
    taken: list = []
    fidx: list = []
    files: list = []
    views: list = []
    skipped: list = []
    total = 0
    next_file_start = None
    q = offset
    cl_min = cl.min_offset
    f = None
    fi = -1
    for phy, size in zip(units["commitLogOffset"].tolist(), units["size"].tolist()):
        if taken and (max_count <= len(taken) or len(taken) >= limit_count
                      or (limit_bytes and total + size > limit_bytes)):
            break
        q += 1
        if next_file_start is not None and phy < next_file_start:
            continue
        filler = phy == 0 and size == FILLER_SIZE
        ok = False
        if not filler and phy >= cl_min:
            if f is None or not f.file_from_offset <= phy < f.file_from_offset + f.file_size:
                f, fi = _file_of(cl, phy, fi, files, views)
            ok = (f is not None and f.file_from_offset <= phy and size > 0
                  and phy - f.file_from_offset + size <= f.wrote_position)
        if not ok:
            if not taken:
                status = "MESSAGE_WAS_REMOVING"
            skipped.append((q - 1, WHY_FILLER if filler else WHY_EXPIRED if phy < cl_min else WHY_INVALID))
            next_file_start = cl.roll_next_file(phy)
            continue
        taken.append((phy, size))
        fidx.append(fi)
        total += size
        status = "FOUND"
        next_file_start = None
    page = MessagePage.from_messages([None] * len(taken), fidx, views, [g.file_from_offset for g in files])
    page.state.units, page.state.opts, page.state.files = taken, cl.read_opts, files
    return status, q, page, total, skipped


def columns_of(pages) -> np.ndarray:
    """The columns of several pages in one structured array (the rows in page order; the
    "file" column indexes each row's own page's files)."""
    rows = []
    for p in pages:
        st = p.state
        if st.rows is None:  # pages of the reference loop: rows from their messages
            return np.array([q._row_of(i) if q.state.rows is None else tuple(q.columns[i])
                             for q in pages for i in range(len(q))], ROW_DTYPE)
        if st.n:
            st.fill()
            rows.append(memoryview(st.rows)[:st.n * ROW_SIZE])
    return np.frombuffer(b"".join(rows), ROW_DTYPE)
