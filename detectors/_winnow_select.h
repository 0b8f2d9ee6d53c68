/* Winnowing for detectors/_winnow.c: window minima (monotone deque) and each selected value once, in order
 * of first selection, as a list of Python ints. */
#ifndef WINNOW_SELECT_H
#define WINNOW_SELECT_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_winnow_cache.h" /* BASE */

static int append_u64(PyObject *list, uint64_t x) {
    PyObject *v = PyLong_FromUnsignedLongLong(x);
    if (!v) return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

#define STACK_SET 1024
/* Winnowing: the minimum of every window of w consecutive k-grams, each value once, in order of first
 * selection (as Fingerprinter._selected). With `positions` (a list, or NULL), also each selected value's k-gram
 * position at its first selection: the rightmost position of the minimum in the first window selecting it. */
static PyObject *select_minima(size_t w, const uint64_t *kg, size_t n, PyObject *positions) {
    PyObject *list = PyList_New(0);
    if (!list || n == 0) return list;
    if (n <= w) {
        uint64_t m = kg[0];
        size_t at = 0;
        for (size_t i = 1; i < n; i++)
            if (kg[i] <= m) {
                m = kg[i];
                at = i;
            }
        if (append_u64(list, m) < 0 || (positions && append_u64(positions, at) < 0)) Py_CLEAR(list);
        return list;
    }
    /* Sliding-window minimum with a monotone deque of positions (values increasing from the head); the
     * deque never holds more than w positions, so it is a ring of w slots. Selected values go into an
     * open-addressing set (0 is tracked apart, since 0 marks a free slot). */
    size_t dq_local[64], *dq = dq_local;
    uint64_t set_local[STACK_SET], *set = set_local;
    size_t scap = STACK_SET, used = 0;
    size_t rmask = 1;
    while (rmask < w) rmask <<= 1;
    if (rmask > 64 && !(dq = PyMem_Malloc(rmask * sizeof(size_t)))) goto nomem;
    rmask -= 1;
    memset(set, 0, sizeof(set_local));
    size_t head = 0, len = 0; /* ring: positions dq[(head + j) & rmask], j < len <= w */
    int have_zero = 0, have_prev = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = kg[i];
        if (len && dq[head] + w <= i) { /* out of the window ending at i (at most one leaves per step) */
            head = (head + 1) & rmask;
            len--;
        }
        while (len && kg[dq[(head + len - 1) & rmask]] >= x) len--;
        dq[(head + len) & rmask] = i;
        len++;
        if (i + 1 < w) continue;
        uint64_t mn = kg[dq[head]];
        if (have_prev && mn == prev) continue; /* consecutive windows mostly share their minimum */
        have_prev = 1;
        prev = mn;
        int fresh;
        if (mn == 0) {
            fresh = !have_zero;
            have_zero = 1;
        } else {
            size_t t = (size_t)((mn * BASE) >> 32) & (scap - 1);
            while (set[t] && set[t] != mn) t = (t + 1) & (scap - 1);
            fresh = !set[t];
            if (fresh) {
                set[t] = mn;
                if (++used * 2 > scap) {
                    size_t ncap = scap * 2;
                    uint64_t *ns = PyMem_Calloc(ncap, sizeof(uint64_t));
                    if (!ns) goto nomem;
                    for (size_t j = 0; j < scap; j++) {
                        if (!set[j]) continue;
                        size_t u = (size_t)((set[j] * BASE) >> 32) & (ncap - 1);
                        while (ns[u]) u = (u + 1) & (ncap - 1);
                        ns[u] = set[j];
                    }
                    if (set != set_local) PyMem_Free(set);
                    set = ns;
                    scap = ncap;
                }
            }
        }
        if (fresh && (append_u64(list, mn) < 0 || (positions && append_u64(positions, dq[head]) < 0))) goto fail;
    }
    goto out;
nomem:
    PyErr_NoMemory();
fail:
    Py_CLEAR(list);
out:
    if (dq != dq_local) PyMem_Free(dq);
    if (set != set_local) PyMem_Free(set);
    return list;
}

