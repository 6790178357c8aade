# The compiled QueryResult's fields, for the kernel that builds one (engine/accel/_page's
# query_message): made with QueryResult.__new__(QueryResult), fields set as C attributes.

cdef class QueryResult:
    cdef public object messages, truncated, offsets, false_hits, indexLastUpdateTimestamp, indexLastUpdatePhyoffset
