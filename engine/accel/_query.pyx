# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Key queries in one call: the "topic#key" hash, the slot walk of every index file and the
time test, in C. The pure-Python twin (IndexService.query_offset over IndexFile.select) stays
the reference; tests/test_query_kernel.py compares the two answer for answer, and
tests/test_query_batch.py every batched answer with the key's single query.

A KeyIndex is built over IndexService.files once and checks on every call that the list still
holds the same files (same length, same first and last object), so a roll, a deletion or a
reload makes the service build a new one. Each file's header is read from its IndexHeader's
array('q') (the writer updates it in place; reload_header copies into it), never cached.

Every walk is one Walk state moved by the same steps (_open, _slot, _step; the file loop's
_file_from, _stops_after): a single query runs them to the end; query_many interleaves many
keys' walks so their cache misses overlap (each step is a dependent miss in a large index)."""
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.stdint cimport uint8_t
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject

from engine.format.layout cimport (ACCEL_DIR_LINE, ACCEL_DIR_SLOTS, ACCEL_RECORD_SIZE, INDEX_ENTRY_SIZE,
                                   INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, OFF_ACCEL_HASH, OFF_ACCEL_LINE_LENGTHS,
                                   OFF_ACCEL_LINE_RECORDS, OFF_ACCEL_PHY, OFF_INDEX_COUNT,
                                   OFF_ACCEL_TIMEDIFF, OFF_ENTRY_HASH, OFF_ENTRY_PHY, OFF_ENTRY_PREV,
                                   OFF_ENTRY_TIMEDIFF)

from engine.accel._bytes cimport be32, be64, le32, le64
from engine.accel._javahash cimport index_key_hash, jhash_str

cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    static inline void rmq_q_prefetch(const unsigned char *p, int64_t len) {
        __builtin_prefetch(p, 0, 3); __builtin_prefetch(p + len - 1, 0, 3);  /* an entry can straddle two lines */
    }
    static inline void rmq_q_prefetch_span(const unsigned char *p, int64_t len) {
        for (int64_t x = 0; x < len; x += 64) __builtin_prefetch(p + x, 0, 3);
        if (len > 0) __builtin_prefetch(p + len - 1, 0, 3);
    }
    """
    void rmq_q_prefetch(const unsigned char *p, int64_t len) nogil
    void rmq_q_prefetch_span(const unsigned char *p, int64_t len) nogil

# IndexHeader.values order (engine/store/index_file.py _HEADER_FIELDS)
cdef enum:
    H_BEGIN_TS = 0
    H_END_TS = 1
    H_END_PHY = 3
    H_INDEX_COUNT = 5


cdef enum:
    BATCH_LANES = 16   # keys walked at once by query_many (misses in flight)


cdef struct Walk:
    # One key's walk through the index files (a single query's, or one lane of a batch).
    int32_t key_hash
    Py_ssize_t max_num, got     # the answer's bound and the offsets found so far
    Py_ssize_t file             # the file walked (hdrs/bufs index)
    const unsigned char *buf    # its map, and its geometry and header as read when the walk entered it
    int64_t entry_base, index_num, count, begin_ts
    int64_t n, steps, max_steps  # the entry read, and the steps taken: at most min(indexCount, maxIndexNum)
    bint at_slot                # the next address is the file's slot (else an entry)
    bint hit                    # the last entry read is an answer: phy
    int64_t phy


cdef inline int64_t _entry_time(int64_t begin_ts, int32_t diff) noexcept nogil:
    """IndexFile.entry_time: beginTimestamp + timeDiff * 1000, wrapping as Java's long (no
    signed overflow in C)."""
    return <int64_t>(<uint64_t>begin_ts + <uint64_t>(<int64_t>diff * 1000))


cdef inline const unsigned char *_goto(Walk *w, int64_t n) noexcept nogil:
    """Entry n's address if the walk may read it (answer not full, within the step bound, n
    inside the file), else NULL: the end of this file's chain."""
    if w.got >= w.max_num or w.steps >= w.max_steps or n >= w.index_num:
        return NULL
    w.steps += 1
    w.n = n
    return w.buf + w.entry_base + n * INDEX_ENTRY_SIZE


