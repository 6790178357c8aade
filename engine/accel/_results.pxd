# The compiled result records' fields, for the kernels that build them: QueryResult and
# GetMessageResult (engine/accel/_page's query_message and get_message: made with T.__new__(T),
# fields set as C attributes), PutResults and put_result (engine/accel/_append's put loop).
from libc.stdint cimport int64_t


cdef class Record:
    pass


cdef class QueryResult(Record):
    cdef public object messages, truncated, offsets, false_hits, indexLastUpdateTimestamp, indexLastUpdatePhyoffset


cdef class GetMessageResult(Record):
    cdef public object status, nextBeginOffset, minOffset, maxOffset, messages, bufferTotalSize, skipped
    cdef public object messageQueueOffset, messageCount, cqType, innerMessages, source, damaged


cdef class PutResults:
    cdef int64_t* phys
    cdef int64_t* sizes
    cdef Py_ssize_t n
    cdef int64_t qoff0, store_ts
    cdef long qid
    cdef str topic
    cdef bytes prefix_b
    cdef bytes tails          # n x 12 ASCII: each UNIQ_KEY after the generator's prefix
    cdef bytes store_host
    cdef object item(self, Py_ssize_t i)


cdef object put_result(str topic, long qid, int64_t phy, int64_t qoff, int64_t store_ts, int64_t size,
                       bytes store_host, bytes prefix, const char* tail12)
