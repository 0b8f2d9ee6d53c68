/* Native hot loop of keyed winnowing (scheme winnow-v2): units, cached unit hashes, k-grams, window minima.
 *
 * The same computation as the pure path of detectors/fingerprint.py and the unit definition of
 * detectors/tokens.py, on the str's own code points (no UTF-8 copy, no Python object per unit):
 *   - ASCII: word characters lower-cased (the FOLD table), every other ASCII character separates units;
 *   - other code points take their class from the CLASS table (tokens.py): WORD joins the current word,
 *     CHAR is a unit of its own, DROP (format characters) vanishes, SEP separates;
 *   - a unit is identified by its UTF-8 bytes as written (folded ASCII); its keyed hash comes from the
 *     Python callback (blake2b of the normalised unit: not reimplemented here) on the first sight, then
 *     from a bounded cache;
 *   - k-gram hashes by Horner's rule with wraparound uint64 and the same avalanche, window minima, each
 *     selected value once in order of first selection.
 * Pure computation: no I/O, no clock. Property-tested against the pure path (tests/detectors).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SEP 0
#define WORD 1
#define CHAR 2
#define DROP 3

static const uint64_t BASE = 0x9E3779B97F4A7C15ULL;
static const uint64_t MIX = 0xBF58476D1CE4E5B9ULL;
/* Units longer than this are hashed by the callback each time (rare; keeps the key arena small). */
#define MAX_KEY 256

#define INLINE_KEY 16
typedef struct {
    uint64_t h;   /* hash of the key bytes (0: free slot) */
    uint64_t val; /* the unit's keyed hash */
    uint64_t k0, k1; /* keys of up to 16 bytes, zero-padded (most words): no arena access to compare */
    uint32_t off; /* longer keys: their bytes in the arena */
    uint32_t len;
} Entry;

typedef struct {
    PyObject_HEAD
    int k, w;
    PyObject *classes_obj; /* bytes: the CLASS table (one byte per code point below table_end) */
    const uint8_t *classes;
    Py_ssize_t table_end;
    uint8_t fold[128];
    Entry *table;
    size_t cap, count, max_units;
    uint8_t *arena;
    size_t arena_len, arena_cap, max_arena;
    uint64_t *cp_hash; /* single-character units by code point (0: not computed yet) */
    PyObject *model;   /* the TextFingerprint class, or NULL: fingerprint() then returns a tuple */
} Winnower;

static PyObject *s_dict, *s_fields_set, *s_extra, *s_private, *s_hashes, *s_words, *empty_tuple;

/* ---- growable uint64 buffer ---- */
#define STACK_UNITS 1024
typedef struct {
    uint64_t *v;
    size_t n, cap;
    uint64_t local[STACK_UNITS]; /* short texts need no heap */
} U64s;

static void u64s_init(U64s *a) {
    a->v = a->local;
    a->n = 0;
    a->cap = STACK_UNITS;
}

static void u64s_free(U64s *a) {
    if (a->v != a->local) PyMem_Free(a->v);
}

static int u64s_grow(U64s *a) {
    size_t cap = a->cap * 2;
    uint64_t *v = PyMem_Malloc(cap * sizeof(uint64_t));
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(v, a->v, a->n * sizeof(uint64_t));
    u64s_free(a);
    a->v = v;
    a->cap = cap;
    return 0;
}

static inline int u64s_push(U64s *a, uint64_t x) {
    if (a->n == a->cap && u64s_grow(a) < 0) return -1;
    a->v[a->n++] = x;
    return 0;
}

static uint64_t key_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ULL ^ (n * BASE);
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        h = (h ^ x) * MIX;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t x = 0;
        memcpy(&x, p, n);
        h = (h ^ x) * MIX;
        h ^= h >> 32;
    }
    h *= BASE;
    h ^= h >> 29;
    return h ? h : 1;
}

static inline void inline_key(const uint8_t *key, size_t len, uint64_t *k0, uint64_t *k1) {
    uint8_t b[INLINE_KEY] = {0};
    memcpy(b, key, len);
    memcpy(k0, b, 8);
    memcpy(k1, b + 8, 8);
}

static void cache_clear(Winnower *self) {
    if (self->table) memset(self->table, 0, self->cap * sizeof(Entry));
    self->count = 0;
    self->arena_len = 0;
}