cdef inline const unsigned char *_slot(Walk *w, const unsigned char *p) noexcept nogil:
    """The slot at p read: its newest entry's address, NULL for an empty slot or one pointing
    past indexCount (or a file with no entry)."""
    cdef int64_t n = be32(p)
    w.hit = False
    if n <= 0 or n > w.count or w.count <= 1:
        return NULL
    return _goto(w, n)


cdef inline const unsigned char *_step(Walk *w, const unsigned char *e, int64_t begin, int64_t end) noexcept nogil:
    """IndexFile.select's step over the entry at e: w.hit when it is the key stored within
    [begin, end]; the prev entry's address, NULL where the chain ends (a negative time diff,
    a prev out of range or to itself, an entry older than `begin`)."""
    cdef int32_t diff = be32(e + OFF_ENTRY_TIMEDIFF), prev
    cdef int64_t t
    w.hit = False
    if diff < 0:
        return NULL
    t = _entry_time(w.begin_ts, diff)
    prev = be32(e + OFF_ENTRY_PREV)
    if be32(e + OFF_ENTRY_HASH) == w.key_hash and begin <= t <= end:
        w.phy = be64(e + OFF_ENTRY_PHY)
        w.hit = True
        w.got += 1
    if prev <= 0 or prev > w.count or prev == w.n or t < begin:
        return NULL
    return _goto(w, prev)


def key_hash(str topic not None, str key not None):
    """IndexFile.indexKeyHashMethod of "topic#key" without building the string."""
    return _key_hash(topic, key)


cdef object _last_topic = None   # the topic whose "topic#" hash state _last_prefix holds
cdef uint32_t _last_prefix = 0


cdef int32_t _key_hash(str topic, str key):
    global _last_topic, _last_prefix
    cdef uint32_t h
    if topic is _last_topic:      # a run of queries on one topic: "topic#" hashed once
        h = _last_prefix
    else:
        h = jhash_str(0, topic) * 31u + 35u  # '#'
        _last_topic, _last_prefix = topic, h
    return index_key_hash(jhash_str(h, key))


