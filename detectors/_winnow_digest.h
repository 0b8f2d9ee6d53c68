#ifndef WINNOW_DIGEST_H
#define WINNOW_DIGEST_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- prefix digests for session-incremental fingerprinting (detectors/session_prints.py) ----
 * A polynomial hash modulo the Mersenne prime 2**61 - 1 at a secret point r (derived from the fingerprint
 * key), over 7-byte little-endian chunks (< 2**56 < p), the last one zero-padded, then the length:
 *   H(x) = ((c_1 r^(m-1) + ... + c_m) r + len(x)) mod p.
 * Two different texts of at most L chunks collide for at most L + 1 of the p values of r (they are roots of
 * a non-zero polynomial), so an edit nobody can see the key of passes with probability ~1e-13. The caller
 * keys the result once more with blake2b, so a stored digest reveals nothing about the text. Eight chunks a
 * step (powers r^1..r^8): independent multiplications, several GB/s, against ~1 GB/s for SHA-256. */
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
static uint64_t poly_chunks(uint64_t acc, const uint8_t *d, size_t i, size_t end, const uint64_t *rp) {
    uint64_t r = rp[1], r2 = rp[2], r3 = rp[3], r4 = rp[4];
    /* Eight chunks a step: one reduction (the dependency chain) per 56 bytes; the sum of nine products of
     * at most 2**61 * 2**61 stays below 2**126. */
    for (; i + 57 <= end; i += 56) { /* + 57: the last 8-byte load stays inside */
        unsigned __int128 x = (unsigned __int128)acc * rp[8] + (unsigned __int128)load7(d + i) * rp[7] +
                              (unsigned __int128)load7(d + i + 7) * rp[6] +
                              (unsigned __int128)load7(d + i + 14) * rp[5] +
                              (unsigned __int128)load7(d + i + 21) * r4 + (unsigned __int128)load7(d + i + 28) * r3 +
                              (unsigned __int128)load7(d + i + 35) * r2 + (unsigned __int128)load7(d + i + 42) * r +
                              load7(d + i + 49);
        acc = red61(x);
    }
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

/* prefix_digests(data, r, a, b) -> (H(data[:a]), H(data[:b])), one pass, a <= b <= len(data), 0 < r < p.
 * data: bytes-like, or an ASCII str, whose characters are its UTF-8 bytes (read in place: no encoding copy). */
static PyObject *prefix_digests(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer buf;
    PyObject *obj;
    unsigned long long r;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "OKnn", &obj, &r, &a, &b)) return NULL;
    if (PyUnicode_Check(obj)) {
        if (!PyUnicode_IS_ASCII(obj)) {
            PyErr_SetString(PyExc_ValueError, "a str must be ASCII (encode others to UTF-8)");
            return NULL;
        }
        if (PyBuffer_FillInfo(&buf, obj, PyUnicode_DATA(obj), PyUnicode_GET_LENGTH(obj), 1, PyBUF_SIMPLE) < 0)
            return NULL;
    } else if (PyObject_GetBuffer(obj, &buf, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (a < 0 || a > b || b > buf.len || r == 0 || r >= P61) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "need 0 <= a <= b <= len(data) and 0 < r < 2**61 - 1");
        return NULL;
    }
    const uint8_t *d = buf.buf;
    uint64_t rp[9] = {1, r}; /* powers of r */
    for (int j = 2; j < 9; j++) rp[j] = red61((unsigned __int128)rp[j - 1] * r);
    size_t fa = (size_t)a / 7 * 7, fb = (size_t)b / 7 * 7;
    uint64_t acc = poly_chunks(0, d, 0, fa, rp);
    uint64_t ha = poly_final(acc, d, (size_t)a, r);
    acc = poly_chunks(acc, d, fa, fb, rp);
    uint64_t hb = poly_final(acc, d, (size_t)b, r);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)ha, (unsigned long long)hb);
}


#endif
