/* The content index's postings as a Python type (detectors/_winnow_index.h holds the table): listing, pickling
 * (through detectors.postings.restore_postings), size, the type object; and first_positions for ContentIndex._in_order.
 * Pure computation: no I/O, no clock.
 */
#ifndef WINNOW_INDEX_TYPE_H
#define WINNOW_INDEX_TYPE_H

#include "_winnow_index.h"

/* items() -> [(h, doc id)] of the one-owner fingerprints; owner_items() -> [(h, {tenant: doc id})] of the others;
 * both in slot order (for tests and checks). */
static PyObject *pt_items(Postings *t, int lists) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    size_t cap = (size_t)1 << t->bits;
    for (size_t i = 0; i < cap; i++) {
        int64_t v = t->slots[i].val;
        if (v == PT_EMPTY || pt_is_list(v) != lists) continue;
        PyObject *value = lists ? pt_owners_dict(t, v) : PyLong_FromLongLong(v);
        PyObject *pair = value ? Py_BuildValue("(KN)", (unsigned long long)t->slots[i].key, value) : NULL;
        if (!pair || PyList_Append(out, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(pair);
    }
    return out;
}

static PyObject *Postings_items(Postings *t, PyObject *Py_UNUSED(ignored)) { return pt_items(t, 0); }
static PyObject *Postings_owner_items(Postings *t, PyObject *Py_UNUSED(ignored)) { return pt_items(t, 1); }

/* The state for pickling: (bits, slots, keys, vals, owners, base, live tenants). slots/keys/vals: the occupied
 * slots as native uint32/uint64/int64 arrays, an owner list's value as -1; owners: per owner list in slot order,
 * its length and doc ids, as native int64. */
static PyObject *Postings_getstate(Postings *t, PyObject *Py_UNUSED(ignored)) {
    size_t cap = (size_t)1 << t->bits;
    Py_ssize_t nown = 0;
    for (size_t i = 0; i < cap; i++)
        if (pt_is_list(t->slots[i].val)) nown += 1 + pt_list(t, t->slots[i].val)->n;
    PyObject *slots = PyBytes_FromStringAndSize(NULL, t->used * (Py_ssize_t)sizeof(uint32_t));
    PyObject *keys = PyBytes_FromStringAndSize(NULL, t->used * (Py_ssize_t)sizeof(uint64_t));
    PyObject *vals = PyBytes_FromStringAndSize(NULL, t->used * (Py_ssize_t)sizeof(int64_t));
    PyObject *owners = PyBytes_FromStringAndSize(NULL, nown * (Py_ssize_t)sizeof(int64_t));
    PyObject *tenants = PyList_New(t->ndocs);
    if (!slots || !keys || !vals || !owners || !tenants) goto fail;
    uint32_t *s = (uint32_t *)PyBytes_AS_STRING(slots);
    uint64_t *k = (uint64_t *)PyBytes_AS_STRING(keys);
    int64_t *v = (int64_t *)PyBytes_AS_STRING(vals), *o = (int64_t *)PyBytes_AS_STRING(owners);
    Py_ssize_t j = 0;
    for (size_t i = 0; i < cap; i++) {
        int64_t val = t->slots[i].val;
        if (val == PT_EMPTY) continue;
        s[j] = (uint32_t)i;
        k[j] = t->slots[i].key;
        v[j] = pt_is_list(val) ? -1 : val;
        if (pt_is_list(val)) {
            PtOwners *ol = pt_list(t, val);
            *o++ = ol->n;
            for (int32_t m = 0; m < ol->n; m++) *o++ = ol->doc[m];
        }
        j++;
    }
    for (Py_ssize_t d = 0; d < t->ndocs; d++) {
        PyObject *tenant = t->tenants[(t->dhead + d) % t->dcap].name;
        Py_INCREF(tenant);
        PyList_SET_ITEM(tenants, d, tenant);
    }
    return Py_BuildValue("(iNNNNLN)", t->bits, slots, keys, vals, owners, (long long)t->base, tenants);
fail:
    Py_XDECREF(slots);
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    Py_XDECREF(owners);
    Py_XDECREF(tenants);
    return NULL;
}

static void pt_clear(Postings *t) {
    for (Py_ssize_t d = 0; d < t->ndocs; d++) Py_DECREF(t->tenants[(t->dhead + d) % t->dcap].name);
    PyMem_Free(t->tenants);
    t->tenants = NULL;
    t->ndocs = t->dcap = t->dhead = 0;
    for (Py_ssize_t p = 0; p < t->npool; p++) PyMem_Free(t->pool[p]);
    PyMem_Free(t->pool);
    PyMem_Free(t->free);
    t->pool = NULL;
    t->free = NULL;
    t->npool = t->poolcap = t->nfree = 0;
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->used = t->multi = 0;
    t->base = 0;
}

static PyObject *pt_malformed(void) {
    PyErr_SetString(PyExc_ValueError, "postings: a malformed state");
    return NULL;
}

static PyObject *Postings_setstate(Postings *t, PyObject *state) {
    int bits;
    PyObject *slots, *keys, *vals, *owners, *tenants;
    long long base;
    if (!PyArg_ParseTuple(state, "iSSSSLO!", &bits, &slots, &keys, &vals, &owners, &base, &PyList_Type, &tenants))
        return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(slots) / (Py_ssize_t)sizeof(uint32_t);
    Py_ssize_t nown = PyBytes_GET_SIZE(owners) / (Py_ssize_t)sizeof(int64_t);
    if (bits < PT_MIN_BITS || bits > 40 || PyBytes_GET_SIZE(keys) != n * 8 || PyBytes_GET_SIZE(vals) != n * 8 ||
        PyBytes_GET_SIZE(slots) != n * 4 || PyBytes_GET_SIZE(owners) != nown * 8)
        return pt_malformed();
    pt_clear(t);
    if (pt_alloc(t, bits) < 0) return NULL;
    for (Py_ssize_t d = 0; d < PyList_GET_SIZE(tenants); d++) {
        PyObject *tenant = PyList_GET_ITEM(tenants, d);
        Py_INCREF(tenant);
        if (PyUnicode_CheckExact(tenant)) PyUnicode_InternInPlace(&tenant); /* as the index interns them */
        int err = pt_push_doc(t, base + d, tenant);
        Py_DECREF(tenant);
        if (err < 0) return NULL;
    }
    const uint32_t *s = (const uint32_t *)PyBytes_AS_STRING(slots);
    const uint64_t *k = (const uint64_t *)PyBytes_AS_STRING(keys);
    const int64_t *v = (const int64_t *)PyBytes_AS_STRING(vals), *o = (const int64_t *)PyBytes_AS_STRING(owners);
    const int64_t *oend = o + nown;
    size_t cap = (size_t)1 << bits;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (s[j] >= cap || t->slots[s[j]].val != PT_EMPTY || v[j] < -1) return pt_malformed();
        int64_t val = v[j];
        if (val == -1) { /* an owner list: its length, then its doc ids */
            if (o + 3 > oend || o[0] < 2 || o + 1 + o[0] > oend) return pt_malformed();
            int64_t len = *o++;
            if (pt_new_list(t, o[0], o[1], &val) < 0) return NULL;
            for (int64_t m = 2; m < len; m++)
                if (pt_append(t, val, o[m]) < 0) return NULL;
            o += len;
            t->multi++;
        }
        t->slots[s[j]].key = k[j];
        t->slots[s[j]].val = val;
        t->used++;
    }
    if (o != oend) return pt_malformed();
    Py_RETURN_NONE;
}