cdef class KeyIndex:
    """The index files of one IndexService, ready for compiled walks."""
    cdef object files           # the service's list (identity checked per call)
    cdef object first, last
    cdef Py_ssize_t n
    cdef list keep              # memoryviews that keep every map and header alive
    cdef const unsigned char **bufs
    cdef Py_ssize_t *buf_len
    cdef int64_t **hdrs
    cdef int64_t *slot_nums
    cdef int64_t *index_nums
    cdef const unsigned char **acc_dir   # each file's chain copy (engine/store/index_accel.py):
    cdef const unsigned char **acc_rec   # its directory and records,
    cdef int64_t *acc_count              # the indexCount it holds (-1: no copy)
    cdef int64_t *acc_fcount             # and the one its file's header had (another writer's)
    cdef object _ts_obj, _phy_obj   # the last file's endTimestamp / endPhyOffset as ints, reused
    cdef int64_t _ts, _phy          # while the header still holds these values

    def __cinit__(self, list files):
        cdef Py_ssize_t i, n = len(files)
        cdef const unsigned char[::1] b
        cdef long long[::1] hv
        self.files = files
        self.n = n
        self.first = files[0] if n else None
        self.last = files[n - 1] if n else None
        self.keep = []
        self.bufs = <const unsigned char **>PyMem_Malloc((n + 1) * sizeof(void *))
        self.buf_len = <Py_ssize_t *>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
        self.hdrs = <int64_t **>PyMem_Malloc((n + 1) * sizeof(void *))
        self.slot_nums = <int64_t *>PyMem_Malloc((n + 1) * sizeof(int64_t))
        self.index_nums = <int64_t *>PyMem_Malloc((n + 1) * sizeof(int64_t))
        self.acc_dir = <const unsigned char **>PyMem_Malloc((n + 1) * sizeof(void *))
        self.acc_rec = <const unsigned char **>PyMem_Malloc((n + 1) * sizeof(void *))
        self.acc_count = <int64_t *>PyMem_Malloc((n + 1) * sizeof(int64_t))
        self.acc_fcount = <int64_t *>PyMem_Malloc((n + 1) * sizeof(int64_t))
        if not (self.bufs and self.buf_len and self.hdrs and self.slot_nums and self.index_nums and self.acc_dir
                and self.acc_rec and self.acc_count and self.acc_fcount):
            raise MemoryError()
        for i in range(n):
            f = files[i]
            b = f.file.mm
            hv = f.header.values
            self.keep.append(b)
            self.keep.append(hv)
            self.bufs[i] = &b[0] if b.shape[0] else NULL
            self.buf_len[i] = b.shape[0]
            self.hdrs[i] = <int64_t *>&hv[0]
            self.slot_nums[i] = f.slot_num
            self.index_nums[i] = f.index_num
            self._attach(i, getattr(f, "accel", None))

    def __dealloc__(self):
        PyMem_Free(self.bufs)
        PyMem_Free(self.buf_len)
        PyMem_Free(self.hdrs)
        PyMem_Free(self.slot_nums)
        PyMem_Free(self.index_nums)
        PyMem_Free(self.acc_dir)
        PyMem_Free(self.acc_rec)
        PyMem_Free(self.acc_count)
        PyMem_Free(self.acc_fcount)

    cdef _attach(self, Py_ssize_t i, accel):
        """File i's chain copy (an IndexAccel, or None)."""
        cdef const unsigned char[::1] d, r
        self.acc_count[i] = -1
        if accel is None:
            return
        d = accel.directory.reshape(-1)
        r = accel.records.view("u1")
        self.keep.append(d)
        self.keep.append(r)
        self.acc_dir[i] = &d[0]
        self.acc_rec[i] = &r[0] if r.shape[0] else NULL
        self.acc_count[i] = accel.index_count
        self.acc_fcount[i] = accel.file_count

    def fresh(self, list files):
        """Still the same files in the same list?"""
        cdef Py_ssize_t n = len(files)
        if files is not self.files or n != self.n:
            return False
        if n == 0:
            return True
        return files[0] is self.first and files[n - 1] is self.last

    cdef inline object _end_ts(self, int64_t v):
        """The answer's lastUpdateTimestamp: one int object while the header keeps the value."""
        if self._ts_obj is None or v != self._ts:
            self._ts_obj, self._ts = v, v
        return self._ts_obj

    cdef inline object _end_phy(self, int64_t v):
        if self._phy_obj is None or v != self._phy:
            self._phy_obj, self._phy = v, v
        return self._phy_obj

    cdef inline Py_ssize_t _file_from(self, Py_ssize_t i, Py_ssize_t got, Py_ssize_t max_num, int64_t begin,
                                      int64_t end) noexcept:
        """IndexService.queryOffset's file loop from file i down (newest first): the first file
        whose time range meets [begin, end]; -1 when the loop ends before one (no file left, or
        _stops_after a file it passes)."""
        cdef int64_t *h
        while i >= 0:
            h = self.hdrs[i]
            if ((begin < h[H_BEGIN_TS] and end > h[H_END_TS])
                    or h[H_BEGIN_TS] <= begin <= h[H_END_TS] or h[H_BEGIN_TS] <= end <= h[H_END_TS]):
                return i
            if self._stops_after(i, got, max_num, begin):
                return -1
            i -= 1
        return -1

    cdef inline bint _stops_after(self, Py_ssize_t i, Py_ssize_t got, Py_ssize_t max_num, int64_t begin) noexcept:
        """The loop ends after file i when it begins before `begin` or the answer is full."""
        return self.hdrs[i][H_BEGIN_TS] < begin or got >= max_num

    cdef inline const unsigned char *_open(self, Walk *w, Py_ssize_t i) noexcept:
        """Enter file i: its slot's address for w.key_hash, NULL when the file cannot be walked
        (no map, shorter than its geometry, a slot count that is not a positive int)."""
        cdef int64_t slot_num = self.slot_nums[i], count = self.hdrs[i][H_INDEX_COUNT]
        w.file = i
        w.buf = self.bufs[i]
        w.index_num = self.index_nums[i]
        w.entry_base = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
        w.count = count
        w.begin_ts = self.hdrs[i][H_BEGIN_TS]
        w.steps = 0
        w.max_steps = count if count < w.index_num else w.index_num
        w.at_slot = True
        if w.buf == NULL or w.entry_base + w.index_num * INDEX_ENTRY_SIZE > self.buf_len[i] \
                or not 0 < slot_num <= 0x7FFFFFFF:   # an int in RocketMQ: the 32-bit modulo below
            return NULL
        return w.buf + INDEX_HEADER_SIZE + <int64_t>(<uint32_t>w.key_hash % <uint32_t>slot_num) * INDEX_SLOT_SIZE

    cdef inline const unsigned char *_copy_line(self, Py_ssize_t i, int32_t key_hash) noexcept:
        """The directory line of key_hash's slot in file i's chain copy; NULL without a copy or
        when the file has changed since it was made: another indexCount in this process's
        header or in the file's (IndexAccel.fresh)."""
        if self.acc_count[i] != self.hdrs[i][H_INDEX_COUNT] \
                or self.acc_fcount[i] != be32(self.bufs[i] + OFF_INDEX_COUNT):
            return NULL
        return self.acc_dir[i] + <int64_t>((<uint32_t>key_hash % <uint32_t>self.slot_nums[i]) // ACCEL_DIR_SLOTS) * ACCEL_DIR_LINE

    cdef inline const unsigned char *_first_read(self, Py_ssize_t i, int32_t key_hash) noexcept:
        """The first address a walk of file i reads for key_hash (its copy's directory line,
        else its slot), NULL when there is nothing to read."""
        cdef Walk w
        cdef const unsigned char *line = self._copy_line(i, key_hash)
        if line != NULL:
            return line
        w.key_hash = key_hash
        return self._open(&w, i)

    cdef Py_ssize_t _select_copy(self, Py_ssize_t i, const unsigned char *line, int32_t key_hash,
                                 Py_ssize_t max_num, int64_t begin, int64_t end, list out) except -1:
        """_select over file i's chain copy: the same entries in the same order (the copy holds
        each slot's chain as select walks it), the same tests. The newest record is in the
        slot's directory line; the older ones (a chain of two or more) are requested together:
        one miss, or two, at any chain length."""
        cdef uint32_t k = (<uint32_t>key_hash % <uint32_t>self.slot_nums[i]) % ACCEL_DIR_SLOTS, j
        cdef const unsigned char *lengths = line + OFF_ACCEL_LINE_LENGTHS
        cdef Py_ssize_t n = lengths[k], got = len(out), x
        cdef int64_t start, t, begin_ts = self.hdrs[i][H_BEGIN_TS]
        cdef const unsigned char *r = line + OFF_ACCEL_LINE_RECORDS + k * ACCEL_RECORD_SIZE
        cdef const unsigned char *older = NULL
        if n > 1:
            start = <uint32_t>le32(line)
            for j in range(k):
                if lengths[j] > 1:
                    start += lengths[j] - 1
            older = self.acc_rec[i] + start * ACCEL_RECORD_SIZE
            rmq_q_prefetch_span(older, (n - 1) * ACCEL_RECORD_SIZE)
        for x in range(n):
            if got >= max_num:
                break
            if x:
                r = older + (x - 1) * ACCEL_RECORD_SIZE
            t = _entry_time(begin_ts, le32(r + OFF_ACCEL_TIMEDIFF))
            if le32(r + OFF_ACCEL_HASH) == key_hash and begin <= t <= end:
                out.append(le64(r + OFF_ACCEL_PHY))
                got += 1
            if t < begin:
                break
        return got

    cdef Py_ssize_t _select(self, Py_ssize_t i, int32_t key_hash, Py_ssize_t max_num, int64_t begin,
                            int64_t end, list out) except -1:
        """IndexFile.select: the newest entry first, hash and time tested, at most min(indexCount,
        maxIndexNum) steps so a cycle ends (in the file's chain copy when it has a fresh one)."""
        cdef const unsigned char *line = self._copy_line(i, key_hash)
        if line != NULL:
            return self._select_copy(i, line, key_hash, max_num, begin, end, out)
        cdef Walk w
        w.key_hash, w.max_num, w.got = key_hash, max_num, len(out)
        cdef const unsigned char *p = self._open(&w, i)
        if p != NULL:
            p = _slot(&w, p)
        while p != NULL:
            p = _step(&w, p, begin, end)
            if w.hit:
                out.append(w.phy)
        return w.got

    cdef list _query(self, int32_t key_hash, Py_ssize_t max_num, int64_t begin, int64_t end):
        """IndexService.queryOffset's file loop: newest file first; a file is walked when its
        time range meets [begin, end]; stop at a file that begins before `begin` or when full."""
        cdef list out = []
        cdef Py_ssize_t got = 0
        cdef Py_ssize_t i = self._file_from(self.n - 1, 0, max_num, begin, end)
        while i >= 0:
            got = self._select(i, key_hash, max_num, begin, end, out)
            if self._stops_after(i, got, max_num, begin):
                break
            i = self._file_from(i - 1, got, max_num, begin, end)
        return out

    cdef inline const unsigned char *_walk_from(self, Walk *w, Py_ssize_t i, int64_t begin, int64_t end) noexcept:
        """_query's loop for a batch lane, from file i (-1: none) down: the slot address of the
        next file walked, NULL when the key's answer is complete."""
        cdef const unsigned char *p
        while i >= 0:
            p = self._open(w, i)
            if p != NULL:
                return p
            if self._stops_after(i, w.got, w.max_num, begin):
                return NULL
            i = self._file_from(i - 1, w.got, w.max_num, begin, end)
        return NULL

    cdef inline const unsigned char *_advance(self, Walk *w, const unsigned char *p, int64_t begin,
                                              int64_t end) noexcept:
        """One read of a lane's walk at p (a slot or an entry, prefetched before): the next
        address to read, NULL when the key's answer is complete; w.hit when p was an answer."""
        if w.at_slot:
            w.at_slot = False
            p = _slot(w, p)
        else:
            p = _step(w, p, begin, end)
        if p != NULL:
            return p
        if self._stops_after(w.file, w.got, w.max_num, begin):
            return NULL
        return self._walk_from(w, self._file_from(w.file - 1, w.got, w.max_num, begin, end), begin, end)

    def query(self, str topic not None, str key not None, Py_ssize_t max_num, int64_t begin, int64_t end):
        """Commitlog offsets for "topic#key", newest first, as IndexService.query_offset."""
        return self._query(_key_hash(topic, key), max_num, begin, end)

    def query_offset(self, str topic not None, str key not None, Py_ssize_t max_num, Py_ssize_t cap, int64_t begin,
                     int64_t end):
        """IndexService.query_offset's whole answer (offsets, lastUpdateTimestamp,
        lastUpdatePhyOffset); a non-zero `cap` lowers max_num (maxMsgsNumBatch)."""
        if cap != 0 and cap < max_num:  # min(max_num, cap) if cap, as the reference
            max_num = cap
        cdef list out = self._query(_key_hash(topic, key), max_num, begin, end)
        if self.n == 0:
            return out, 0, 0
        cdef int64_t *h = self.hdrs[self.n - 1]
        return out, self._end_ts(h[H_END_TS]), self._end_phy(h[H_END_PHY])

    def query_many(self, str topic not None, keys, Py_ssize_t max_num, int64_t begin, int64_t end):
        """query() for every key of `keys`: one list of offsets per key, in order, each exactly
        query()'s. The walks overlap their cache misses (group prefetching): BATCH_LANES keys
        are walked at once, each lane's next slot or entry prefetched while the other lanes
        read theirs; a lane whose answer is complete takes the next key."""
        cdef list ks = keys if type(keys) is list else list(keys)
        cdef Py_ssize_t nk = len(ks), next_key = 0, l, idle = 0
        cdef list answers = [None] * nk
        cdef list outs = [None] * BATCH_LANES   # each lane's answer list
        cdef Walk lanes[BATCH_LANES]
        cdef const unsigned char *at[BATCH_LANES]   # each lane's next read, prefetched; NULL: idle
        cdef const unsigned char *p
        cdef Walk *w
        cdef str k
        cdef list out
        for l in range(BATCH_LANES):
            at[l] = NULL
        while idle < BATCH_LANES:   # rounds over the lanes until a round finds them all idle
            idle = 0
            for l in range(BATCH_LANES):
                w = &lanes[l]
                p = at[l]
                if p != NULL:
                    p = self._advance(w, p, begin, end)
                    if w.hit:
                        (<list>outs[l]).append(w.phy)
                while p == NULL and next_key < nk:   # the lane is free: it takes the next key
                    k = ks[next_key]
                    if k is None:   # (a str-typed name takes None; the hash must not)
                        raise TypeError("query_many: a key is None")
                    w.key_hash, w.max_num, w.got = _key_hash(topic, k), max_num, 0
                    out = []
                    answers[next_key] = outs[l] = out
                    next_key += 1
                    p = self._walk_from(w, self._file_from(self.n - 1, 0, max_num, begin, end), begin, end)
                if p != NULL:
                    rmq_q_prefetch(p, INDEX_SLOT_SIZE if w.at_slot else INDEX_ENTRY_SIZE)
                else:
                    idle += 1
                at[l] = p
        return answers



cdef int64_t LONG_MAX = 0x7FFFFFFFFFFFFFFF


cdef class IndexState:
    """An IndexService's files, settings and compiled walker (`_kidx`), which query_fast reads
    as C fields: the service owns one (`IndexService.state`) and reads and writes them there."""

    def __init__(self, cfg=None):
        self.files, self.cfg, self._kidx = [], cfg, None


cdef object query_fast(IndexState st, str topic, str key, Py_ssize_t max_num, begin, end, cap):
    """IndexService.query_offset's answer in the common case -- the compiled walker `_kidx`
    built over the current `files`, plain int64 times -- or None for every other case (the
    reference answers those)."""
    cdef KeyIndex ki
    cdef int64_t b, e = 0
    cdef int ovf = 0
    cdef Py_ssize_t c, n
    cdef list files
    if not (type(st._kidx) is KeyIndex and type(begin) is int and type(end) is int and type(st.files) is list):
        return None
    ki = <KeyIndex>st._kidx
    cdef int32_t h = _key_hash(topic, key)
    cdef const unsigned char *first
    if ki.n > 0:   # the newest file's first read, asked for before the checks below (they run under the miss)
        first = ki._first_read(ki.n - 1, h)
        if first != NULL:
            rmq_q_prefetch(first, INDEX_SLOT_SIZE)
    files = <list>st.files
    n = len(files)
    if not (files is ki.files and n == ki.n and (n == 0 or (files[0] is ki.first and files[n - 1] is ki.last))):
        return None
    b = PyLong_AsLongLongAndOverflow(begin, &ovf)
    if ovf == 0:
        e = PyLong_AsLongLongAndOverflow(end, &ovf)
    if ovf != 0:  # beyond int64: the reference clamps
        return None
    c = st.cfg.maxMsgsNumBatch if cap is None else cap
    if c != 0 and c < max_num:
        max_num = c
    out = ki._query(h, max_num, b, e)
    if n == 0:
        return out, 0, 0
    return out, ki._end_ts(ki.hdrs[n - 1][H_END_TS]), ki._end_phy(ki.hdrs[n - 1][H_END_PHY])


def query_offset(idx, topic, key, Py_ssize_t max_num, begin=0, end=LONG_MAX, cap=None, bint accel=True):
    """IndexService.query_offset compiled: the class assigns this function as the method when
    the module is built (its _query_offset_py is the reference and says what it answers). The
    common case is query_fast's, without a Python frame; any other the reference's."""
    if accel and type(topic) is str and type(key) is str:
        st = idx.state
        if type(st) is IndexState:
            r = query_fast(<IndexState>st, <str>topic, <str>key, max_num, begin, end, cap)
            if r is not None:
                return r
    return idx._query_offset_py(topic, key, max_num, begin, end, cap, accel)