static int cache_grow(Winnower *self) {
    size_t cap = self->cap * 2;
    Entry *t = PyMem_Calloc(cap, sizeof(Entry));
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < self->cap; i++) {
        Entry *e = &self->table[i];
        if (!e->h) continue;
        size_t s = (size_t)(e->h >> 7) & (cap - 1);
        while (t[s].h) s = (s + 1) & (cap - 1);
        t[s] = *e;
    }
    PyMem_Free(self->table);
    self->table = t;
    self->cap = cap;
    return 0;
}

/* 1 and *val if found, 0 if not. */
static int cache_find(Winnower *self, const uint8_t *key, size_t len, uint64_t h, uint64_t *val) {
    size_t mask = self->cap - 1;
    size_t s = (size_t)(h >> 7) & mask;
    uint64_t k0 = 0, k1 = 0;
    if (len <= INLINE_KEY) inline_key(key, len, &k0, &k1);
    for (;;) {
        Entry *e = &self->table[s];
        if (!e->h) return 0;
        if (e->h == h && e->len == len &&
            (len <= INLINE_KEY ? e->k0 == k0 && e->k1 == k1 : memcmp(self->arena + e->off, key, len) == 0)) {
            *val = e->val;
            return 1;
        }
        s = (s + 1) & mask;
    }
}

static int cache_add(Winnower *self, const uint8_t *key, size_t len, uint64_t h, uint64_t val) {
    uint64_t dummy;
    if (cache_find(self, key, len, h, &dummy)) return 0; /* the callback may have let another thread add it */
    if (self->count + 1 > self->max_units || self->arena_len + len > self->max_arena) cache_clear(self);
    if ((self->count + 1) * 2 > self->cap && cache_grow(self) < 0) return -1;
    uint64_t k0 = 0, k1 = 0;
    if (len <= INLINE_KEY) {
        inline_key(key, len, &k0, &k1);
    } else if (self->arena_len + len > self->arena_cap) {
        size_t cap = self->arena_cap ? self->arena_cap : 1 << 16;
        while (cap < self->arena_len + len) cap *= 2;
        uint8_t *a = PyMem_Realloc(self->arena, cap);
        if (!a) {
            PyErr_NoMemory();
            return -1;
        }
        self->arena = a;
        self->arena_cap = cap;
    }
    if (len > INLINE_KEY) memcpy(self->arena + self->arena_len, key, len);
    size_t mask = self->cap - 1;
    size_t s = (size_t)(h >> 7) & mask;
    while (self->table[s].h) s = (s + 1) & mask;
    self->table[s].h = h;
    self->table[s].val = val;
    self->table[s].k0 = k0;
    self->table[s].k1 = k1;
    self->table[s].off = (uint32_t)self->arena_len;
    self->table[s].len = (uint32_t)len;
    if (len > INLINE_KEY) self->arena_len += len;
    self->count++;
    return 0;
}

/* The keyed hash of a unit's bytes, from the Python callback. */
static int call_hash(PyObject *fn, const uint8_t *key, size_t len, uint64_t *out) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)len);
    if (!b) return -1;
    PyObject *r = PyObject_CallOneArg(fn, b);
    Py_DECREF(b);
    if (!r) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(r);
    Py_DECREF(r);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int word_unit(Winnower *self, PyObject *fn, const uint8_t *key, size_t len, U64s *out) {
    uint64_t v;
    if (len > MAX_KEY) {
        if (call_hash(fn, key, len, &v) < 0) return -1;
        return u64s_push(out, v);
    }
    uint64_t h = key_hash(key, len);
    if (!cache_find(self, key, len, h, &v)) {
        if (call_hash(fn, key, len, &v) < 0) return -1;
        if (cache_add(self, key, len, h, v) < 0) return -1;
    }
    return u64s_push(out, v);
}