/* Pickled through detectors.postings.restore_postings(state): a process without the extension restores the same
 * postings as the two dicts of its pure path. */
static PyObject *Postings_reduce(Postings *t, PyObject *Py_UNUSED(ignored)) {
    PyObject *mod = PyImport_ImportModule("detectors.postings");
    if (!mod) return NULL;
    PyObject *fn = PyObject_GetAttrString(mod, "restore_postings");
    Py_DECREF(mod);
    if (!fn) return NULL;
    PyObject *state = Postings_getstate(t, NULL);
    if (!state) {
        Py_DECREF(fn);
        return NULL;
    }
    return Py_BuildValue("(N(N))", fn, state);
}

static PyObject *Postings_get_nbytes(Postings *t, void *Py_UNUSED(closure)) {
    size_t n = ((size_t)1 << t->bits) * sizeof(PtSlot) + (size_t)t->dcap * sizeof(PtTenant) +
               (size_t)t->poolcap * (sizeof(PtOwners *) + sizeof(Py_ssize_t));
    for (Py_ssize_t p = 0; p < t->npool; p++)
        if (t->pool[p]) n += sizeof(PtOwners) + (size_t)t->pool[p]->cap * sizeof(int64_t);
    return PyLong_FromSize_t(n);
}

static PyObject *Postings_sizeof(Postings *t, PyObject *Py_UNUSED(ignored)) {
    PyObject *n = Postings_get_nbytes(t, NULL);
    if (!n) return NULL;
    Py_ssize_t bytes = PyLong_AsSsize_t(n);
    Py_DECREF(n);
    return PyLong_FromSsize_t(bytes + (Py_ssize_t)sizeof(Postings));
}

static int Postings_init(Postings *t, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return -1;
    pt_clear(t);
    return pt_alloc(t, PT_MIN_BITS);
}

