# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The writer's put loop for the common message (engine/store/writer.py stays the reference).

A producer's plain message -- a V1 topic already validated, a bytes body, tags, keys, the
generated UNIQ_KEY, no user properties, no delay -- is encoded straight into the commitlog
map, its CQ unit and index entries written from C, in the same order and with the same crash
rules as StoreWriter.put + dispatch: the batch's first TOTALSIZE last, each index entry then
its slot then the header. Anything else (roll-over to a new commitlog, CQ or index file, a
queue's first unit, user properties, SCHEDULE_TOPIC, a broken writer) returns None before
any state is touched and the caller takes the Python path.

Split in three: this file (declarations, the Appender), _append_codec.pxi (Java's String.hashCode,
the index put, the record's parts), _append_results.pxi (appender(), put_message's front); PutResults is _results'.
The byte layouts are engine/format/layout.pxd's."""
cimport cython
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memchr, memcpy, memset

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_REALTIME

from engine.format.crc import crc32 as _crc32
from engine.accel._results cimport PutResults, put_result
from engine.accel._seek cimport rmq_prefetch_write
from engine.accel._state cimport FileState, QueueState, UniqState, WriterState
from engine.format.message import SCHEDULE_TOPIC
from engine.format.put_result import wall_clock_ms

from engine.format.layout cimport (BLANK_RECORD_MIN, BORNHOST_V6_FLAG, CQ_UNIT_SIZE, HEAD_SIZE, HOST_V6, INDEX_ENTRY_SIZE,
                                   INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, MESSAGE_MAGIC_V1, OFF_BEGIN_PHY_OFFSET,
                                   OFF_BEGIN_TIMESTAMP, OFF_BODYCRC, OFF_BORNTIMESTAMP, OFF_END_PHY_OFFSET,
                                   OFF_END_TIMESTAMP, OFF_ENTRY_HASH, OFF_ENTRY_PHY, OFF_ENTRY_PREV,
                                   OFF_ENTRY_TIMEDIFF, OFF_FLAG, OFF_HASH_SLOT_COUNT, OFF_INDEX_COUNT,
                                   OFF_MAGICCODE, OFF_PHYSICALOFFSET, OFF_QUEUEID, OFF_QUEUEOFFSET, OFF_SYSFLAG,
                                   OFF_UNIT_PHY, OFF_UNIT_SIZE, OFF_UNIT_TAGS, PROP_CRC_TAIL_SIZE, RECORD_FIXED,
                                   STOREHOST_V6_FLAG)

cdef const char* HEX = b"0123456789ABCDEF"

# The crash tests' kill points (tests/reliability/writer_proc.py): a callable given the
# point's name, the same names as the Python writer's patched steps. None in production.
cdef object _fault_hook = None


def set_fault_hook(hook):
    global _fault_hook
    _fault_hook = hook


include "_append_codec.pxi"


include "_append_results.pxi"



@cython.final
cdef class _Held:
    """A writable buffer export of one file's map, kept while that file is the one appended
    to (one GetBuffer per file instead of one per put), and what never changes about the file
    (where it starts; an index file's geometry). Positions stay in the file's state object."""
    cdef object owner               # the MappedFile / IndexFile held
    cdef Py_buffer v
    cdef bint held
    cdef int64_t start              # file_from_offset (index files: unused)
    cdef Py_buffer hv               # index files: the header's array('q')
    cdef bint hv_held
    cdef FileState file             # the MappedFile's positions (index files: their MappedFile's)
    cdef int64_t entry_base, slot_num, index_num

    cdef int release(self) except -1:
        if self.held:
            PyBuffer_Release(&self.v)
            self.held = False
        if self.hv_held:
            PyBuffer_Release(&self.hv)
            self.hv_held = False
        self.owner = self.file = None
        return 0

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.v)
        if self.hv_held:
            PyBuffer_Release(&self.hv)


cdef _Held hold_file(_Held h, f):
    """h holding f (a commitlog or CQ MappedFile), re-held when f is another file."""
    if h is None:
        h = _Held.__new__(_Held)
    if h.owner is not f:
        h.release()
        PyObject_GetBuffer(f.buf, &h.v, PyBUF_WRITABLE)
        h.held = True
        h.start = f.file_from_offset
        h.file = f.state
        h.owner = f
    return h


cdef inline FileState state_of(_Held h, f):
    """f's positions (MappedFile.state): the held file's without a lookup."""
    if h is not None and h.owner is f:
        return h.file
    return f.state


