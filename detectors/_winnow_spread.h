/* The long-horizon commonness record's per-fingerprint loops (detectors/commonness.py, TenantSpread).
 *
 * The same computation as the record's numpy path, one pass per call instead of ~15 numpy passes on small arrays:
 * splitmix64 of each key, Kirsch-Mitzenmacher probe positions, Bloom tests and sets on the generations' bit rows.
 * A generation is a C-contiguous uint8 array of (levels + 1) rows of `nbytes`: row 0 holds (fingerprint, tenant)
 * pairs, rows 1..levels fingerprints by level. A record's levels (TenantSpread.levels, 1..SPREAD_MAX_LEVELS) are
 * read from the size of its generations, so the loops serve every record without a parameter of their own. Every
 * test of a call reads the bits as they were before the call, as the numpy path's does (it tests all keys, then
 * sets), so the two agree bit for bit (property-tested).
 * Pure computation: no I/O, no clock.
 */
#ifndef WINNOW_SPREAD_H
#define WINNOW_SPREAD_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SPREAD_MAX_LEVELS 8
#define SPREAD_MAX_PROBES 16

static inline uint64_t spread_mix(uint64_t x) {
    x = (x ^ (x >> 33)) * 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 29)) * 0xC2B2AE3D27D4EB4FULL;
    return x ^ (x >> 33);
}

/* The keys of a call: a list of ints, or a buffer of native uint64. */
typedef struct {
    uint64_t *v;
    Py_ssize_t n;
    Py_buffer view; /* view.obj != NULL: v points into it */
} SpreadKeys;