static size_t utf8_put(uint8_t *p, Py_UCS4 c) {
    if (c < 0x80) {
        p[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        p[0] = (uint8_t)(0xC0 | (c >> 6));
        p[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) { /* surrogates too ("surrogatepass"): they are SEP, so never encoded in practice */
        p[0] = (uint8_t)(0xE0 | (c >> 12));
        p[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        p[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    p[0] = (uint8_t)(0xF0 | (c >> 18));
    p[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    p[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    p[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

static int char_unit(Winnower *self, PyObject *fn, Py_UCS4 c, U64s *out) {
    if (!self->cp_hash) {
        self->cp_hash = PyMem_Calloc((size_t)self->table_end, sizeof(uint64_t));
        if (!self->cp_hash) {
            PyErr_NoMemory();
            return -1;
        }
    }
    uint64_t v = self->cp_hash[c]; /* c < table_end: CHAR comes from the table */
    if (!v) {
        uint8_t b[4];
        size_t n = utf8_put(b, c);
        if (call_hash(fn, b, n, &v) < 0) return -1;
        if (self->cp_hash) self->cp_hash[c] = v;
    }
    return u64s_push(out, v);
}

/* The unit hashes of `text`, in order, into `out`. */
static int unit_hashes(Winnower *self, PyObject *text, PyObject *fn, U64s *out) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const uint8_t *fold = self->fold;
    uint8_t local[MAX_KEY + 8];
    size_t wcap = sizeof(local), wlen = 0;
    uint8_t *word = local;
    int rc = -1;
    if (PyUnicode_IS_ASCII(text)) {
        const uint8_t *s = data;
        Py_ssize_t i = 0;
        while (i < n) {
            while (i < n && fold[s[i]] == ' ') i++;
            Py_ssize_t start = i;
            while (i < n && fold[s[i]] != ' ') i++;
            size_t len = (size_t)(i - start);
            if (!len) break;
            if (len > wcap) {
                while (wcap < len) wcap *= 2;
                uint8_t *nw = word == local ? PyMem_Malloc(wcap) : PyMem_Realloc(word, wcap);
                if (!nw) {
                    PyErr_NoMemory();
                    goto done;
                }
                word = nw;
            }
            for (size_t j = 0; j < len; j++) word[j] = fold[s[start + (Py_ssize_t)j]];
            if (word_unit(self, fn, word, len, out) < 0) goto done;
        }
        rc = 0;
        goto done;
    }
    const uint8_t *classes = self->classes;
    Py_UCS4 last = (Py_UCS4)(self->table_end - 1);
    for (Py_ssize_t i = 0; i <= n; i++) {
        int cls;
        Py_UCS4 c = 0;
        uint8_t f = ' ';
        if (i == n) {
            cls = SEP; /* the last word ends */
        } else {
            c = PyUnicode_READ(kind, data, i);
            if (c < 0x80) {
                f = fold[c];
                cls = f == ' ' ? SEP : WORD;
            } else {
                cls = classes[c < last ? c : last];
            }
        }
        if (cls == DROP) continue; /* format characters vanish: the text around them closes up */
        if (cls == WORD) {
            if (wlen + 4 > wcap) {
                wcap *= 2;
                uint8_t *nw = word == local ? PyMem_Malloc(wcap) : PyMem_Realloc(word, wcap);
                if (!nw) {
                    PyErr_NoMemory();
                    goto done;
                }
                if (word == local) memcpy(nw, local, wlen);
                word = nw;
            }
            if (c < 0x80)
                word[wlen++] = f;
            else
                wlen += utf8_put(word + wlen, c);
            continue;
        }
        if (wlen) {
            if (word_unit(self, fn, word, wlen, out) < 0) goto done;
            wlen = 0;
        }
        if (cls == CHAR && char_unit(self, fn, c, out) < 0) goto done;
    }
    rc = 0;
done:
    if (word != local) PyMem_Free(word);
    return rc;
}

static int check_args(PyObject *text, PyObject *fn) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return -1;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "hash_fn must be callable");
        return -1;
    }
    return 0;
}

static PyObject *Winnower_hashes(Winnower *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "hashes(text, hash_fn)");
        return NULL;
    }
    if (check_args(args[0], args[1]) < 0) return NULL;
    U64s out;
    u64s_init(&out);
    if (unit_hashes(self, args[0], args[1], &out) < 0) {
        u64s_free(&out);
        return NULL;
    }
    PyObject *r = PyByteArray_FromStringAndSize((const char *)out.v, (Py_ssize_t)(out.n * sizeof(uint64_t)));
    u64s_free(&out);
    return r;
}

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
static PyObject *select_minima(Winnower *self, const uint64_t *kg, size_t n) {
    PyObject *list = PyList_New(0);
    if (!list || n == 0) return list;
    size_t w = (size_t)self->w;
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

/* The model object without validation (our own output): as TextFingerprint.model_construct, through the
 * same slots object.__setattr__ would set. */
static PyObject *make_model(PyObject *model, PyObject *hashes, Py_ssize_t units) {
    PyObject *obj = NULL, *dict = NULL, *fields = NULL, *words = PyLong_FromSsize_t(units);
    if (!words) goto fail;
    obj = PyBaseObject_Type.tp_new((PyTypeObject *)model, empty_tuple, NULL);
    dict = PyDict_New();
    fields = PySet_New(NULL);
    if (!obj || !dict || !fields) goto fail;
    if (PyDict_SetItem(dict, s_hashes, hashes) < 0 || PyDict_SetItem(dict, s_words, words) < 0) goto fail;
    if (PySet_Add(fields, s_hashes) < 0 || PySet_Add(fields, s_words) < 0) goto fail;
    if (PyObject_GenericSetAttr(obj, s_dict, dict) < 0 || PyObject_GenericSetAttr(obj, s_fields_set, fields) < 0 ||
        PyObject_GenericSetAttr(obj, s_extra, Py_None) < 0 || PyObject_GenericSetAttr(obj, s_private, Py_None) < 0)
        goto fail;
    Py_DECREF(words);
    Py_DECREF(dict);
    Py_DECREF(fields);
    return obj;
fail:
    Py_XDECREF(words);
    Py_XDECREF(obj);
    Py_XDECREF(dict);
    Py_XDECREF(fields);
    return NULL;
}

static void kgrams_in_place(uint64_t *v, size_t units, size_t k) {
    /* kg[i] reads v[i..i+k-1], and only v[i] is overwritten. Horner's rule, wrapping modulo 2**64, then the
     * same avalanche as Fingerprinter.kgram_hashes. */
    size_t nkg = units >= k ? units - k + 1 : 0;
    for (size_t i = 0; i < nkg; i++) {
        uint64_t acc = v[i];
        for (size_t j = 1; j < k; j++) acc = acc * BASE + v[i + j];
        acc ^= acc >> 31;
        acc *= MIX;
        acc ^= acc >> 29;
        v[i] = acc;
    }
}

/* kgrams(unit_hashes: uint64 buffer) -> bytearray of the k-gram hashes (native uint64) */
static PyObject *Winnower_kgrams(Winnower *self, PyObject *arg) {
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (buf.len % 8) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "unit hashes must be uint64");
        return NULL;
    }
    size_t units = (size_t)buf.len / 8, k = (size_t)self->k, nkg = units >= k ? units - k + 1 : 0;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(units * 8));
    if (!out) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    uint64_t *v = (uint64_t *)PyByteArray_AS_STRING(out);
    memcpy(v, buf.buf, units * 8);
    PyBuffer_Release(&buf);
    kgrams_in_place(v, units, k);
    if (PyByteArray_Resize(out, (Py_ssize_t)(nkg * 8)) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* fingerprint(text, hash_fn) -> TextFingerprint (or (selected hashes, number of units) without a model) */
static PyObject *Winnower_fingerprint(Winnower *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fingerprint(text, hash_fn)");
        return NULL;
    }
    if (check_args(args[0], args[1]) < 0) return NULL;
    U64s u;
    u64s_init(&u);
    if (unit_hashes(self, args[0], args[1], &u) < 0) {
        u64s_free(&u);
        return NULL;
    }
    size_t units = u.n, k = (size_t)self->k, nkg = units >= k ? units - k + 1 : 0;
    kgrams_in_place(u.v, units, k);
    PyObject *list = select_minima(self, u.v, nkg);
    u64s_free(&u);
    if (!list) return NULL;
    PyObject *r;
    if (self->model) {
        r = make_model(self->model, list, (Py_ssize_t)units);
    } else {
        PyObject *n = PyLong_FromSize_t(units);
        r = n ? PyTuple_Pack(2, list, n) : NULL;
        Py_XDECREF(n);
    }
    Py_DECREF(list);
    return r;
}

/* ---- prefix digests for session-incremental fingerprinting (detectors/session_prints.py) ----
 * A polynomial hash modulo the Mersenne prime 2**61 - 1 at a secret point r (derived from the fingerprint
 * key), over 7-byte little-endian chunks (< 2**56 < p), the last one zero-padded, then the length:
 *   H(x) = ((c_1 r^(m-1) + ... + c_m) r + len(x)) mod p.
 * Two different texts of at most L chunks collide for at most L + 1 of the p values of r (they are roots of
 * a non-zero polynomial), so an edit nobody can see the key of passes with probability ~1e-13. The caller
 * keys the result once more with blake2b, so a stored digest reveals nothing about the text. Four chunks a
 * step (powers r^1..r^4): independent multiplications, several GB/s, against ~1 GB/s for SHA-256. */
#define P61 ((uint64_t)0x1FFFFFFFFFFFFFFFULL)

static inline uint64_t red61(unsigned __int128 x) {
    uint64_t lo = (uint64_t)x & P61;
    unsigned __int128 hi = x >> 61;
    uint64_t s = lo + ((uint64_t)hi & P61) + (uint64_t)(hi >> 61);
    s = (s & P61) + (s >> 61);
    return s >= P61 ? s - P61 : s;
}

static inline uint64_t chunk7(const uint8_t *p, size_t n) {
    uint64_t x = 0;
    memcpy(&x, p, n < 7 ? n : 7);
    return x; /* little-endian machines; big-endian ones only get a different (still exact) hash */
}

static inline uint64_t load7(const uint8_t *p) { /* 8 bytes readable at p */
    uint64_t x;
    memcpy(&x, p, 8);
    return x & 0x00FFFFFFFFFFFFFFULL;
}

/* Horner over the full chunks of data[from/7*7 .. to/7*7) continuing acc. */
static uint64_t poly_chunks(uint64_t acc, const uint8_t *d, size_t i, size_t end, uint64_t r, uint64_t r2,
                            uint64_t r3, uint64_t r4) {
    for (; i + 29 <= end; i += 28) { /* + 29: the last 8-byte load stays inside */
        unsigned __int128 x = (unsigned __int128)acc * r4 + (unsigned __int128)load7(d + i) * r3 +
                              (unsigned __int128)load7(d + i + 7) * r2 + (unsigned __int128)load7(d + i + 14) * r +
                              load7(d + i + 21);
        acc = red61(x);
    }
    for (; i + 7 <= end; i += 7) acc = red61((unsigned __int128)acc * r + chunk7(d + i, 7));
    return acc;
}

static uint64_t poly_final(uint64_t acc, const uint8_t *d, size_t n, uint64_t r) {
    size_t full = n / 7 * 7;
    if (n > full) acc = red61((unsigned __int128)acc * r + chunk7(d + full, n - full));
    return red61((unsigned __int128)acc * r + n);
}

/* prefix_digests(data, r, a, b) -> (H(data[:a]), H(data[:b])), one pass, a <= b <= len(data), 0 < r < p */
static PyObject *prefix_digests(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer buf;
    unsigned long long r;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "y*Knn", &buf, &r, &a, &b)) return NULL;
    if (a < 0 || a > b || b > buf.len || r == 0 || r >= P61) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "need 0 <= a <= b <= len(data) and 0 < r < 2**61 - 1");
        return NULL;
    }
    const uint8_t *d = buf.buf;
    uint64_t r2 = red61((unsigned __int128)r * r), r3 = red61((unsigned __int128)r2 * r),
             r4 = red61((unsigned __int128)r3 * r);
    size_t fa = (size_t)a / 7 * 7, fb = (size_t)b / 7 * 7;
    uint64_t acc = poly_chunks(0, d, 0, fa, r, r2, r3, r4);
    uint64_t ha = poly_final(acc, d, (size_t)a, r);
    acc = poly_chunks(acc, d, fa, fb, r, r2, r3, r4);
    uint64_t hb = poly_final(acc, d, (size_t)b, r);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)ha, (unsigned long long)hb);
}

