# included by engine/accel/_check.pyx: the kernels of check's phases after the walk -- index
# entries against the records, one index file's chains, a run of ConsumeQueue units against the
# records, keys per row and keys without an entry (engine/analysis/check_index.py and
# check.py call them; their numpy/Python twins stay the reference).

# ---- index entries against the records ---------------------------------------------------------
# bits of index_entries' `bad`
NO_RECORD = 1        # no record starts at the entry's offset (inside the log)
BAD_TIME = 2         # timeDiff is not its record's (entries after the first)
BAD_HASH = 4         # the hash is none of its record's keys' (or the record is a ROLLBACK)
cdef enum:
    E_NO_RECORD = 1
    E_BAD_TIME = 2
    E_BAD_HASH = 4


cdef inline Py_ssize_t find_row(const int64_t* off, Py_ssize_t n, int64_t phy, Py_ssize_t hint) noexcept nogil:
    """The row whose offset is phy, or -1; index entries come in commitlog order, so the row
    after the last one found is tried first."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    if 0 <= hint < n and off[hint] == phy:
        return hint
    if 0 <= hint + 1 < n and off[hint + 1] == phy:
        return hint + 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if off[mid] < phy:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < n and off[lo] == phy else -1


def index_entries(const uint8_t[::1] ent, const int64_t[::1] off, const int64_t[::1] ts, const int8_t[::1] tran,
                  const int64_t[::1] key_start, const int32_t[::1] key_hash, uint8_t[::1] key_found,
                  int64_t begin, int64_t cl_min, int64_t cl_max, int64_t[::1] rows, uint8_t[::1] bad):
    """Entries 1..n of one index file (`ent`: their 20-byte records) against the commitlog's
    rows: bad[i] its NO_RECORD / BAD_TIME / BAD_HASH bits, rows[i] the row entry i+1 names (-1:
    none) where bad[i] is set and for the first and last entries (the others are not written:
    pages of a fresh array nobody touches cost nothing); key_found[k] set for each key whose
    (hash, offset) has an entry. Returns the number of entries with a bad bit."""
    cdef Py_ssize_t n = ent.shape[0] // 20, nr = off.shape[0], i, r = -1, k, res, prev_res = -1
    cdef const uint8_t* p
    cdef int64_t phy, h, d, want
    cdef int32_t td
    cdef int b, hit, nbad = 0
    with nogil:
        for i in range(n):
            p = &ent[20 * i]
            h = be32(p)
            phy = be64(p + 4)
            td = be32(p + 12)
            res = find_row(&off[0], nr, phy, r) if nr else -1
            b = 0
            if res < 0:
                if cl_min <= phy < cl_max:
                    b = E_NO_RECORD
                r = prev_res   # (the search starts after the last entry's row)
                prev_res = res
                bad[i] = b
                nbad += b != 0
                if b or i == 0 or i == n - 1:
                    rows[i] = res
                continue
            r = prev_res = res
            if i > 0:  # entry 1 is relative to the inherited begin
                want = 0
                if begin > 0:
                    d = ts[r] - begin
                    want = d / 1000  # C truncates toward zero, as Java does
                    if want < 0:
                        want = 0
                    elif want > 0x7FFFFFFF:
                        want = 0x7FFFFFFF
                if td != want:
                    b |= E_BAD_TIME
            hit = 0
            for k in range(key_start[r], key_start[r + 1]):
                if key_hash[k] == h:
                    key_found[k] = 1
                    hit = 1
            if not hit or tran[r] == 0x0C:
                b |= E_BAD_HASH
            bad[i] = b
            nbad += b != 0
            if b or i == 0 or i == n - 1:
                rows[i] = res
    return nbad


# ---- one index file's chains ----------------------------------------------------------------------
cdef inline void note(int64_t[::1] out, Py_ssize_t* n, int64_t v) noexcept nogil:
    if n[0] < out.shape[0]:
        out[n[0]] = v
        n[0] += 1


cdef extern from *:
    """
    /* a % d for 32-bit a by a multiplication (Lemire's fastmod): the division was most of
       the chains pass */
    static inline uint64_t rmq_fastmod_m(uint32_t d) { return UINT64_C(0xFFFFFFFFFFFFFFFF) / d + 1; }
    #if defined(__SIZEOF_INT128__)
    static inline uint32_t rmq_fastmod(uint32_t a, uint64_t m, uint32_t d) {
        return (uint32_t)(((__uint128_t)(m * a) * d) >> 64);
    }
    #else
    static inline uint32_t rmq_fastmod(uint32_t a, uint64_t m, uint32_t d) { (void)m; return a % d; }
    #endif
    """
    uint64_t rmq_fastmod_m(uint32_t d) noexcept nogil
    uint32_t rmq_fastmod(uint32_t a, uint64_t m, uint32_t d) noexcept nogil


cdef inline int64_t slot_of(int64_t h, uint64_t M, int64_t slot_num) noexcept nogil:
    """engine.format.index_layout.slot_of: h mod slot_num; a negative (damaged) keyHash is in
    no slot (NO_SLOT)."""
    if h >= 0:
        return rmq_fastmod(<uint32_t>h, M, <uint32_t>slot_num)
    return NO_SLOT


def chains(const uint8_t[::1] ent, const uint8_t[::1] slots, int64_t count, int64_t slot_num, int64_t[:, ::1] out):
    """check_index._chains' findings for one index file, in one pass over the slots and one
    over the entries (`ent`: entries 1..n, 20 bytes each): row k of `out` gets the first
    out.shape[1] indexes of finding k (0 links to no older entry, 1 slots beyond the entries,
    2 negative hashes, 3 links into another slot's chain, 4 links to a newer entry, 5
    unreachable entries, 6 slots naming an entry of another slot). Returns the count per row,
    or None when a slot names an entry past the entries read (the numpy twin decides)."""
    cdef Py_ssize_t n = ent.shape[0] // 20, s = slots.shape[0] // 4, i, j, k
    cdef Py_ssize_t c[7]
    cdef int64_t lim = count if count > 1 else 1, p, v, h, so_i, so_p
    cdef uint64_t M
    cdef bytearray reached_b = bytearray(n + 1)
    cdef uint8_t* reached = <uint8_t*>(<char*>reached_b)
    for k in range(7):
        c[k] = 0
    if slot_num <= 0 or slot_num > 0x7FFFFFFF:
        return None
    M = rmq_fastmod_m(<uint32_t>slot_num)
    with nogil:
        for j in range(s):   # slots: beyond the entries, the entries they name, and in the right slot
            if j + AHEAD_SLOTS < s:
                v = be32(&slots[4 * (j + AHEAD_SLOTS)])
                if 0 < v <= n:
                    rmq_prefetch(&ent[20 * (v - 1)])
            v = be32(&slots[4 * j])
            if v != 0 and (v < 0 or v >= lim):
                note(out[1], &c[1], j)
            elif v > 0:
                if v > n:
                    break
                reached[v] = 1
                if slot_of(be32(&ent[20 * (v - 1)]), M, slot_num) != j:
                    note(out[6], &c[6], j)
        else:
            j = -1
    if j >= 0:
        return None
    with nogil:
        for i in range(n):   # entries: hashes, links
            if i + AHEAD < n:   # the older entry this one links to, asked for a few entries ahead
                p = be32(&ent[20 * (i + AHEAD) + 16])
                if 0 < p <= i + AHEAD:
                    rmq_prefetch(&ent[20 * (p - 1)])
            h = be32(&ent[20 * i])
            p = be32(&ent[20 * i + 16])
            if h < 0:
                note(out[2], &c[2], i)
            if p < 0 or p >= i + 1:
                note(out[0], &c[0], i)
                continue
            if p > 0:
                reached[p] = 1
                so_i = slot_of(h, M, slot_num)
                so_p = slot_of(be32(&ent[20 * (p - 1)]), M, slot_num)
                if so_p != so_i:
                    note(out[3], &c[3], i)
                if p > 1 and be32(&ent[20 * (p - 1) + 12]) > be32(&ent[20 * i + 12]):
                    note(out[4], &c[4], i)
        for i in range(n):
            if not reached[i + 1]:
                note(out[5], &c[5], i)
    return [c[k] for k in range(7)]


# ---- one run of ConsumeQueue units against the records ----------------------------------------------
cdef inline Py_ssize_t gallop(const int64_t* off, Py_ssize_t n, int64_t phy, Py_ssize_t* hint) noexcept nogil:
    """The row whose offset is phy, or -1. A queue's units point at ascending offsets, so the
    search runs forward from the last answer in growing steps (other queues' rows lie between)."""
    cdef Py_ssize_t lo = 0, hi = n, step = 1, h = hint[0], mid
    if 0 <= h < n and off[h] <= phy:
        lo = h
        while lo + step < n and off[lo + step] <= phy:
            lo += step
            step <<= 1
        hi = lo + step + 1 if lo + step + 1 < n else n
    while lo < hi:
        mid = (lo + hi) >> 1
        if off[mid] < phy:
            lo = mid + 1
        else:
            hi = mid
    hint[0] = lo
    return lo if lo < n and off[lo] == phy else -1


def cq_units(const uint8_t[::1] units, int64_t first, int32_t tid, int32_t qid, bint lmq, const int64_t[::1] off,
             const int32_t[::1] topic, const int32_t[::1] rqid, const int64_t[::1] qoff, const int32_t[::1] size,
             const int8_t[::1] tran, const int64_t[::1] tags, int64_t cl_min, int64_t cl_max, int8_t[::1] code,
             int64_t[::1] rows, uint8_t[::1] found, uint8_t[::1] ok):
    """check's rules for units first.. of queue (tid, qid) (`units`: their 20-byte records):
    code[i] as engine.analysis.check's _unit_codes (0 fine, 1 past the log, 2 no record there,
    3 LMQ unit against its record, 4 another record, 5 an undispatched transaction record,
    6 tagsCode), rows[i] the row it names (-1 none) where code[i] is set (elsewhere not
    written), found[i] a non-LMQ unit that reached a record; ok[row] set for a record a unit of
    its own queue offset reached. Returns the number of units with a code."""
    cdef Py_ssize_t n = units.shape[0] // 20, nr = off.shape[0], i, hint = 0, r
    cdef const uint8_t* u
    cdef int64_t phy, utags, q
    cdef int32_t usize
    cdef int8_t c
    cdef int8_t t
    cdef Py_ssize_t nbad = 0
    with nogil:
        for i in range(n):
            u = &units[20 * i]
            phy = be64(u)
            usize = be32(u + 8)
            utags = be64(u + 12)
            q = first + i
            found[i] = 0
            c = 0
            if phy == 0 and usize == 0x7FFFFFFF:   # a filler
                code[i] = 0
                continue
            r = gallop(&off[0], nr, phy, &hint) if nr else -1
            if r < 0:
                if phy >= cl_max:
                    c = 1
                elif phy >= cl_min:
                    c = 2
            elif lmq:
                if size[r] != usize or tags[r] != utags:
                    c = 3
            else:
                found[i] = 1
                t = tran[r]
                if topic[r] != tid or rqid[r] != qid or qoff[r] != q or size[r] != usize:
                    c = 4
                else:
                    ok[r] = 1
                    if t != 0 and t != 8:
                        c = 5
                    elif tags[r] != utags:
                        c = 6
            code[i] = c
            if c:
                rows[i] = r
                nbad += 1
    return nbad


# ---- keys per row, keys without an entry -----------------------------------------------------
def key_starts(const int32_t[::1] key_rec, int64_t[::1] out):
    """out[r] = the first key of row r (key_rec ascending), out[n] = the number of keys."""
    cdef Py_ssize_t nk = key_rec.shape[0], n = out.shape[0] - 1, k, cur = 0
    with nogil:
        for k in range(nk):
            while cur <= key_rec[k] and cur <= n:
                out[cur] = k
                cur += 1
        while cur <= n:
            out[cur] = nk
            cur += 1


def keys_missing(const int32_t[::1] key_rec, const int64_t[::1] off, const int8_t[::1] tran,
                 const uint8_t[::1] key_found, int64_t lo, int64_t hi, int64_t[::1] first):
    """Keys of the records in [lo, hi] (not ROLLBACK) without an entry: how many, the first
    len(first) of them (key indexes) in `first`."""
    cdef Py_ssize_t nk = key_rec.shape[0], k, c = 0, room = first.shape[0]
    cdef int64_t r, o
    with nogil:
        for k in range(nk):
            if key_found[k]:
                continue
            r = key_rec[k]
            o = off[r]
            if lo <= o <= hi and tran[r] != 0x0C:
                if c < room:
                    first[c] = k
                c += 1
    return c
