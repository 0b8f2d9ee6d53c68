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

#include "_winnow_cache.h"

#define SEP 0
#define WORD 1
#define CHAR 2
#define DROP 3

/* Units longer than this are hashed by the callback each time (rare; keeps the key arena small). */
#define MAX_KEY 256

typedef struct {
    PyObject_HEAD
    int k, w;
    PyObject *classes_obj; /* bytes: the CLASS table (one byte per code point below table_end) */
    const uint8_t *classes;
    Py_ssize_t table_end;
    uint8_t fold[128];
    UnitCache cache; /* words' keyed hashes, bounded (_winnow_cache.h) */
    uint64_t *cp_hash; /* single-character units by code point (0: not computed yet) */
    PyObject *model;   /* the TextFingerprint class, or NULL: fingerprint() then returns a tuple */
} Winnower;

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
    if (!cache_find(&self->cache, key, len, h, &v)) {
        if (call_hash(fn, key, len, &v) < 0) return -1;
        if (cache_add(&self->cache, key, len, h, v) < 0) return -1;
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

#include "_winnow_units.h" /* Winnower.units: the units as str */

#include "_winnow_select.h" /* select_minima: window minima and the selection */

/* The print object: TextFingerprint(hashes, words, positions), a plain slotted dataclass, called as Python would. */
static PyObject *make_model(PyObject *model, PyObject *hashes, PyObject *positions, Py_ssize_t units) {
    PyObject *words = PyLong_FromSsize_t(units);
    if (!words) return NULL;
    PyObject *args[3] = {hashes, words, positions};
    PyObject *obj = PyObject_Vectorcall(model, args, 3, NULL);
    Py_DECREF(words);
    return obj;
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
    PyObject *positions = self->model ? PyList_New(0) : NULL;
    if (self->model && !positions) {
        u64s_free(&u);
        return NULL;
    }
    PyObject *list = select_minima((size_t)self->w, u.v, nkg, positions);
    u64s_free(&u);
    if (!list) {
        Py_XDECREF(positions);
        return NULL;
    }
    PyObject *r;
    if (self->model) {
        r = make_model(self->model, list, positions, (Py_ssize_t)units);
        Py_DECREF(positions);
    } else {
        PyObject *n = PyLong_FromSize_t(units);
        r = n ? PyTuple_Pack(2, list, n) : NULL;
        Py_XDECREF(n);
    }
    Py_DECREF(list);
    return r;
}

#include "_winnow_digest.h" /* prefix_digests */
#include "_winnow_spread.h" /* the commonness record's loops (detectors/commonness.py) */
#include "_winnow_index_type.h" /* the content index's postings (detectors/index.py) */
#include "_winnow_sentences.h"  /* whole-sentence prints (detectors/sentences.py) */
#include "_winnow_table.h"      /* a str's code points in a byte table (detectors/canaries.py) */
#include "_winnow_names.h"      /* a prompt's name-like words (detectors/toolcalls.py) */

static PyMethodDef module_methods[] = {
    {"prefix_digests", prefix_digests, METH_VARARGS,
     "prefix_digests(data, r, a, b) -> polynomial hashes mod 2**61 - 1 of data[:a] and data[:b]"},
    SPREAD_METHODS
    INDEX_METHODS
    TABLE_METHODS
    NAMES_METHODS
    {NULL, NULL, 0, NULL},
};


static PyObject *Winnower_clear(Winnower *self, PyObject *Py_UNUSED(ignored)) {
    cache_clear(&self->cache);
    Py_RETURN_NONE;
}

static PyObject *Winnower_get_cached(Winnower *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSize_t(self->cache.count);
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
    self->cache.max_units = (size_t)max_units;
    self->cache.max_arena = (size_t)max_bytes;
    if (!self->cache.table) {
        self->cache.cap = 1024;
        self->cache.table = PyMem_Calloc(self->cache.cap, sizeof(Entry));
        if (!self->cache.table) {
            PyErr_NoMemory();
            return -1;
        }
    }
    cache_clear(&self->cache);
    return 0;
}

static void Winnower_dealloc(Winnower *self) {
    Py_XDECREF(self->classes_obj);
    Py_XDECREF(self->model);
    PyMem_Free(self->cache.table);
    PyMem_Free(self->cache.arena);
    PyMem_Free(self->cp_hash);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Winnower_methods[] = {
    {"hashes", (PyCFunction)(void (*)(void))Winnower_hashes, METH_FASTCALL,
     "hashes(text, hash_fn) -> bytearray of the unit hashes (native uint64)"},
    {"fingerprint", (PyCFunction)(void (*)(void))Winnower_fingerprint, METH_FASTCALL,
     "fingerprint(text, hash_fn) -> the model (TextFingerprint), or (selected hashes, units) without one"},
    {"kgrams", (PyCFunction)Winnower_kgrams, METH_O, "kgrams(unit_hashes) -> bytearray of the k-gram hashes"},
    {"units", (PyCFunction)(void (*)(void))Winnower_units, METH_FASTCALL,
     "units(text, normalise=None) -> the units as written, ASCII folded (Units.raw); normalise(u) for non-ASCII u"},
    {"sentences", (PyCFunction)(void (*)(void))Winnower_sentences, METH_FASTCALL,
     "sentences(text, hash_fn, start, with_ends) -> (hashes, ends or None, last piece start, hashes before it)"},
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
    if (PyType_Ready(&WinnowerType) < 0 || PyType_Ready(&SelectionType) < 0 || PyType_Ready(&PostingsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&winnow_module);
    if (!m) return NULL;
    Py_INCREF(&WinnowerType);
    if (PyModule_AddObject(m, "Winnower", (PyObject *)&WinnowerType) < 0) {
        Py_DECREF(&WinnowerType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&SelectionType);
    if (PyModule_AddObject(m, "Selection", (PyObject *)&SelectionType) < 0) {
        Py_DECREF(&SelectionType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&PostingsType);
    if (PyModule_AddObject(m, "Postings", (PyObject *)&PostingsType) < 0) {
        Py_DECREF(&PostingsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
