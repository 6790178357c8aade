# Making the objects a kernel hands back without the call machinery, by public C API only: a
# type's own tp_new slot read with PyType_GetSlot and called with an empty argument tuple (what
# `t.__new__(t)` does, without the method lookup and the argument checks). Inline: cimporting
# this imports nothing at run time.
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
    """
    object rmq_new(object t)
    object rmq_new_as(object base, object t, tuple args)
