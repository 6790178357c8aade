# included by engine/accel/_page.pyx: making the objects a read hands back without a Python call.
# `Cls.__new__(Sub)` compiles to a method call through the type (a lookup, an argument tuple,
# tp_new_wrapper's checks): for a page's messages that was most of building each one.

from cpython.object cimport PyObject

cdef extern from *:
    """
    #include <structmember.h>
    /* t.__new__(t) without the call machinery: the type's own tp_new, no arguments */
    static PyObject *rmq_new_instance(PyObject *t) {
        static PyObject *noargs = NULL;
        if (!noargs && !(noargs = PyTuple_New(0))) return NULL;
        return ((PyTypeObject *)t)->tp_new((PyTypeObject *)t, noargs, NULL);
    }
    /* the byte offset of a __slots__ member (a member_descriptor of type T_OBJECT_EX), -1 if not */
    static Py_ssize_t rmq_slot_offset(PyObject *descr) {
        if (!descr || Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        return (m->type == T_OBJECT_EX && !(m->flags & READONLY)) ? m->offset : -1;
    }
    /* the truth of a __slots__ member's value (an unset member: false), -1 on error */
    static inline int rmq_slot_truth(PyObject *o, Py_ssize_t off) {
        PyObject *v = *(PyObject **)((char *)o + off);
        return v ? PyObject_IsTrue(v) : 0;
    }
    /* the object in a __slots__ member, borrowed (NULL: unset) */
    static inline PyObject *rmq_slot_peek(PyObject *o, Py_ssize_t off) {
        return *(PyObject **)((char *)o + off);
    }
    static inline void rmq_slot_set(PyObject *o, Py_ssize_t off, PyObject *v) {
        PyObject **p = (PyObject **)((char *)o + off);
        Py_INCREF(v);
        Py_XSETREF(*p, v);
    }
    """
    object rmq_new_instance(object t)
    Py_ssize_t rmq_slot_offset(object descr)
    void rmq_slot_set(object o, Py_ssize_t off, object v)
    int rmq_slot_truth(object o, Py_ssize_t off) except -1
    PyObject* rmq_slot_peek(object o, Py_ssize_t off)
