# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The schemaless Protobuf wire walk (engine/format/protobuf_wire.py keeps the pure-Python
twin and the rules): the same fields, values and reasons, read in C. A body's decode then
costs about what json.loads of the same data does."""
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.math cimport fabs, isinf
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

DEF MAX_DEPTH = 32
DEF MAX_FIELD = (1 << 29) - 1


class _WireError(ValueError):
    pass


cdef inline bint _has_ctrl(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint8_t c
    for i in range(n):
        c = p[i]
        if (c < 0x20 and c != 0x09 and c != 0x0A and c != 0x0D) or c == 0x7F:
            return True
    return False


cdef object _text(const uint8_t* p, Py_ssize_t n):
    if _has_ctrl(p, n):
        return None
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        return None


cdef Py_ssize_t _varint(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, uint64_t* out) except -1:
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if pos >= end:
            raise _WireError(f"varint cut at byte {pos}")
        b = p[pos]
        pos += 1
        if shift < 64:
            result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = result
            return pos
        shift += 7
        if shift >= 70:
            raise _WireError(f"varint longer than 10 bytes at byte {pos}")


cdef inline Py_ssize_t _field_head(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, uint64_t* num, int* wt,
                                   uint64_t* v) except -1:
    """One field's key and what the wire says of its size, checked (both walks read fields
    through it): wire type 0 its varint in `v`, 2 its length in `v` (it fits), 1 and 5 room for
    the fixed bytes; returns the position after the key (and a varint's value, or a length)."""
    pos = _varint(p, pos, end, v)
    num[0] = v[0] >> 3
    wt[0] = v[0] & 7
    if num[0] == 0 or num[0] > MAX_FIELD:
        raise _WireError(f"field number {num[0]} at byte {pos}")
    if wt[0] == 0:
        pos = _varint(p, pos, end, v)
    elif wt[0] == 2:
        pos = _varint(p, pos, end, v)
        if v[0] > <uint64_t>(end - pos):
            raise _WireError(f"field {num[0]}: {v[0]} bytes announced, {end - pos} left")
    elif wt[0] == 1 and pos + 8 > end:
        raise _WireError(f"field {num[0]}: fixed64 cut")
    elif wt[0] == 5 and pos + 4 > end:
        raise _WireError(f"field {num[0]}: fixed32 cut")
    elif wt[0] > 5:
        raise _WireError(f"wire type {wt[0]} at byte {pos}")
    return pos

cdef list _fields(bytes buf, const uint8_t* p, Py_ssize_t* at, Py_ssize_t end, int depth, long group):
    cdef list out = []
    cdef Py_ssize_t pos = at[0]
    cdef uint64_t v, num
    cdef int wt
    cdef object value
    while pos < end:
        pos = _field_head(p, pos, end, &num, &wt, &v)
        if wt == 0:
            value = v
        elif wt == 2:
            value = _len_value(buf, p, pos, pos + <Py_ssize_t>v, depth)
            pos += <Py_ssize_t>v
        elif wt == 1:
            value = buf[pos:pos + 8]
            pos += 8
        elif wt == 5:
            value = buf[pos:pos + 4]
            pos += 4
        elif wt == 3:
            if depth >= MAX_DEPTH:
                raise _WireError("groups nested too deep")
            at[0] = pos
            value = _fields(buf, p, at, end, depth + 1, <long>num)
            pos = at[0]
        elif wt == 4:
            if group != <long>num:
                raise _WireError(f"END_GROUP {num} without its START_GROUP")
            at[0] = pos
            return out
        out.append((num, wt, value))
    if group >= 0:
        raise _WireError(f"group {group} never ends")
    at[0] = pos
    return out


cdef bint _plausible(list fields):
    cdef tuple f
    for f in fields:
        if f[0] >= 64:
            return False
    return True


cdef object _len_value(bytes buf, const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, int depth):
    cdef Py_ssize_t n = end - pos, at
    cdef uint8_t first
    cdef list sub
    if n == 0:
        return ""
    first = p[pos]
    if depth < MAX_DEPTH and (first & 7) in (0, 1, 2, 3, 5) and (first >= 0x80 or first >> 3) and \
            (first == 0x09 or first == 0x0A or _has_ctrl(p + pos, n)):
        at = pos
        try:
            sub = _fields(buf, p, &at, end, depth + 1, -1)
            if at == end and sub and (not (first == 0x09 or first == 0x0A) or _plausible(sub)
                                      or _text(p + pos, n) is None):
                return sub
        except (_WireError, RecursionError):
            pass
    text = _text(p + pos, n)
    return text if text is not None else buf[pos:end]


def walk(data):
    """(fields, "") or (None, why it is not Protobuf): protobuf_wire.walk's answer."""
    cdef bytes buf = bytes(data)
    cdef Py_ssize_t at = 0
    if not buf:
        return None, "empty"
    try:
        fields = _fields(buf, <const uint8_t*>buf, &at, len(buf), 0, -1)
    except (_WireError, RecursionError) as e:
        return None, str(e)
    return fields, ""


def score(list fields, Py_ssize_t size):
    """protobuf_wire.score_py's answer in one typed pass over the top-level fields."""
    cdef tuple f
    cdef object num
    cdef long wt
    cdef bint small = True, has_text = False, has_fixed = False
    cdef double conf = 0.5
    for f in fields:
        num = f[0]
        if small and num >= 64:
            small = False
        wt = f[1]
        if wt == 2 and not has_text and not isinstance(f[2], bytes):
            has_text = True
        elif wt == 3 or wt == 1 or wt == 5:
            has_fixed = True
    if small:
        conf += 0.2
    if len(fields) >= 2 or size <= 2:
        conf += 0.1
    if has_text:
        conf += 0.1
    if has_fixed and not small:
        conf -= 0.2
    return round(min(conf, 0.9), 2)


cdef tuple _KEYS = tuple(str(i) for i in range(128))   # the field numbers a schema mostly uses, as text


cdef object _fixed(bytes raw):
    """protobuf_wire._fixed: the unsigned integer, with its double / float reading when that
    is a plain number."""
    cdef const uint8_t* p = raw
    cdef Py_ssize_t n = len(raw), i
    cdef uint64_t u = 0
    cdef double f
    cdef float f32
    cdef uint32_t u32
    for i in range(n):
        u |= (<uint64_t>p[i]) << (8 * i)
    if n == 8:
        memcpy(&f, &u, 8)
    else:
        u32 = <uint32_t>u
        memcpy(&f32, &u32, 4)
        f = f32
    if f == f and not isinf(f) and (f == 0 or 1e-6 < fabs(f) < 1e15):
        return {"fixed": u, "float": f}
    return u


def to_value(list fields):
    """protobuf_wire.to_value_py's answer: decode_raw's fields as JSON."""
    cdef dict out = {}
    cdef set repeated = None
    cdef tuple t
    cdef long wt
    cdef object num, v, k
    for t in fields:
        num, v = t[0], t[2]
        wt = t[1]
        if wt == 2 or wt == 3:
            if type(v) is list:
                v = to_value(v)
            elif type(v) is bytes:
                v = {"$bytes": (<bytes>v).hex()}
        elif wt == 1 or wt == 5:
            v = _fixed(v)
        k = _KEYS[num] if num < 128 else str(num)
        if repeated is not None and k in repeated:
            out[k].append(v)
        elif k in out:
            out[k] = [out[k], v]
            if repeated is None:
                repeated = set()
            repeated.add(k)
        else:
            out[k] = v
    return out


cdef bint _plain(object v, int depth):
    cdef type t = type(v)
    if t is str or t is int or t is bool or v is None:
        return True
    if t is float:
        return not isinf(<double>v) and v == v
    if depth >= 64:
        return False
    if t is list:
        for x in <list>v:
            if not _plain(x, depth + 1):
                return False
        return True
    if t is dict:
        for k, x in (<dict>v).items():
            if type(k) is not str or not _plain(x, depth + 1):
                return False
        return True
    return False


def plain_json(v):
    """Whether a decoder's value is JSON as it is (dicts with text keys, lists, text, ints,
    finite floats, booleans, null): body_decode then keeps it as its value, with no copy."""
    return _plain(v, 0)


# ---- decode_raw: walk, score and to_value in one pass ---------------------------------------
cdef struct _Level:
    uint64_t max_num     # the largest field number of the level
    Py_ssize_t count     # its fields
    bint has_text        # a length-delimited field read as a message or a string
    bint has_fixed       # a group, a fixed64 or a fixed32


cdef object _fixed_at(const uint8_t* p, Py_ssize_t n):
    cdef uint64_t u = 0
    cdef double f
    cdef float f32
    cdef uint32_t u32
    cdef Py_ssize_t i
    for i in range(n):
        u |= (<uint64_t>p[i]) << (8 * i)
    if n == 8:
        memcpy(&f, &u, 8)
    else:
        u32 = <uint32_t>u
        memcpy(&f32, &u32, 4)
        f = f32
    if f == f and not isinf(f) and (f == 0 or 1e-6 < fabs(f) < 1e15):
        return {"fixed": u, "float": f}
    return u


cdef dict _vfields(bytes buf, const uint8_t* p, Py_ssize_t* at, Py_ssize_t end, int depth, long group,
                   _Level* lv):
    """_fields, building to_value's dict as it reads (repeats become lists), and the level's
    figures for score and _plausible in `lv`."""
    cdef dict out = {}
    cdef Py_ssize_t pos = at[0]
    cdef uint64_t v, num
    cdef int wt
    cdef object value, k, old
    while pos < end:
        pos = _field_head(p, pos, end, &num, &wt, &v)
        if wt == 0:
            value = v
        elif wt == 2:
            value = _len_vvalue(buf, p, pos, pos + <Py_ssize_t>v, depth)
            pos += <Py_ssize_t>v
            if type(value) is bytes:
                value = {"$bytes": (<bytes>value).hex()}
            else:
                lv.has_text = True
        elif wt == 1:
            value = _fixed_at(p + pos, 8)
            pos += 8
            lv.has_fixed = True
        elif wt == 5:
            value = _fixed_at(p + pos, 4)
            pos += 4
            lv.has_fixed = True
        elif wt == 3:
            if depth >= MAX_DEPTH:
                raise _WireError("groups nested too deep")
            at[0] = pos
            value = _vfields(buf, p, at, end, depth + 1, <long>num, &_SCRATCH)
            pos = at[0]
            lv.has_fixed = True
        elif wt == 4:
            if group != <long>num:
                raise _WireError(f"END_GROUP {num} without its START_GROUP")
            at[0] = pos
            return out
        lv.count += 1
        if num > lv.max_num:
            lv.max_num = num
        k = _KEYS[num] if num < 128 else str(num)
        old = out.get(k)
        if old is None:
            out[k] = value
        elif type(old) is list:
            (<list>old).append(value)
        else:
            out[k] = [old, value]
    if group >= 0:
        raise _WireError(f"group {group} never ends")
    at[0] = pos
    return out


cdef _Level _SCRATCH   # a group's inner figures: nothing reads them


cdef object _len_vvalue(bytes buf, const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, int depth):
    """_len_value with the nested message as its dict."""
    cdef Py_ssize_t n = end - pos, at
    cdef uint8_t first
    cdef _Level lv
    cdef dict sub
    if n == 0:
        return ""
    first = p[pos]
    if depth < MAX_DEPTH and (first & 7) in (0, 1, 2, 3, 5) and (first >= 0x80 or first >> 3) and \
            (first == 0x09 or first == 0x0A or _has_ctrl(p + pos, n)):
        at = pos
        lv.max_num = 0
        lv.count = 0
        lv.has_text = False
        lv.has_fixed = False
        try:
            sub = _vfields(buf, p, &at, end, depth + 1, -1, &lv)
            if at == end and lv.count and (not (first == 0x09 or first == 0x0A) or lv.max_num < 64
                                           or _text(p + pos, n) is None):
                return sub
        except (_WireError, RecursionError):
            pass
    text = _text(p + pos, n)
    return text if text is not None else buf[pos:end]


def decode_raw(data):
    """protobuf_wire.decode_raw_py's answer: (to_value of the walk, its score, "") or
    (None, 0.0, why), read in one pass with no fields list between."""
    cdef bytes buf = bytes(data)
    cdef Py_ssize_t at = 0
    cdef _Level lv
    cdef double conf = 0.5
    cdef bint small
    if not buf:
        return None, 0.0, "empty"
    lv.max_num = 0
    lv.count = 0
    lv.has_text = False
    lv.has_fixed = False
    try:
        value = _vfields(buf, <const uint8_t*>buf, &at, len(buf), 0, -1, &lv)
    except (_WireError, RecursionError) as e:
        return None, 0.0, str(e)
    small = lv.max_num < 64
    if small:
        conf += 0.2
    if lv.count >= 2 or len(buf) <= 2:
        conf += 0.1
    if lv.has_text:
        conf += 0.1
    if lv.has_fixed and not small:
        conf -= 0.2
    return value, round(min(conf, 0.9), 2), ""