static int spread_keys(PyObject *obj, SpreadKeys *k) {
    k->view.obj = NULL;
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        k->v = PyMem_Malloc(sizeof(uint64_t) * (n ? n : 1));
        if (!k->v) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = items[i];
            if (i + 8 < n) __builtin_prefetch(items[i + 8]); /* the int objects lie anywhere in memory */
            unsigned long long x;
            if (PyLong_CheckExact(item)) {
                x = PyLong_AsUnsignedLongLong(item);
            } else { /* a numpy integer, a bool...: as numpy would take it, through __index__ */
                PyObject *index = PyNumber_Index(item);
                x = index ? PyLong_AsUnsignedLongLong(index) : (unsigned long long)-1;
                Py_XDECREF(index);
            }
            if (x == (unsigned long long)-1 && PyErr_Occurred()) {
                PyMem_Free(k->v);
                return -1;
            }
            k->v[i] = (uint64_t)x;
        }
        k->n = n;
        return 0;
    }
    if (PyObject_GetBuffer(obj, &k->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (k->view.itemsize != 8 || (k->view.len % 8) != 0) {
        PyBuffer_Release(&k->view);
        PyErr_SetString(PyExc_TypeError, "keys must be a list of ints or a buffer of uint64");
        return -1;
    }
    k->v = k->view.buf;
    k->n = k->view.len / 8;
    return 0;
}

static void spread_keys_free(SpreadKeys *k) {
    if (k->view.obj)
        PyBuffer_Release(&k->view);
    else
        PyMem_Free(k->v);
}

/* A generation's bit rows, or none (None). */
typedef struct {
    uint8_t *bits;
    Py_ssize_t nbytes; /* per row */
    int levels;        /* rows 1..levels count distinct tenants */
    Py_buffer view;
} SpreadGen;

static int spread_gen(PyObject *obj, SpreadGen *g, Py_ssize_t nbytes, int writable) {
    g->bits = NULL;
    g->view.obj = NULL;
    g->nbytes = nbytes;
    g->levels = 0;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, &g->view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    Py_ssize_t rows = nbytes > 0 ? g->view.len / nbytes : 0;
    if (nbytes <= 0 || g->view.len != nbytes * rows || rows < 2 || rows > SPREAD_MAX_LEVELS + 1) {
        PyBuffer_Release(&g->view);
        PyErr_SetString(PyExc_ValueError, "a generation holds (levels + 1) rows of nbytes, levels within 1..8");
        return -1;
    }
    g->levels = (int)(rows - 1);
    g->bits = g->view.buf;
    return 0;
}

/* Two generations of one record hold the same levels (either may be absent). */
static int spread_same_levels(const SpreadGen *a, const SpreadGen *b) {
    if (a->bits && b->bits && a->levels != b->levels) {
        PyErr_SetString(PyExc_ValueError, "the two generations hold different levels");
        return -1;
    }
    return 0;
}

static void spread_gen_free(SpreadGen *g) {
    if (g->view.obj) PyBuffer_Release(&g->view);
}

/* Probe positions of one key: pos[i] = (a + i * b) & mask. */
static inline void spread_positions(uint64_t key, uint64_t mask, int probes, uint64_t *pos) {
    uint64_t m = spread_mix(key);
    uint64_t a = m & mask, b = ((m >> 32) | 1) & mask;
    for (int i = 0; i < probes; i++) pos[i] = (a + (uint64_t)i * b) & mask;
}

#define SPREAD_AHEAD 8 /* keys whose probe bytes are prefetched ahead: a domain's rows are larger than the caches */

static inline void spread_prefetch(const uint8_t *row, uint64_t key, uint64_t mask, int probes) {
    uint64_t pos[SPREAD_MAX_PROBES];
    spread_positions(key, mask, probes, pos);
    for (int i = 0; i < probes; i++) __builtin_prefetch(row + (pos[i] >> 3));
}

static inline int spread_test(const uint8_t *row, const uint64_t *pos, int probes) {
    for (int i = 0; i < probes; i++)
        if (!((row[pos[i] >> 3] >> (pos[i] & 7)) & 1)) return 0;
    return 1;
}

/* The level of a fingerprint in a generation: how many level rows hold it (they are nested). */
static inline int spread_level(const SpreadGen *g, const uint64_t *pos, int probes) {
    if (!g->bits) return 0;
    int level = 0;
    for (int r = 1; r <= g->levels; r++) level += spread_test(g->bits + r * g->nbytes, pos, probes);
    return level;
}

static int spread_args(PyObject *mask_obj, int probes, uint64_t *mask) {
    *mask = PyLong_AsUnsignedLongLong(mask_obj);
    if (*mask == (uint64_t)-1 && PyErr_Occurred()) return -1;
    if (probes < 1 || probes > SPREAD_MAX_PROBES) {
        PyErr_SetString(PyExc_ValueError, "probes must be within 1..16");
        return -1;
    }
    return 0;
}

/* spread_levels(cur, old, keys, nbytes, mask, probes) -> bytearray: each key's level, the higher of the two
 * generations' (TenantSpread.tenants). */
static PyObject *spread_levels(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *cur_obj, *old_obj, *keys_obj, *mask_obj;
    Py_ssize_t nbytes;
    int probes;
    if (!PyArg_ParseTuple(args, "OOOnOi", &cur_obj, &old_obj, &keys_obj, &nbytes, &mask_obj, &probes)) return NULL;
    uint64_t mask, pos[SPREAD_MAX_PROBES];
    if (spread_args(mask_obj, probes, &mask) < 0) return NULL;
    SpreadGen cur, old;
    SpreadKeys keys;
    if (spread_gen(cur_obj, &cur, nbytes, 0) < 0) return NULL;
    if (spread_gen(old_obj, &old, nbytes, 0) < 0) {
        spread_gen_free(&cur);
        return NULL;
    }
    PyObject *out = NULL;
    if (spread_same_levels(&cur, &old) == 0 && spread_keys(keys_obj, &keys) == 0) {
        out = PyByteArray_FromStringAndSize(NULL, keys.n);
        if (out) {
            char *lv = PyByteArray_AS_STRING(out);
            for (Py_ssize_t i = 0; i < keys.n; i++) {
                if (i + SPREAD_AHEAD < keys.n && cur.bits)
                    spread_prefetch(cur.bits + nbytes, keys.v[i + SPREAD_AHEAD], mask, probes);
                spread_positions(keys.v[i], mask, probes, pos);
                int a = spread_level(&cur, pos, probes), b = spread_level(&old, pos, probes);
                lv[i] = (char)(a > b ? a : b);
            }
        }
        spread_keys_free(&keys);
    }
    spread_gen_free(&cur);
    spread_gen_free(&old);
    return out;
}

/* spread_had(cur, old, keys, xor, nbytes, mask, probes) -> bytearray: 1 where the pair (key ^ xor) is in either
 * generation's pairs row (TenantSpread.had). */
static PyObject *spread_had(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *cur_obj, *old_obj, *keys_obj, *xor_obj, *mask_obj;
    Py_ssize_t nbytes;
    int probes;
    if (!PyArg_ParseTuple(args, "OOOOnOi", &cur_obj, &old_obj, &keys_obj, &xor_obj, &nbytes, &mask_obj, &probes))
        return NULL;
    uint64_t mask, pos[SPREAD_MAX_PROBES];
    if (spread_args(mask_obj, probes, &mask) < 0) return NULL;
    uint64_t x = PyLong_AsUnsignedLongLong(xor_obj);
    if (x == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    SpreadGen cur, old;
    SpreadKeys keys;
    if (spread_gen(cur_obj, &cur, nbytes, 0) < 0) return NULL;
    if (spread_gen(old_obj, &old, nbytes, 0) < 0) {
        spread_gen_free(&cur);
        return NULL;
    }
    PyObject *out = NULL;
    if (spread_keys(keys_obj, &keys) == 0) {
        out = PyByteArray_FromStringAndSize(NULL, keys.n);
        if (out) {
            char *seen = PyByteArray_AS_STRING(out);
            for (Py_ssize_t i = 0; i < keys.n; i++) {
                if (i + SPREAD_AHEAD < keys.n && cur.bits)
                    spread_prefetch(cur.bits, keys.v[i + SPREAD_AHEAD] ^ x, mask, probes);
                spread_positions(keys.v[i] ^ x, mask, probes, pos);
                seen[i] = (char)((cur.bits && spread_test(cur.bits, pos, probes)) ||
                                 (old.bits && spread_test(old.bits, pos, probes)));
            }
        }
        spread_keys_free(&keys);
    }
    spread_gen_free(&cur);
    spread_gen_free(&old);
    return out;
}

/* Byte offsets set in one row during a call, for the record's note of changes (TenantSpread.mark). */
typedef struct {
    uint32_t *v;
    Py_ssize_t n, cap;
} SpreadOffsets;

static int spread_note(SpreadOffsets *o, uint64_t offset) {
    if (o->n == o->cap) {
        Py_ssize_t cap = o->cap ? 2 * o->cap : 256;
        uint32_t *v = PyMem_Realloc(o->v, sizeof(uint32_t) * cap);
        if (!v) return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = (uint32_t)offset;
    return 0;
}

static inline void spread_set(uint8_t *row, const uint64_t *pos, int probes) {
    for (int i = 0; i < probes; i++) row[pos[i] >> 3] |= (uint8_t)(1u << (pos[i] & 7));
}

/* spread_add(cur, old, keys, tenant_key, nbytes, mask, probes, note) -> (new pairs, offsets or None)
 *
 * TenantSpread.add on the current generation `cur` (written) with `old` (read, or None): a pair (key ^ tenant_key)
 * not yet in cur's pairs row is a new one; its fingerprint goes one level up (at most the record's levels), or, when
 * the pair is only in the old generation, is copied forward at its level (at least 1). All tests read the bits as
 * before the call; then the sets. With `note` true, the byte offsets set per row come back (tuple of levels + 1
 * bytes objects of native uint32, one per probe and key set, as the numpy path notes them). */
static PyObject *spread_add(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *cur_obj, *old_obj, *keys_obj, *tkey_obj, *mask_obj;
    Py_ssize_t nbytes;
    int probes, note;
    if (!PyArg_ParseTuple(args, "OOOOnOip", &cur_obj, &old_obj, &keys_obj, &tkey_obj, &nbytes, &mask_obj, &probes,
                          &note))
        return NULL;
    uint64_t mask;
    if (spread_args(mask_obj, probes, &mask) < 0) return NULL;
    uint64_t tkey = PyLong_AsUnsignedLongLong(tkey_obj);
    if (tkey == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    if (cur_obj == Py_None) {
        PyErr_SetString(PyExc_ValueError, "no current generation");
        return NULL;
    }
    SpreadGen cur, old;
    SpreadKeys keys;
    if (spread_gen(cur_obj, &cur, nbytes, 1) < 0) return NULL;
    if (spread_gen(old_obj, &old, nbytes, 0) < 0) {
        spread_gen_free(&cur);
        return NULL;
    }
    if (spread_same_levels(&cur, &old) < 0 || spread_keys(keys_obj, &keys) < 0) {
        spread_gen_free(&cur);
        spread_gen_free(&old);
        return NULL;
    }
    PyObject *result = NULL;
    const int levels = cur.levels;
    Py_ssize_t n = keys.n, todo = 0, *idx = NULL;
    /* Per key: its new level (0: the pair is known, nothing to do), from the bits before the call; `idx`: the keys
     * with something to do. Three passes, each prefetching the bytes it reads a few keys ahead: the pairs test, the
     * levels of the new pairs' fingerprints, the sets. */
    int8_t *level = PyMem_Calloc(n ? n : 1, 1);
    idx = PyMem_Malloc(sizeof(Py_ssize_t) * (n ? n : 1));
    SpreadOffsets offs[SPREAD_MAX_LEVELS + 1];
    memset(offs, 0, sizeof(offs));
    if (!level || !idx) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t ppos[SPREAD_MAX_PROBES], fpos[SPREAD_MAX_PROBES];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + SPREAD_AHEAD < n) spread_prefetch(cur.bits, keys.v[i + SPREAD_AHEAD] ^ tkey, mask, probes);
        spread_positions(keys.v[i] ^ tkey, mask, probes, ppos);
        if (!spread_test(cur.bits, ppos, probes)) idx[todo++] = i;
    }
    for (Py_ssize_t j = 0; j < todo; j++) {
        if (j + SPREAD_AHEAD < todo) {
            uint64_t key = keys.v[idx[j + SPREAD_AHEAD]];
            if (old.bits) spread_prefetch(old.bits, key ^ tkey, mask, probes);
            for (int r = 1; r <= levels; r++) {
                spread_prefetch(cur.bits + r * nbytes, key, mask, probes);
                if (old.bits) spread_prefetch(old.bits + r * nbytes, key, mask, probes);
            }
        }
        Py_ssize_t i = idx[j];
        spread_positions(keys.v[i] ^ tkey, mask, probes, ppos);
        int in_old = old.bits != NULL && spread_test(old.bits, ppos, probes);
        spread_positions(keys.v[i], mask, probes, fpos);
        int a = spread_level(&cur, fpos, probes), b = spread_level(&old, fpos, probes);
        int lv = a > b ? a : b;
        level[i] = (int8_t)(in_old ? (lv > 1 ? lv : 1) : (lv + 1 < levels ? lv + 1 : levels));
    }
    for (Py_ssize_t j = 0; j < todo; j++) {
        Py_ssize_t i = idx[j];
        spread_positions(keys.v[i] ^ tkey, mask, probes, ppos);
        spread_set(cur.bits, ppos, probes);
        spread_positions(keys.v[i], mask, probes, fpos);
        for (int r = 1; r <= level[i]; r++) spread_set(cur.bits + r * nbytes, fpos, probes);
        if (note) {
            for (int p = 0; p < probes; p++)
                if (spread_note(&offs[0], ppos[p] >> 3) < 0) goto nomem;
            for (int r = 1; r <= level[i]; r++)
                for (int p = 0; p < probes; p++)
                    if (spread_note(&offs[r], fpos[p] >> 3) < 0) goto nomem;
        }
    }
    if (note && todo) {
        PyObject *rows = PyTuple_New(levels + 1);
        if (!rows) goto done;
        for (int r = 0; r <= levels; r++) {
            PyObject *b = PyBytes_FromStringAndSize((const char *)offs[r].v, offs[r].n * (Py_ssize_t)sizeof(uint32_t));
            if (!b) {
                Py_DECREF(rows);
                goto done;
            }
            PyTuple_SET_ITEM(rows, r, b);
        }
        result = Py_BuildValue("(nN)", todo, rows);
    } else {
        result = Py_BuildValue("(nO)", todo, Py_None);
    }
    goto done;
nomem:
    PyErr_NoMemory();
done:
    for (int r = 0; r <= SPREAD_MAX_LEVELS; r++) PyMem_Free(offs[r].v);
    PyMem_Free(level);
    PyMem_Free(idx);
    spread_keys_free(&keys);
    spread_gen_free(&cur);
    spread_gen_free(&old);
    return result;
}

/* spread_tag(cur, keys, xor, nbytes, mask, probes, note) -> (new pairs, offsets or None)
 * TenantSpread.tag: the pairs (key ^ xor) not yet in cur's pairs row are set there (row 0 only: no level moves);
 * all tests read the bits as before the call. With `note`, the byte offsets set (native uint32, one per probe and
 * new pair). */
static PyObject *spread_tag(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *cur_obj, *keys_obj, *xor_obj, *mask_obj;
    Py_ssize_t nbytes;
    int probes, note;
    if (!PyArg_ParseTuple(args, "OOOnOip", &cur_obj, &keys_obj, &xor_obj, &nbytes, &mask_obj, &probes, &note))
        return NULL;
    uint64_t mask;
    if (spread_args(mask_obj, probes, &mask) < 0) return NULL;
    uint64_t x = PyLong_AsUnsignedLongLong(xor_obj);
    if (x == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    SpreadGen cur;
    SpreadKeys keys;
    if (cur_obj == Py_None) {
        PyErr_SetString(PyExc_ValueError, "no current generation");
        return NULL;
    }
    if (spread_gen(cur_obj, &cur, nbytes, 1) < 0) return NULL;
    if (spread_keys(keys_obj, &keys) < 0) {
        spread_gen_free(&cur);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = keys.n, fresh = 0;
    Py_ssize_t *idx = PyMem_Malloc(sizeof(Py_ssize_t) * (n ? n : 1));
    SpreadOffsets offs = {NULL, 0, 0};
    uint64_t pos[SPREAD_MAX_PROBES];
    if (!idx) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + SPREAD_AHEAD < n) spread_prefetch(cur.bits, keys.v[i + SPREAD_AHEAD] ^ x, mask, probes);
        spread_positions(keys.v[i] ^ x, mask, probes, pos);
        if (!spread_test(cur.bits, pos, probes)) idx[fresh++] = i;
    }
    for (Py_ssize_t j = 0; j < fresh; j++) {
        spread_positions(keys.v[idx[j]] ^ x, mask, probes, pos);
        spread_set(cur.bits, pos, probes);
        if (note)
            for (int p = 0; p < probes; p++)
                if (spread_note(&offs, pos[p] >> 3) < 0) {
                    PyErr_NoMemory();
                    goto done;
                }
    }
    if (note && fresh) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)offs.v, offs.n * (Py_ssize_t)sizeof(uint32_t));
        if (b) result = Py_BuildValue("(nN)", fresh, b);
    } else {
        result = Py_BuildValue("(nO)", fresh, Py_None);
    }
done:
    PyMem_Free(offs.v);
    PyMem_Free(idx);
    spread_keys_free(&keys);
    spread_gen_free(&cur);
    return result;
}

#define SPREAD_METHODS                                                                                               \
    {"spread_levels", spread_levels, METH_VARARGS,                                                                   \
     "spread_levels(cur, old, keys, nbytes, mask, probes) -> bytearray of levels (TenantSpread.tenants)"},               \
        {"spread_had", spread_had, METH_VARARGS,                                                                     \
         "spread_had(cur, old, keys, xor, nbytes, mask, probes) -> bytearray of 0/1 (TenantSpread.had)"},                \
        {"spread_tag", spread_tag, METH_VARARGS,                                                                     \
         "spread_tag(cur, keys, xor, nbytes, mask, probes, note) -> (new pairs, row-0 offsets or None)"},             \
        {"spread_add", spread_add, METH_VARARGS,                                                                     \
         "spread_add(cur, old, keys, tenant_key, nbytes, mask, probes, note) -> (new pairs, offsets per row or None)"},

#endif