static PyMethodDef module_methods[] = {
    {"prefix_digests", prefix_digests, METH_VARARGS,
     "prefix_digests(data, r, a, b) -> polynomial hashes mod 2**61 - 1 of data[:a] and data[:b]"},
    {NULL, NULL, 0, NULL},
};

static PyObject *Winnower_clear(Winnower *self, PyObject *Py_UNUSED(ignored)) {
    cache_clear(self);
    Py_RETURN_NONE;
}

static PyObject *Winnower_get_cached(Winnower *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSize_t(self->count);
}

static int Winnower_init(Winnower *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"k", "w", "classes", "fold", "max_units", "max_bytes", "model", NULL};
    int k, w;
    PyObject *classes, *model = Py_None;
    Py_buffer fold;
    Py_ssize_t max_units, max_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiSy*nn|O", kwlist, &k, &w, &classes, &fold, &max_units, &max_bytes,
                                     &model))
        return -1;
    if (model != Py_None && !PyType_Check(model)) {
        PyBuffer_Release(&fold);
        PyErr_SetString(PyExc_TypeError, "model must be a class or None");
        return -1;
    }
    if (k < 1 || w < 1 || fold.len != 256 || PyBytes_GET_SIZE(classes) < 0x80 || max_units < 1 ||
        max_bytes < MAX_KEY || max_bytes > 0x7FFFFFFF) {
        PyBuffer_Release(&fold);
        PyErr_SetString(PyExc_ValueError, "bad Winnower parameters");
        return -1;
    }
    self->k = k;
    self->w = w;
    memcpy(self->fold, fold.buf, 128);
    PyBuffer_Release(&fold);
    Py_INCREF(classes);
    Py_XSETREF(self->classes_obj, classes);
    self->classes = (const uint8_t *)PyBytes_AS_STRING(classes);
    self->table_end = PyBytes_GET_SIZE(classes);
    Py_XSETREF(self->model, model == Py_None ? NULL : Py_NewRef(model));
    self->max_units = (size_t)max_units;
    self->max_arena = (size_t)max_bytes;
    if (!self->table) {
        self->cap = 1024;
        self->table = PyMem_Calloc(self->cap, sizeof(Entry));
        if (!self->table) {
            PyErr_NoMemory();
            return -1;
        }
    }
    cache_clear(self);
    return 0;
}

