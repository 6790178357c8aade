# Making the objects a kernel hands back without the call machinery, by public C API only: a
# type's own tp_new slot read with PyType_GetSlot and called with an empty argument tuple (what
# `t.__new__(t)` does, without the method lookup and the argument checks). And reading a
# `__slots__` member of an engine object as CPython's own attribute specialization does
# (rmq_slot: the type, its version tag and the member's offset remembered per call site).
# Inline: cimporting this imports nothing at run time.
cdef extern from *:
    """
    static PyObject *rmq_empty_args = NULL;
    /* t.__new__(t) */
    static PyObject *rmq_new(PyObject *t) {
        newfunc f;
        if (!PyType_Check(t)) { PyErr_SetString(PyExc_TypeError, "rmq_new: not a type"); return NULL; }
        if (!rmq_empty_args && !(rmq_empty_args = PyTuple_New(0))) return NULL;
        f = (newfunc)PyType_GetSlot((PyTypeObject *)t, Py_tp_new);
        if (!f) { PyErr_SetString(PyExc_TypeError, "rmq_new: the type cannot be made"); return NULL; }
        return f((PyTypeObject *)t, rmq_empty_args, NULL);
    }
    /* base.__new__(t, *args) for a subtype t of base (tuple.__new__(PutResult, items)) */
    static PyObject *rmq_new_as(PyObject *base, PyObject *t, PyObject *args) {
        newfunc f;
        if (!PyType_Check(base) || !PyType_Check(t) || !PyType_IsSubtype((PyTypeObject *)t, (PyTypeObject *)base)) {
            PyErr_SetString(PyExc_TypeError, "rmq_new_as: not a subtype");
            return NULL;
        }
        f = (newfunc)PyType_GetSlot((PyTypeObject *)base, Py_tp_new);
        if (!f) { PyErr_SetString(PyExc_TypeError, "rmq_new_as: the type cannot be made"); return NULL; }
        return f((PyTypeObject *)t, args, NULL);
    }
    #include "structmember.h"   /* PyMemberDef (Python.h declares it whole only from 3.12) */
    /* o.<name> for a __slots__ member (a T_OBJECT_EX member descriptor), the way CPython's
       LOAD_ATTR_SLOT reads it: the slot at the member's offset while o's type is the one seen
       before and unchanged since (its version tag: any change to the class gives it another).
       Anything else -- another type, a changed class, a name that is a property or in a
       __dict__, an empty slot -- is PyObject_GetAttr's, and the type is learned after it. */
    typedef struct { PyTypeObject *tp; unsigned int tag; Py_ssize_t off; PyObject *name; } rmq_slot_site;
    static PyObject *rmq_slot(PyObject *o, rmq_slot_site *c) {
        PyTypeObject *tp = Py_TYPE(o);
        PyObject *v, *d;
        if (tp == c->tp && c->tag != 0 && tp->tp_version_tag == c->tag) {
            v = *(PyObject **)((char *)o + c->off);
            if (v) { Py_INCREF(v); return v; }
        }
        v = PyObject_GetAttr(o, c->name);
        if (!v || tp->tp_version_tag == 0) return v;
        d = PyObject_GetAttr((PyObject *)tp, c->name);   /* a member descriptor answers itself */
        if (!d) { PyErr_Clear(); return v; }
        if (Py_IS_TYPE(d, &PyMemberDescr_Type) && ((PyMemberDescrObject *)d)->d_member->type == 16 /* T_OBJECT_EX */
                && ((PyMemberDescrObject *)d)->d_member->offset > 0
                && *(PyObject **)((char *)o + ((PyMemberDescrObject *)d)->d_member->offset) == v) {
            c->tp = tp; c->tag = tp->tp_version_tag; c->off = ((PyMemberDescrObject *)d)->d_member->offset;
        }
        Py_DECREF(d);
        return v;
    }
    /* getattr(o, name, None) the same way */
    static PyObject *rmq_slot_or_none(PyObject *o, rmq_slot_site *c) {
        PyObject *v = rmq_slot(o, c);
        if (!v && PyErr_ExceptionMatches(PyExc_AttributeError)) { PyErr_Clear(); Py_INCREF(Py_None); return Py_None; }
        return v;
    }
    static void rmq_slot_init(rmq_slot_site *c, PyObject *name) {
        c->tp = NULL; c->tag = 0; c->off = 0; c->name = name; Py_INCREF(name);
        PyUnicode_InternInPlace(&c->name);
    }
    """
    ctypedef struct rmq_slot_site:
        pass
    object rmq_new(object t)
    object rmq_new_as(object base, object t, tuple args)
    object rmq_slot(object o, rmq_slot_site* c)
    object rmq_slot_or_none(object o, rmq_slot_site* c)
    void rmq_slot_init(rmq_slot_site* c, object name)