cdef _Held hold_index(_Held h, idx):
    if h is None:
        h = _Held.__new__(_Held)
    if h.owner is not idx:
        h.release()
        mf = idx.file
        h.file = mf.state
        PyObject_GetBuffer(mf.mm, &h.v, PyBUF_WRITABLE)
        h.held = True
        PyObject_GetBuffer(idx.header.values, &h.hv, PyBUF_WRITABLE)
        h.hv_held = True
        h.entry_base, h.slot_num, h.index_num = idx._entry_base, idx.slot_num, idx.index_num
        h.owner = idx
    return h


@cython.final
cdef class _Queue:
    """One queue the appender writes: its key in the writer's offsets, its ConsumeQueue, the
    held map of its last file."""
    cdef object key
    cdef QueueState cq              # the ConsumeQueue's state (max_physic_offset)
    cdef list files                 # cq.queue.files (the list object never changes)
    cdef _Held last


cdef class Appender:
    """StoreWriter.put for plain messages. One per writer; state stays in the writer's own
    objects (positions, offsets, headers) so the Python path can take over at any put. The
    maps of the files appended to are held between puts (release() gives them back)."""
    cdef object w, store, lock, rr, queue_offsets, cl_files, index, new_topics, uniq
    cdef WriterState ws             # w.state: its timestamps, `broken` and `clock` as C fields
    cdef UniqState gen              # w.uniq.state: the UNIQ_KEY counter and month
    cdef list ifiles                # index.files (the list object never changes)
    cdef object lock_acquire, lock_release   # the writer's RLock's bound methods (no lookup a put)
    cdef _Held cl_held, ix_held
    cdef dict topics
    cdef bytes born_host, store_host, tail, prefix_b
    cdef str prefix
    cdef bint crc_tail, index_enabled, sync_flush, usable
    cdef long max_size
    cdef Py_ssize_t fixed     # bytes of a record but its body, topic, TAGS and KEYS

    def __init__(self, w):
        cfg = w.cfg
        self.w, self.store, self.lock = w, w.store, w.lock
        self.lock_acquire, self.lock_release = w.lock.acquire, w.lock.release
        self.rr, self.queue_offsets, self.new_topics = w._rr, w.queue_offsets, w.new_topics
        self.uniq, self.gen = w.uniq, w.uniq.state
        self.cl_files = w.store.commitlog.queue.files
        self.index = w.store.index
        self.ifiles = self.index.files
        self.ws = w.state
        self.topics = {}
        self.born_host, self.store_host = w.default_born_host, w.store_host
        self.crc_tail = cfg.enabledAppendPropCRC
        self.index_enabled = cfg.messageIndexEnable
        self.sync_flush = cfg.sync_flush
        self.max_size = cfg.maxMessageSize
        cluster = cfg.brokerClusterName
        self.usable = bool(cluster) and "\x02" not in cluster and "\x01" not in cluster
        tail = "\x02CLUSTER\x01" + cluster
        if self.crc_tail:
            tail += "\x02__CRC32#\x010000000000\x02"
        elif w.props_trailing:  # a 5.x store: the 5.x form, a trailing 0x02
            tail += "\x02"
        self.tail = tail.encode("utf-8")
        self.prefix = w.uniq.prefix
        self.prefix_b = self.prefix.encode("ascii")
        self.fixed = (RECORD_FIXED + len(self.born_host) + len(self.store_host) + 1 + 9 + len(self.prefix_b) + 12
                      + len(self.tail))

    def release(self):
        """Give back the held maps (the writer stops; a file is closed or replaced)."""
        cdef _Queue q
        if self.cl_held is not None:
            self.cl_held.release()
        if self.ix_held is not None:
            self.ix_held.release()
        for t in self.topics.values():
            if t is not False:
                for q in (<_Topic>t).queues.values():
                    if q.last is not None:
                        q.last.release()

    cdef _Topic topic(self, str topic):
        t = self.topics.get(topic)
        if t is None:
            from engine.format.topic import TOPIC_MAX_V1, TOPIC_RE
            if not (0 < len(topic) <= TOPIC_MAX_V1 and TOPIC_RE.match(topic) is not None
                    and not topic.startswith(SCHEDULE_TOPIC)):
                self.topics[topic] = False
                return None
            t = _Topic.__new__(_Topic)
            (<_Topic>t).name_b = topic.encode("ascii")
            (<_Topic>t).hash = jhash_str(0, topic)
            table = self.w.topic_table
            (<_Topic>t).in_table = topic in table
            tc = table.get(topic)
            n = tc.get("writeQueueNums") if isinstance(tc, dict) else None
            (<_Topic>t).qcount = n if isinstance(n, int) and 0 < n < 1 << 31 else 0
            (<_Topic>t).queues = {}
            self.topics[topic] = t
        elif t is False:
            return None
        return <_Topic>t

    cdef _Queue queue(self, _Topic t, str topic, long qid):
        """An existing queue, or None (its first unit: Python path)."""
        q = t.queues.get(qid)
        if q is None:
            key = (topic, qid)
            cq = self.store.queues.get(key)
            st = getattr(cq, "state", None)
            if not isinstance(st, QueueState):   # none yet, or a kind of queue the put does not write
                return None
            q = _Queue.__new__(_Queue)
            (<_Queue>q).key, (<_Queue>q).cq = key, <QueueState>st
            (<_Queue>q).files = cq.queue.files
            t.queues[qid] = q
        return <_Queue>q

    cdef Py_ssize_t record(self, uint8_t* p, bint first, Py_ssize_t total, _Topic t, Parts* m, long qid,
                           int64_t qoff, int64_t phy, int64_t born_ts, int64_t store_ts, bytes body,
                           const char* tail12) except -1:
        """One record at p (TOTALSIZE left for the caller when `first`)."""
        cdef Py_ssize_t blen = len(body), tlen = len(t.name_b)
        cdef Py_ssize_t plen = m.plen + 9 + len(self.prefix_b) + 12 + len(self.tail)
        cdef Py_ssize_t bh = len(self.born_host), sh = len(self.store_host)
        cdef int64_t crc = (<uint32_t>_crc32(body) & 0x7FFFFFFF) if blen else 0   # C ints: no Python `&`
        cdef uint8_t* q = p
        if not first:
            put_be32(q, total)
        put_be32(q + OFF_MAGICCODE, MESSAGE_MAGIC_V1)
        put_be32(q + OFF_BODYCRC, crc)
        put_be32(q + OFF_QUEUEID, qid)
        put_be32(q + OFF_FLAG, 0)
        put_be64(q + OFF_QUEUEOFFSET, qoff)
        put_be64(q + OFF_PHYSICALOFFSET, phy)
        put_be32(q + OFF_SYSFLAG, (BORNHOST_V6_FLAG if bh == HOST_V6 else 0) | (STOREHOST_V6_FLAG if sh == HOST_V6 else 0))
        put_be64(q + OFF_BORNTIMESTAMP, born_ts)
        q += HEAD_SIZE
        memcpy(q, <const char*>self.born_host, bh); q += bh
        put_be64(q, store_ts); q += 8
        memcpy(q, <const char*>self.store_host, sh); q += sh
        memset(q, 0, 12); q += 12            # reconsumeTimes, preparedTransactionOffset
        put_be32(q, blen); q += 4
        memcpy(q, <const char*>body, blen); q += blen
        q[0] = <uint8_t>tlen; q += 1
        memcpy(q, <const char*>t.name_b, tlen); q += tlen
        q[0] = (plen >> 8) & 0xFF
        q[1] = plen & 0xFF
        q += 2
        if m.has_tags:
            memcpy(q, b"TAGS\x01", 5); q += 5
            memcpy(q, m.tags, m.tags_len); q += m.tags_len
            q[0] = 2; q += 1
        if m.has_keys:
            memcpy(q, b"KEYS\x01", 5); q += 5
            memcpy(q, m.keys, m.keys_len); q += m.keys_len
            q[0] = 2; q += 1
        memcpy(q, b"UNIQ_KEY\x01", 9); q += 9
        memcpy(q, <const char*>self.prefix_b, len(self.prefix_b)); q += len(self.prefix_b)
        memcpy(q, tail12, 12); q += 12
        memcpy(q, <const char*>self.tail, len(self.tail)); q += len(self.tail)
        if self.crc_tail:  # 5.x __CRC32#: CRC of the record before the 20-byte tail, LSD first
            write_crc_tail(p, total)
        return q - p

    cdef int uniq_tails(self, char* out, Py_ssize_t n, const int64_t* nows) except -1:
        """n UNIQ_KEYs (UniqKeyGenerator.next: its own call outside the cached month), the 12
        characters after the prefix of each. `nows`: the wall-clock times already read for the
        messages' born timestamps (NULL: read the clock here)."""
        cdef UniqState gen = self.gen
        cdef int64_t start = gen.month_start, end = gen.month_end, now     # int64s: _put checked
        cdef uint32_t span, counter = <uint32_t>gen.count
        cdef Py_ssize_t i, pl = len(self.prefix_b)
        cdef int k
        for i in range(n):
            now = nows[i] if nows != NULL else now_ms()
            if now < start or now >= end:
                gen.count = counter                 # an int64 (_put checked)
                s = self.uniq.next()
                b = (<str>s).encode("ascii")
                if len(b) != pl + 12:
                    raise ValueError("unexpected UNIQ_KEY shape")
                memcpy(out + 12 * i, (<const char*>b) + pl, 12)
                if gen.count_py or gen.month_start_py or gen.month_end_py:
                    raise ValueError("unexpected UniqKeyGenerator state")
                counter = <uint32_t>gen.count
                start, end = gen.month_start, gen.month_end
                continue
            span = <uint32_t>((now - start) & 0xFFFFFFFF)
            counter = (counter + 1) & 0xFFFF
            for k in range(8):
                out[12 * i + k] = HEX[(span >> (28 - 4 * k)) & 0xF]
            for k in range(4):
                out[12 * i + 8 + k] = HEX[(counter >> (12 - 4 * k)) & 0xF]
        gen.count = counter                 # an int64 (_put checked)
        return 0

    cdef object parts(self, Parts* m, tags, keys):
        """m filled from tags and keys; the KEYS string (None: no keys), or False when the
        message is not a plain one (the Python path takes it)."""
        m.has_tags = m.has_keys = False
        m.tags_len = m.keys_len = 0
        m.tags_code = 0
        if tags is not None:
            if type(tags) is not str:
                return False
            if tags:
                # 0x02 ends a property: in UTF-8 that byte is the character and nothing else
                if not utf8(tags, &m.tags, &m.tags_len) or memchr(m.tags, 2, m.tags_len) != NULL:
                    return False
                m.has_tags = True
                m.tags_code = <int32_t>jhash_str(0, tags)
        if keys is not None:
            if type(keys) is not str:
                if type(keys) is list and len(<list>keys) == 1 and type((<list>keys)[0]) is str:
                    keys = (<list>keys)[0]      # one key: the string itself, no join
                else:
                    if type(keys) is not list and type(keys) is not tuple:
                        return False
                    for k in keys:
                        if type(k) is not str:
                            return False
                    keys = " ".join(keys)
            if keys:
                if not utf8(keys, &m.keys, &m.keys_len) or memchr(m.keys, 2, m.keys_len) != NULL:
                    return False
                m.has_keys = True
            else:
                keys = None
        m.nkeys = 1 + (count_tokens(keys) if m.has_keys else 0)
        m.plen = (6 + m.tags_len if m.has_tags else 0) + (6 + m.keys_len if m.has_keys else 0)
        if m.plen + 9 + len(self.prefix_b) + 12 + len(self.tail) > 32767:
            return False
        return keys

    def put(self, str topic, list bodies, queue_id, tags, keys):
        """PutResults of `bodies` (one topic, one queue, same tags and keys: one message or
        a put_messages batch), or None for the Python path, with nothing written."""
        if not bodies or not self.usable or self.ws.broken is not None:
            return None
        cdef _Topic t = self.topic(topic)
        if t is None:
            return None
        cdef Parts m
        keys = self.parts(&m, tags, keys)
        if keys is False:
            return None
        cdef Py_ssize_t n = len(bodies), total = 0, per = self.fixed + len(t.name_b) + m.plen
        for b in bodies:
            if type(b) is not bytes or len(<bytes>b) > self.max_size:
                return None
            total += per + len(<bytes>b)
        self.lock_acquire()
        try:
            return self._put(t, &m, topic, keys, bodies, False, n, total, queue_id)
        finally:
            self.lock_release()

    def put1(self, str topic, body, queue_id, tags, keys):
        """put_message's PutResult of one message (no list in, no PutResults out), or None
        for the Python path, with nothing written."""
        return self._put1(topic, body, queue_id, tags, keys)

    cdef object _put1(self, str topic, body, queue_id, tags, keys):
        if type(body) is not bytes or not self.usable or self.ws.broken is not None:
            return None
        cdef _Topic t = self.topic(topic)
        if t is None:
            return None
        cdef Parts m
        keys = self.parts(&m, tags, keys)
        if keys is False or len(<bytes>body) > self.max_size:
            return None
        self.lock_acquire()
        try:
            return self._put(t, &m, topic, keys, body, True, 1,
                             self.fixed + len(t.name_b) + m.plen + len(<bytes>body), queue_id)
        finally:
            self.lock_release()

    cdef object _put(self, _Topic t, Parts* m, str topic, keys, object bodies, bint single, Py_ssize_t n,
                     Py_ssize_t total, queue_id):
        """The put under the writer's lock: `bodies` is a list, or one bytes when `single`
        (the answer is then that message's PutResult, else PutResults)."""
        cdef long qid, rr_next = -1
        w = self.w
        cdef WriterState ws = self.ws
        cdef UniqState g = self.gen
        if ws.store_ts_py or g.count_py or g.month_start_py or g.month_end_py:
            return None     # state that is not int64s (_state.pxd): Python's
        if queue_id is None:
            rr_next = self.rr.get(topic, -1) + 1
            qid = rr_next % (t.qcount or w._queue_count(topic))
        else:
            if type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
                return None
            qid = queue_id
        cdef _Queue q = self.queue(t, topic, qid)
        if q is None:
            return None
        key = q.key
        cdef QueueState cq = q.cq
        # room: the commitlog file, the CQ's last file, the index's last file (no roll-over here)
        files = self.cl_files
        if not files:
            return None
        clf = files[len(files) - 1]
        cdef FileState f = state_of(self.cl_held, clf)
        if f.wrote_py or f.reserved_py:
            return None     # positions that are not int64s (_state.pxd): Python's
        cdef int64_t pos = f.wrote
        if pos + total + BLANK_RECORD_MIN > f.reserved:   # blocks reserved (and within the file)
            return None
        cq_files = q.files
        if not cq_files:
            return None
        cqmf = cq_files[len(cq_files) - 1]
        cdef FileState cqf = state_of(q.last, cqmf)
        if cqf.wrote_py or cqf.reserved_py or cq.max_phy_py:
            return None
        cdef int64_t cq_pos = cqf.wrote
        if cq_pos + n * CQ_UNIT_SIZE > cqf.reserved:
            return None
        idx = None
        cdef _Held ih = None
        cdef int64_t count
        if self.index_enabled:
            ifiles = self.ifiles
            if not ifiles:
                return None
            idx = ifiles[len(ifiles) - 1]
            self.ix_held = hold_index(self.ix_held, idx)
            ih = self.ix_held
            count = (<int64_t*>ih.hv.buf)[5]
            if count + n * m.nkeys > ih.index_num or \
                    ih.file.reserved_py or \
                    ih.entry_base + (count + n * m.nkeys) * INDEX_ENTRY_SIZE > ih.file.reserved:
                return None
        # write: records, then the batch's first TOTALSIZE; CQ units; index entries
        clock = ws.clock
        cdef bint wall = clock is wall_clock_ms
        self.cl_held = hold_file(self.cl_held, clf)
        q.last = hold_file(q.last, cqmf)
        cdef _Held clh = self.cl_held
        cdef _Held cqh = q.last
        cdef int64_t store_ts, phy, rec_total, base = clh.start, start = pos
        cdef int64_t qoff = self.queue_offsets.get(key, 0), qoff0 = qoff
        cdef int64_t cq_start = cqh.start, max_phy = cq.max_phy
        cdef bint wrote_unit = False
        cdef IndexState st
        cdef uint8_t* u
        cdef Py_ssize_t i
        cdef int32_t first_total = 0
        cdef PutResults res = None
        cdef int64_t one[3]                 # a single put: phys, size, born on the stack
        cdef int64_t* phys = one
        if not single:
            res = PutResults.__new__(PutResults)
            res.phys = phys = <int64_t*>PyMem_Malloc(n * sizeof(int64_t) * 3)
            if phys == NULL:
                raise MemoryError()
            res.sizes = phys + n
        cdef int64_t* sizes = phys + n
        cdef int64_t* born = phys + 2 * n
        # 12 UNIQ_KEY characters + its int32 hash per message, then the KEYS tokens' hashes
        cdef char small[16 + 4 * 16]
        cdef char* tails = small
        if 16 * n + 4 * m.nkeys > <Py_ssize_t>sizeof(small):
            tails = <char*>PyMem_Malloc(16 * n + 4 * m.nkeys)
            if tails == NULL:
                raise MemoryError()
        cdef int32_t* hashes = <int32_t*>(tails + 12 * n)
        cdef int32_t* tok_hashes = hashes + n
        cdef int k
        try:
            for i in range(n):
                born[i] = now_ms() if wall else clock()   # one per draft, as draft() does
            self.uniq_tails(tails, n, born if wall else NULL)
            store_ts = born[n - 1] if wall else clock()   # wall clock: the last born time is now
            if store_ts < ws.store_ts:
                store_ts = ws.store_ts
            if _fault_hook is not None:
                _fault_hook("before-write")
            for i in range(n):
                if i == 1 and _fault_hook is not None:
                    _fault_hook("batch-torn")
                body = <bytes>bodies if single else <bytes>(<list>bodies)[i]
                rec_total = self.fixed + len(t.name_b) + m.plen + len(body)
                phy = base + pos
                self.record(<uint8_t*>clh.v.buf + pos, i == 0, rec_total, t, m, qid, qoff, phy, born[i],
                            store_ts, body, tails + 12 * i)
                if i == 0:
                    first_total = rec_total
                phys[i], sizes[i] = phy, rec_total
                qoff += 1
                pos += rec_total
            put_be32(<uint8_t*>clh.v.buf + start, first_total)   # the batch becomes visible
            f.wrote = pos
            ws.store_ts = store_ts
            self.queue_offsets[key] = qoff
            if rr_next >= 0:
                self.rr[topic] = rr_next
            if _fault_hook is not None:
                _fault_hook("undispatched")
            # dispatch: CQ units (§8.7), then the index (§9.8)
            for i in range(n):
                if phys[i] + sizes[i] <= max_phy:
                    continue
                if qoff0 + i != 0 and (qoff0 + i) * CQ_UNIT_SIZE < cq_start + cq_pos:
                    continue  # "build consume queue repeatedly"
                u = <uint8_t*>cqh.v.buf + cq_pos
                put_be64(u + OFF_UNIT_PHY, phys[i])
                put_be32(u + OFF_UNIT_SIZE, sizes[i])
                put_be64(u + OFF_UNIT_TAGS, m.tags_code)
                cq_pos += CQ_UNIT_SIZE
                max_phy = phys[i] + sizes[i]
                wrote_unit = True
            cqf.wrote = cq_pos
            cq.max_phy = max_phy
            if wrote_unit:
                ws.dispatched_ts_py, ws.dispatched_ts_o = False, None
                ws.dispatched_ts = store_ts
                if _fault_hook is not None:
                    _fault_hook("cq-unit")
            if ih is not None:
                st.mm = <uint8_t*>ih.v.buf
                st.entry_base = ih.entry_base
                st.slot_num = ih.slot_num
                st.h = <int64_t*>ih.hv.buf
                # the UNIQ_KEYs' slots are random in a 20 MB table: hash them all first and
                # prefetch their slots, so the cache misses overlap instead of queueing
                if m.has_keys:
                    token_hashes(t.hash, keys, tok_hashes)
                for i in range(n):
                    hashes[i] = index_uniq(t.hash, self.prefix_b, tails + 12 * i)
                    rmq_prefetch_write(st.mm + INDEX_HEADER_SIZE + (hashes[i] % st.slot_num) * INDEX_SLOT_SIZE)
                for i in range(n):
                    if phys[i] < st.h[3]:
                        continue  # indexed already
                    index_put(&st, hashes[i], phys[i], store_ts)
                    if _fault_hook is not None:
                        _fault_hook("index-key")
                    for k in range(m.nkeys - 1):
                        index_put(&st, tok_hashes[k], phys[i], store_ts)
            if not t.in_table:
                self.new_topics.add(topic)
            if self.sync_flush:
                clf.flush()
            ws._dirty = True
            if single:
                return put_result(topic, qid, phys[0], qoff0, store_ts, sizes[0], self.store_host,
                                  self.prefix_b, tails)
            res.n = n
            res.qoff0, res.store_ts, res.qid = qoff0, store_ts, qid
            res.topic, res.prefix_b, res.store_host = topic, self.prefix_b, self.store_host
            res.tails = tails[:12 * n]
            return res
        finally:
            if tails != small:
                PyMem_Free(tails)