/* ---- a session's selection (detectors/session_prints.py) ----
 * The fingerprints selected by the windows before a session's cut, as an open-addressing set of uint64 (0 is
 * tracked apart, since 0 marks a free slot), so that a continued turn dedups only its new windows against it:
 * work in proportion to the new text, no copy or sort of the session's whole selection. */
typedef struct {
    uint64_t *v;
    size_t cap, used; /* cap a power of two, used * 2 <= cap */
    int zero;
} U64Set;

static int u64set_init(U64Set *s, size_t cap) {
    s->v = PyMem_Calloc(cap, sizeof(uint64_t));
    s->cap = cap;
    s->used = 0;
    s->zero = 0;
    if (!s->v) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline size_t u64set_slot_start(size_t cap, uint64_t x) { return (size_t)((x * BASE) >> 32) & (cap - 1); }

static inline size_t u64set_slot(const uint64_t *v, size_t cap, uint64_t x) {
    size_t t = u64set_slot_start(cap, x);
    while (v[t] && v[t] != x) t = (t + 1) & (cap - 1);
    return t;
}

static inline int u64set_has(const U64Set *s, uint64_t x) { return x ? s->v[u64set_slot(s->v, s->cap, x)] == x : s->zero; }

/* 1 if x was added, 0 if it was there, -1 on error */
static int u64set_add(U64Set *s, uint64_t x) {
    if (!x) {
        if (s->zero) return 0;
        return s->zero = 1;
    }
    size_t t = u64set_slot(s->v, s->cap, x);
    if (s->v[t]) return 0;
    s->v[t] = x;
    if (++s->used * 2 > s->cap) {
        size_t ncap = s->cap * 2;
        uint64_t *nv = PyMem_Calloc(ncap, sizeof(uint64_t));
        if (!nv) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t j = 0; j < s->cap; j++)
            if (s->v[j]) nv[u64set_slot(nv, ncap, s->v[j])] = s->v[j];
        PyMem_Free(s->v);
        s->v = nv;
        s->cap = ncap;
    }
    return 1;
}

typedef struct {
    PyObject_HEAD
    U64Set set;
} Selection;

#define SMALL_W 8

static int Selection_init(Selection *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return -1;
    PyMem_Free(self->set.v);
    self->set.v = NULL;
    return u64set_init(&self->set, 64);
}

static void Selection_dealloc(Selection *self) {
    PyMem_Free(self->set.v);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* extend(kgrams, w, commit, out) -> int. The windows of w consecutive k-grams of the buffer, in order: each
 * window minimum that is neither in the selection nor already appended by this call is appended to the list
 * `out`; those of the first `commit` windows are also added to the selection (the others only count for this
 * call). Returns how many were added to the selection: they are the first ones appended. */
static PyObject *Selection_extend(Selection *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "extend(kgrams, w, commit, out: list)");
        return NULL;
    }
    Py_ssize_t w = PyLong_AsSsize_t(args[1]), commit = PyLong_AsSsize_t(args[2]);
    if ((w == -1 || commit == -1) && PyErr_Occurred()) return NULL;
    if (w < 1 || commit < 0) {
        PyErr_SetString(PyExc_ValueError, "need w >= 1 and commit >= 0");
        return NULL;
    }
    if (!self->set.v) {
        PyErr_SetString(PyExc_ValueError, "Selection not initialised");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (buf.len % 8) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "k-gram hashes must be uint64");
        return NULL;
    }
    const uint64_t *kg = buf.buf;
    size_t n = (size_t)buf.len / 8, uw = (size_t)w, added = 0;
    PyObject *out = args[3];
    U64Set later = {NULL, 0, 0, 0}; /* first selected by a window past `commit`: not kept */
    U64s cand;                      /* the window minima that differ from the previous window's */
    u64s_init(&cand);
    size_t split = (size_t)-1; /* candidates before it come from the first `commit` windows */
    size_t dq_local[64], *dq = dq_local;
    size_t rmask = 1;
    while (rmask < uw) rmask <<= 1;
    if (rmask > 64 && !(dq = PyMem_Malloc(rmask * sizeof(size_t)))) {
        PyErr_NoMemory();
        goto fail;
    }
    rmask -= 1;
    if (u64set_init(&later, 16) < 0) goto fail;
    if (uw <= SMALL_W) { /* small windows (production w = 4): w - 1 branchless minimums per window beat the
                          * deque's unpredictable branches on random hashes */
        for (size_t j = 0; j + uw <= n; j++) {
            uint64_t mn = kg[j];
            for (size_t t = 1; t < uw; t++) mn = kg[j + t] < mn ? kg[j + t] : mn;
            if (j == (size_t)commit) split = cand.n;
            if (cand.n && cand.v[cand.n - 1] == mn) continue;
            if (u64s_push(&cand, mn) < 0) goto fail;
        }
        n = 0; /* the deque below has nothing left to do */
    }
    size_t head = 0, len = 0;
    for (size_t i = 0; i < n; i++) { /* the monotone deque of select_minima */
        uint64_t x = kg[i];
        if (len && dq[head] + uw <= i) {
            head = (head + 1) & rmask;
            len--;
        }
        while (len && kg[dq[(head + len - 1) & rmask]] >= x) len--;
        dq[(head + len) & rmask] = i;
        len++;
        if (i + 1 < uw) continue;
        uint64_t mn = kg[dq[head]];
        if (i + 1 - uw == (size_t)commit) split = cand.n;
        if (cand.n && cand.v[cand.n - 1] == mn) continue; /* consecutive windows mostly share their minimum */
        if (u64s_push(&cand, mn) < 0) goto fail;
    }
    if (split == (size_t)-1) split = cand.n;
    /* The set is larger than the caches for long sessions: its slots are prefetched a few candidates ahead
     * (a hint only: after the table grows, a few prefetches go to the old one). */
