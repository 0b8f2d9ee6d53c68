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
 * selection (as Fingerprinter._selected). */
static PyObject *select_minima(size_t w, const uint64_t *kg, size_t n) {
    PyObject *list = PyList_New(0);
    if (!list || n == 0) return list;
    if (n <= w) {
        uint64_t m = kg[0];
        for (size_t i = 1; i < n; i++)
            if (kg[i] < m) m = kg[i];
        if (append_u64(list, m) < 0) Py_CLEAR(list);
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
        if (fresh && append_u64(list, mn) < 0) goto fail;
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

#endif
