/* The content index's postings (detectors/index.py, ContentIndex) as a native hash table.
 *
 * fingerprint (uint64) -> the doc id of the newest text of each tenant that had it. Almost every fingerprint has one
 * owner: its slot holds that doc id. A fingerprint of several tenants holds an owner list instead: the doc ids, one
 * per tenant, in the order a dict {tenant: doc id} would keep them (a new tenant last, a newer text of a tenant in
 * its tenant's place, a dropped one taken out; back to a plain slot at one owner), so that the pure path's dicts and
 * this table answer alike, order included (tests/detectors/test_native_index.py).
 *
 * The table knows the tenant of each live text (the index inserts texts with consecutive ids and drops them oldest
 * first, so a ring holds them), and with it decides per fingerprint in C, in one pass over a text's fingerprints,
 * what ContentIndex._insert and _drop did with two Python dicts. Open addressing with linear probing and
 * backward-shift deletion (no tombstones), slots found from the fingerprint by Fibonacci hashing; 16 bytes a slot
 * (key, value), at most 70 % full; the bulk loops prefetch slots a few fingerprints ahead, as the table is far
 * larger than the caches. Pure computation: no I/O, no clock.
 */
#ifndef WINNOW_INDEX_H
#define WINNOW_INDEX_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PT_EMPTY INT64_MIN
#define PT_MIN_BITS 10
#define PT_GOLDEN 0x9E3779B97F4A7C15ULL
#define PT_AHEAD 12 /* slots prefetched ahead in the bulk loops */
#define PT_BUF 2048 /* keys converted on the stack below this many */

#include "_winnow_keys.h" /* a call's fingerprints as native uint64 */

/* A slot's value: PT_EMPTY, a doc id (>= 0), or an owner list: -2 - its index in the pool. */
typedef struct {
    uint64_t key;
    int64_t val;
} PtSlot;

/* A live text's tenant: the (interned) str and its hash, so that texts of two tenants compare without a read of
 * either str. */
typedef struct {
    PyObject *name;
    Py_hash_t hash;
} PtTenant;

typedef struct {
    int32_t n, cap;
    int64_t doc[]; /* one per tenant, in dict order */
} PtOwners;

typedef struct {
    PyObject_HEAD
    PtSlot *slots;
    int bits;
    Py_ssize_t used;  /* occupied slots */
    Py_ssize_t multi; /* of which owner lists */
    /* Owner lists, and the free indices among them. */
    PtOwners **pool;
    Py_ssize_t npool, poolcap;
    Py_ssize_t *free;
    Py_ssize_t nfree;
    /* Tenants of the live texts, ids base .. base + ndocs - 1, in a ring. */
    int64_t base;
    PtTenant *tenants;
    Py_ssize_t ndocs, dcap, dhead;
} Postings;

static inline size_t pt_home(uint64_t key, int bits) { return (size_t)((key * PT_GOLDEN) >> (64 - bits)); }

static inline int pt_is_list(int64_t val) { return val <= -2 && val != PT_EMPTY; }
static inline PtOwners *pt_list(const Postings *t, int64_t val) { return t->pool[-2 - val]; }

/* The slot holding `key`, or the free slot where it would go. */
static inline size_t pt_find(const Postings *t, uint64_t key) {
    size_t mask = ((size_t)1 << t->bits) - 1, i = pt_home(key, t->bits);
    while (t->slots[i].val != PT_EMPTY && t->slots[i].key != key) i = (i + 1) & mask;
    return i;
}

static int pt_alloc(Postings *t, int bits) {
    size_t cap = (size_t)1 << bits;
    PtSlot *slots = PyMem_Malloc(cap * sizeof(PtSlot));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < cap; i++) slots[i].val = PT_EMPTY;
    t->slots = slots;
    t->bits = bits;
    return 0;
}

static int pt_grow(Postings *t, int bits) {
    PtSlot *old = t->slots;
    size_t cap = (size_t)1 << t->bits;
    if (pt_alloc(t, bits) < 0) {
        t->slots = old;
        return -1;
    }
    size_t mask = ((size_t)1 << t->bits) - 1;
    for (size_t i = 0; i < cap; i++) {
        if (old[i].val == PT_EMPTY) continue;
        size_t j = pt_home(old[i].key, t->bits);
        while (t->slots[j].val != PT_EMPTY) j = (j + 1) & mask;
        t->slots[j] = old[i];
    }
    PyMem_Free(old);
    return 0;
}