#define AHEAD 8
    for (size_t c = 0; c < cand.n && c < AHEAD; c++)
        __builtin_prefetch(&self->set.v[u64set_slot_start(self->set.cap, cand.v[c])]);
    for (size_t c = 0; c < cand.n; c++) {
        if (c + AHEAD < cand.n) __builtin_prefetch(&self->set.v[u64set_slot_start(self->set.cap, cand.v[c + AHEAD])]);
        uint64_t mn = cand.v[c];
        if (u64set_has(&self->set, mn)) continue;
        int fresh = u64set_add(c < split ? &self->set : &later, mn);
        if (fresh < 0) goto fail;
        if (!fresh) continue;
        if (c < split) added++;
        if (append_u64(out, mn) < 0) goto fail;
    }
#undef AHEAD
    PyBuffer_Release(&buf);
    PyMem_Free(later.v);
    u64s_free(&cand);
    if (dq != dq_local) PyMem_Free(dq);
    return PyLong_FromSize_t(added);
fail:
    PyBuffer_Release(&buf);
    PyMem_Free(later.v);
    u64s_free(&cand);
    if (dq != dq_local) PyMem_Free(dq);
    return NULL;
}

static PyObject *Selection_get_count(Selection *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSize_t(self->set.v ? self->set.used + (size_t)self->set.zero : 0);
}

static PyObject *Selection_get_nbytes(Selection *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSize_t(sizeof(Selection) + (self->set.v ? self->set.cap * sizeof(uint64_t) : 0));
}

static PyMethodDef Selection_methods[] = {
    {"extend", (PyCFunction)(void (*)(void))Selection_extend, METH_FASTCALL,
     "extend(kgrams, w, commit, out) -> how many new minima of the first `commit` windows were kept"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Selection_getset[] = {
    {"count", (getter)Selection_get_count, NULL, "fingerprints in the selection", NULL},
    {"nbytes", (getter)Selection_get_nbytes, NULL, "bytes held (the object and its table)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SelectionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "detectors._winnow.Selection",
    .tp_basicsize = sizeof(Selection),
    .tp_dealloc = (destructor)Selection_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Selection(): a session's selected fingerprints, as a set of uint64",
    .tp_methods = Selection_methods,
    .tp_getset = Selection_getset,
    .tp_init = (initproc)Selection_init,
    .tp_new = PyType_GenericNew,
};

#endif