static void Winnower_dealloc(Winnower *self) {
    Py_XDECREF(self->classes_obj);
    Py_XDECREF(self->model);
    PyMem_Free(self->table);
    PyMem_Free(self->arena);
    PyMem_Free(self->cp_hash);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Winnower_methods[] = {
    {"hashes", (PyCFunction)(void (*)(void))Winnower_hashes, METH_FASTCALL,
     "hashes(text, hash_fn) -> bytearray of the unit hashes (native uint64)"},
    {"fingerprint", (PyCFunction)(void (*)(void))Winnower_fingerprint, METH_FASTCALL,
     "fingerprint(text, hash_fn) -> the model (TextFingerprint), or (selected hashes, units) without one"},
    {"kgrams", (PyCFunction)Winnower_kgrams, METH_O, "kgrams(unit_hashes) -> bytearray of the k-gram hashes"},
    {"clear", (PyCFunction)Winnower_clear, METH_NOARGS, "forget the cached unit hashes of words"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Winnower_getset[] = {
    {"cached", (getter)Winnower_get_cached, NULL, "words whose keyed hash is cached", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WinnowerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "detectors._winnow.Winnower",
    .tp_basicsize = sizeof(Winnower),
    .tp_dealloc = (destructor)Winnower_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Winnower(k, w, classes, fold, max_units, max_bytes): the native winnow-v2 hot loop",
    .tp_methods = Winnower_methods,
    .tp_getset = Winnower_getset,
    .tp_init = (initproc)Winnower_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef winnow_module = {
    PyModuleDef_HEAD_INIT, "_winnow", "Native hot loop of keyed winnowing (optional; the pure path is the reference).",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__winnow(void) {
    if (PyType_Ready(&WinnowerType) < 0) return NULL;
    if (!(s_dict = PyUnicode_InternFromString("__dict__")) ||
        !(s_fields_set = PyUnicode_InternFromString("__pydantic_fields_set__")) ||
        !(s_extra = PyUnicode_InternFromString("__pydantic_extra__")) ||
        !(s_private = PyUnicode_InternFromString("__pydantic_private__")) ||
        !(s_hashes = PyUnicode_InternFromString("hashes")) || !(s_words = PyUnicode_InternFromString("words")) ||
        !(empty_tuple = PyTuple_New(0)))
        return NULL;
    PyObject *m = PyModule_Create(&winnow_module);
    if (!m) return NULL;
    Py_INCREF(&WinnowerType);
    if (PyModule_AddObject(m, "Winnower", (PyObject *)&WinnowerType) < 0) {
        Py_DECREF(&WinnowerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
