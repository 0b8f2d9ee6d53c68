/* The fingerprints a call passes to the content index's postings (detectors/_winnow_index.h) as native uint64: a list
 * or tuple of ints, converted (`pt_keys`), or a buffer of native uint64 read in place (a text's stored fingerprints,
 * array('Q')). Included by _winnow_index.h. */
#ifndef WINNOW_KEYS_H
#define WINNOW_KEYS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The fingerprints of a call: a list or tuple of ints (converted), or a buffer of native uint64 (a text's stored
 * fingerprints, array('Q'): read in place). */
typedef struct {
    const uint64_t *v;
    Py_ssize_t n;
    uint64_t *heap;
    Py_buffer view;
} PtKeys;

static int pt_key(PyObject *obj, uint64_t *key) {
    unsigned long long x;
    if (PyLong_CheckExact(obj)) {
        x = PyLong_AsUnsignedLongLong(obj);
    } else {
        PyObject *index = PyNumber_Index(obj);
        if (!index) return -1;
        x = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
    }
    if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *key = (uint64_t)x;
    return 0;
}

static int pt_keys_of(PyObject *hashes, PyObject ***items, Py_ssize_t *n) {
    if (!PyList_Check(hashes) && !PyTuple_Check(hashes)) {
        PyErr_SetString(PyExc_TypeError, "fingerprints must be a list or a tuple of ints");
        return -1;
    }
    *items = PySequence_Fast_ITEMS(hashes);
    *n = PySequence_Fast_GET_SIZE(hashes);
    return 0;
}

/* The keys of a list or tuple of ints as native uint64 (in `buf` when they fit), for the bulk loops. */
static uint64_t *pt_keys(PyObject **items, Py_ssize_t n, uint64_t *buf, Py_ssize_t nbuf) {
    uint64_t *keys = n <= nbuf ? buf : PyMem_Malloc(sizeof(uint64_t) * n);
    if (!keys) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k + 8 < n) __builtin_prefetch(items[k + 8]); /* the int objects lie anywhere in memory */
        if (pt_key(items[k], &keys[k]) < 0) {
            if (keys != buf) PyMem_Free(keys);
            return NULL;
        }
    }
    return keys;
}

static int pt_load(PyObject *obj, PtKeys *k, uint64_t *buf, Py_ssize_t nbuf) {
    k->heap = NULL;
    k->view.obj = NULL;
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        PyObject **items = PySequence_Fast_ITEMS(obj);
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        uint64_t *keys = pt_keys(items, n, buf, nbuf);
        if (!keys) return -1;
        if (keys != buf) k->heap = keys;
        k->v = keys;
        k->n = n;
        return 0;
    }
    if (!PyObject_CheckBuffer(obj) || PyObject_GetBuffer(obj, &k->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "fingerprints must be a list or tuple of ints, or a buffer of uint64");
        return -1;
    }
    const char *f = k->view.format ? k->view.format : "B";
    char last = f[strlen(f) - 1];
    if (k->view.itemsize != 8 || (last != 'Q' && last != 'L')) {
        PyBuffer_Release(&k->view);
        k->view.obj = NULL;
        PyErr_SetString(PyExc_TypeError, "a buffer of fingerprints must hold uint64");
        return -1;
    }
    k->v = k->view.buf;
    k->n = k->view.len / 8;
    return 0;
}

static void pt_unload(PtKeys *k) {
    PyMem_Free(k->heap);
    if (k->view.obj) PyBuffer_Release(&k->view);
}

#endif /* WINNOW_KEYS_H */