/* Room for `more` keys (at most 70 % full). */
static inline int pt_reserve(Postings *t, Py_ssize_t more) {
    int bits = t->bits;
    while ((size_t)(t->used + more) * 10 > ((size_t)7 << bits)) bits++;
    return bits == t->bits ? 0 : pt_grow(t, bits);
}

static void pt_free_list(Postings *t, int64_t val) {
    Py_ssize_t idx = -2 - val;
    PyMem_Free(t->pool[idx]);
    t->pool[idx] = NULL;
    t->free[t->nfree++] = idx; /* `free` has room for every pool index */
}

/* A new owner list [a, b]; its slot value. */
static int pt_new_list(Postings *t, int64_t a, int64_t b, int64_t *val) {
    PtOwners *ol = PyMem_Malloc(sizeof(PtOwners) + 2 * sizeof(int64_t));
    if (!ol) {
        PyErr_NoMemory();
        return -1;
    }
    ol->n = 2;
    ol->cap = 2;
    ol->doc[0] = a;
    ol->doc[1] = b;
    Py_ssize_t idx;
    if (t->nfree) {
        idx = t->free[--t->nfree];
    } else {
        if (t->npool == t->poolcap) {
            Py_ssize_t cap = t->poolcap ? 2 * t->poolcap : 256;
            PtOwners **pool = PyMem_Realloc(t->pool, cap * sizeof(PtOwners *));
            Py_ssize_t *free = pool ? PyMem_Realloc(t->free, cap * sizeof(Py_ssize_t)) : NULL;
            if (pool) t->pool = pool;
            if (!pool || !free) {
                PyMem_Free(ol);
                PyErr_NoMemory();
                return -1;
            }
            t->free = free;
            t->poolcap = cap;
        }
        idx = t->npool++;
    }
    t->pool[idx] = ol;
    *val = -2 - (int64_t)idx;
    return 0;
}

static int pt_append(Postings *t, int64_t val, int64_t doc) {
    PtOwners *ol = pt_list(t, val);
    if (ol->n == ol->cap) {
        int32_t cap = ol->cap * 2;
        PtOwners *grown = PyMem_Realloc(ol, sizeof(PtOwners) + (size_t)cap * sizeof(int64_t));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        grown->cap = cap;
        ol = t->pool[-2 - val] = grown;
    }
    ol->doc[ol->n++] = doc;
    return 0;
}

static void pt_delete(Postings *t, size_t i) {
    size_t mask = ((size_t)1 << t->bits) - 1, j = i;
    t->used--;
    for (;;) { /* backward shift: move later members of the cluster into the hole when their home allows */
        j = (j + 1) & mask;
        if (t->slots[j].val == PT_EMPTY) break;
        size_t home = pt_home(t->slots[j].key, t->bits);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].val = PT_EMPTY;
}

/* A key that is no fingerprint (negative, too large, not an int) is simply not there, as for a dict. */
static int pt_lookup(Postings *t, PyObject *obj, int64_t *val) {
    uint64_t key;
    if (pt_key(obj, &key) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
        PyErr_Clear();
        *val = PT_EMPTY;
        return 0;
    }
    *val = t->slots[pt_find(t, key)].val;
    return 0;
}

static PtTenant *pt_tenant(const Postings *t, int64_t doc) {
    if (doc < t->base || doc >= t->base + t->ndocs) return NULL;
    return &t->tenants[(t->dhead + (doc - t->base)) % t->dcap];
}

static int pt_push_doc(Postings *t, int64_t doc, PyObject *tenant) {
    Py_hash_t hash = PyObject_Hash(tenant);
    if (hash == -1) return -1;
    if (t->ndocs && doc != t->base + t->ndocs) {
        PyErr_Format(PyExc_ValueError, "postings: text %lld inserted out of order", (long long)doc);
        return -1;
    }
    if (t->ndocs == t->dcap) {
        Py_ssize_t cap = t->dcap ? 2 * t->dcap : 64;
        PtTenant *ring = PyMem_Malloc(sizeof(PtTenant) * cap);
        if (!ring) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < t->ndocs; i++) ring[i] = t->tenants[(t->dhead + i) % t->dcap];
        PyMem_Free(t->tenants);
        t->tenants = ring;
        t->dcap = cap;
        t->dhead = 0;
    }
    if (!t->ndocs) t->base = doc;
    Py_INCREF(tenant);
    PtTenant *slot = &t->tenants[(t->dhead + t->ndocs) % t->dcap];
    slot->name = tenant;
    slot->hash = hash;
    t->ndocs++;
    return 0;
}