static void Postings_dealloc(Postings *t) {
    pt_clear(t);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

/* first_positions(hashes, needed) -> [the first index of each needed value in hashes, or -1]
 * (ContentIndex._in_order: where a text holds each matched fingerprint, without a map of the whole text). */
static PyObject *first_positions(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "first_positions(hashes, needed)");
        return NULL;
    }
    PyObject **want;
    Py_ssize_t m;
    if (pt_keys_of(args[1], &want, &m) < 0) return NULL;
    uint64_t hbuf[PT_BUF];
    PtKeys text;
    if (pt_load(args[0], &text, hbuf, PT_BUF) < 0) return NULL;
    Py_ssize_t n = text.n;
    /* The needed values in a small open-addressing table: value -> index of its first listing in `needed`. */
    int bits = 4;
    while (((Py_ssize_t)1 << bits) < 2 * m + 2) bits++;
    size_t cap = (size_t)1 << bits, mask = cap - 1;
    uint64_t *keys = PyMem_Malloc(cap * sizeof(uint64_t) + cap * sizeof(Py_ssize_t) + (m ? m : 1) * sizeof(Py_ssize_t));
    if (!keys) {
        pt_unload(&text);
        return PyErr_NoMemory();
    }
    Py_ssize_t *slot = (Py_ssize_t *)(keys + cap), *pos = slot + cap;
    PyObject *out = NULL;
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    Py_ssize_t missing = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        uint64_t key;
        pos[j] = -1;
        if (pt_key(want[j], &key) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_TypeError)) goto done;
            PyErr_Clear(); /* not a fingerprint: nowhere in the text */
            continue;
        }
        size_t i = pt_home(key, bits);
        while (slot[i] >= 0 && keys[i] != key) i = (i + 1) & mask;
        if (slot[i] < 0) {
            keys[i] = key;
            slot[i] = j;
            missing++;
        }
    }
    for (Py_ssize_t p = 0; p < n && missing; p++) {
        uint64_t key = text.v[p];
        size_t i = pt_home(key, bits);
        while (slot[i] >= 0 && keys[i] != key) i = (i + 1) & mask;
        if (slot[i] >= 0 && pos[slot[i]] < 0) {
            pos[slot[i]] = p;
            missing--;
        }
    }
    out = PyList_New(m);
    if (!out) goto done;
    for (Py_ssize_t j = 0; j < m; j++) {
        uint64_t key;
        Py_ssize_t at = -1;
        if (pt_key(want[j], &key) == 0) {
            size_t i = pt_home(key, bits);
            while (slot[i] >= 0 && keys[i] != key) i = (i + 1) & mask;
            at = slot[i] >= 0 ? pos[slot[i]] : -1;
        } else {
            PyErr_Clear();
        }
        PyObject *v = PyLong_FromSsize_t(at);
        if (!v) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, j, v);
    }
done:
    PyMem_Free(keys);
    pt_unload(&text);
    return out;
}

#define INDEX_METHODS                                                                                                \
    {"first_positions", (PyCFunction)(void (*)(void))first_positions, METH_FASTCALL,                                 \
     "first_positions(hashes, needed) -> the first index of each needed value in hashes, or -1"},

static PyMethodDef Postings_methods[] = {
    {"insert", (PyCFunction)(void (*)(void))Postings_insert, METH_FASTCALL, "insert(hashes, doc_id, tenant)"},
    {"drop", (PyCFunction)(void (*)(void))Postings_drop, METH_FASTCALL, "drop(hashes, doc_id): the oldest text"},
    {"get", (PyCFunction)(void (*)(void))Postings_get, METH_FASTCALL, "get(h, default=None) -> its one owner's doc"},
    {"owners", (PyCFunction)(void (*)(void))Postings_owners, METH_FASTCALL,
     "owners(h, default=None) -> {tenant: doc id} when several tenants had h"},
    {"has_owners", (PyCFunction)Postings_has_owners, METH_O, "has_owners(h) -> whether several tenants had h"},
    {"items", (PyCFunction)Postings_items, METH_NOARGS, "[(h, doc id)] of the one-owner fingerprints"},
    {"owner_items", (PyCFunction)Postings_owner_items, METH_NOARGS, "[(h, {tenant: doc id})] of the others"},
    {"__getstate__", (PyCFunction)Postings_getstate, METH_NOARGS, NULL},
    {"__setstate__", (PyCFunction)Postings_setstate, METH_O, NULL},
    {"__reduce__", (PyCFunction)Postings_reduce, METH_NOARGS, NULL},
    {"__sizeof__", (PyCFunction)Postings_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Postings_getset[] = {
    {"nbytes", (getter)Postings_get_nbytes, NULL, "bytes held: slots, owner lists, the ring of live texts", NULL},
    {"multi", (getter)Postings_get_multi, NULL, "fingerprints of several tenants", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Postings_as_sequence = {
    .sq_length = (lenfunc)Postings_len,
    .sq_contains = (objobjproc)Postings_contains,
};

static PyTypeObject PostingsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "detectors._winnow.Postings",
    .tp_basicsize = sizeof(Postings),
    .tp_dealloc = (destructor)Postings_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Postings(): the content index's postings (fingerprint -> doc id per tenant), native",
    .tp_methods = Postings_methods,
    .tp_getset = Postings_getset,
    .tp_as_sequence = &Postings_as_sequence,
    .tp_init = (initproc)Postings_init,
    .tp_new = PyType_GenericNew,
};

#endif