static inline int pt_same_tenant(const PtTenant *a, const PtTenant *b) {
    if (a->name == b->name) return 1;
    if (a->hash != b->hash) return 0;
    return PyObject_RichCompareBool(a->name, b->name, Py_EQ);
}

static inline void pt_prefetch(const Postings *t, const uint64_t *keys, Py_ssize_t k, Py_ssize_t n) {
    if (k + PT_AHEAD < n) __builtin_prefetch(&t->slots[pt_home(keys[k + PT_AHEAD], t->bits)], 1);
}

/* One fingerprint of a new text `doc` of tenant `mine` (ContentIndex._insert): nobody had it -> this text; the
 * same tenant had it alone -> this text; another tenant alone -> the owners [that text, this one]; several -> this
 * text in its tenant's place, or last. */
static int pt_insert_one(Postings *t, uint64_t key, int64_t doc, const PtTenant *mine) {
    size_t mask = ((size_t)1 << t->bits) - 1, i = pt_home(key, t->bits);
    while (t->slots[i].val != PT_EMPTY && t->slots[i].key != key) i = (i + 1) & mask;
    int64_t v = t->slots[i].val;
    if (v == PT_EMPTY) {
        t->slots[i].key = key;
        t->slots[i].val = doc;
        t->used++;
        return 0;
    }
    if (v == doc) return 0; /* listed twice in the text */
    if (v >= 0) {
        const PtTenant *other = pt_tenant(t, v);
        if (!other) {
            PyErr_Format(PyExc_RuntimeError, "postings: text %lld is not live", (long long)v);
            return -1;
        }
        int same = pt_same_tenant(other, mine);
        if (same < 0) return -1;
        if (same) {
            t->slots[i].val = doc;
            return 0;
        }
        int64_t val;
        if (pt_new_list(t, v, doc, &val) < 0) return -1;
        t->slots[i].val = val;
        t->multi++;
        return 0;
    }
    PtOwners *ol = pt_list(t, v);
    for (int32_t j = 0; j < ol->n; j++) {
        const PtTenant *owner = pt_tenant(t, ol->doc[j]);
        if (!owner) {
            PyErr_Format(PyExc_RuntimeError, "postings: text %lld is not live", (long long)ol->doc[j]);
            return -1;
        }
        int same = pt_same_tenant(owner, mine);
        if (same < 0) return -1;
        if (same) {
            ol->doc[j] = doc;
            return 0;
        }
    }
    return pt_append(t, v, doc);
}

/* insert(hashes, doc_id, tenant): the text `doc_id` of `tenant` (the next id) holds `hashes`. */
static PyObject *Postings_insert(Postings *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "insert(hashes, doc_id, tenant)");
        return NULL;
    }
    long long doc = PyLong_AsLongLong(args[1]);
    if (doc == -1 && PyErr_Occurred()) return NULL;
    if (doc < 0) {
        PyErr_SetString(PyExc_ValueError, "doc ids are not negative");
        return NULL;
    }
    uint64_t buf[PT_BUF];
    PtKeys keys;
    if (pt_load(args[0], &keys, buf, PT_BUF) < 0) return NULL;
    int err = pt_reserve(t, keys.n) < 0 || pt_push_doc(t, doc, args[2]) < 0;
    const PtTenant *mine = err ? NULL : pt_tenant(t, doc);
    for (Py_ssize_t k = 0; !err && k < keys.n; k++) {
        pt_prefetch(t, keys.v, k, keys.n);
        err = pt_insert_one(t, keys.v[k], doc, mine);
    }
    pt_unload(&keys);
    if (err) return NULL;
    Py_RETURN_NONE;
}

/* One fingerprint of the oldest text `doc` as it leaves (ContentIndex._drop): pointing at it -> gone; in an owner
 * list -> out of it, and back to a plain slot at one owner. */
static void pt_drop_one(Postings *t, uint64_t key, int64_t doc) {
    size_t mask = ((size_t)1 << t->bits) - 1, i = pt_home(key, t->bits);
    while (t->slots[i].val != PT_EMPTY && t->slots[i].key != key) i = (i + 1) & mask;
    int64_t v = t->slots[i].val;
    if (v == doc) {
        pt_delete(t, i);
    } else if (pt_is_list(v)) {
        PtOwners *ol = pt_list(t, v);
        for (int32_t j = 0; j < ol->n; j++) {
            if (ol->doc[j] != doc) continue;
            memmove(&ol->doc[j], &ol->doc[j + 1], (size_t)(ol->n - j - 1) * sizeof(int64_t));
            if (--ol->n == 1) {
                t->slots[i].val = ol->doc[0];
                pt_free_list(t, v);
                t->multi--;
            }
            break;
        }
    }
}

/* drop(hashes, doc_id): the oldest live text `doc_id` leaves. */
static PyObject *Postings_drop(Postings *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "drop(hashes, doc_id)");
        return NULL;
    }
    long long doc = PyLong_AsLongLong(args[1]);
    if (doc == -1 && PyErr_Occurred()) return NULL;
    if (!t->ndocs || doc != t->base) {
        PyErr_Format(PyExc_ValueError, "postings: text %lld dropped out of order", doc);
        return NULL;
    }
    uint64_t buf[PT_BUF];
    PtKeys keys;
    if (pt_load(args[0], &keys, buf, PT_BUF) < 0) return NULL;
    for (Py_ssize_t k = 0; k < keys.n; k++) {
        pt_prefetch(t, keys.v, k, keys.n);
        pt_drop_one(t, keys.v[k], doc);
    }
    pt_unload(&keys);
    Py_DECREF(t->tenants[t->dhead].name);
    t->dhead = (t->dhead + 1) % t->dcap;
    t->ndocs--;
    t->base++;
    Py_RETURN_NONE;
}

/* get(h, default=None) -> the doc id of its one owner (as `_single.get`). */
static PyObject *Postings_get(Postings *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(h, default=None)");
        return NULL;
    }
    int64_t v;
    if (pt_lookup(t, args[0], &v) < 0) return NULL;
    if (v < 0) {
        PyObject *dflt = nargs == 2 ? args[1] : Py_None;
        Py_INCREF(dflt);
        return dflt;
    }
    return PyLong_FromLongLong(v);
}

static PyObject *pt_owners_dict(Postings *t, int64_t val) {
    PtOwners *ol = pt_list(t, val);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int32_t j = 0; j < ol->n; j++) {
        const PtTenant *owner = pt_tenant(t, ol->doc[j]);
        PyObject *doc = owner ? PyLong_FromLongLong(ol->doc[j]) : NULL;
        if (!doc || PyDict_SetItem(d, owner->name, doc) < 0) {
            if (!owner) PyErr_SetString(PyExc_RuntimeError, "postings: an owner's text is not live");
            Py_XDECREF(doc);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(doc);
    }
    return d;
}

/* owners(h, default=None) -> {tenant: doc id} of a fingerprint of several tenants (as `_multi.get`). */
static PyObject *Postings_owners(Postings *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "owners(h, default=None)");
        return NULL;
    }
    int64_t v;
    if (pt_lookup(t, args[0], &v) < 0) return NULL;
    if (!pt_is_list(v)) {
        PyObject *dflt = nargs == 2 ? args[1] : Py_None;
        Py_INCREF(dflt);
        return dflt;
    }
    return pt_owners_dict(t, v);
}

static int Postings_contains(Postings *t, PyObject *key) {
    int64_t v;
    if (pt_lookup(t, key, &v) < 0) return -1;
    return v >= 0;
}

static PyObject *Postings_has_owners(Postings *t, PyObject *key) {
    int64_t v;
    if (pt_lookup(t, key, &v) < 0) return NULL;
    return PyBool_FromLong(pt_is_list(v));
}

static Py_ssize_t Postings_len(Postings *t) { return t->used - t->multi; }

static PyObject *Postings_get_multi(Postings *t, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(t->multi); }

#endif
