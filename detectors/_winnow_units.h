/* The units of a text as str (Winnower.units, detectors/tokens.py `words_of`): the same cut as the unit hashes
 * (detectors/_winnow.c), without hashing. Included by _winnow.c after the Winnower type and its helpers. */
#ifndef WINNOW_UNITS_H
#define WINNOW_UNITS_H

/* The units of a non-ASCII `text` as str, in order: words as written with ASCII folded (format characters
 * removed), and single characters (tokens.Units.raw(): the same spans of the same folded UTF-8). */
/* Append unit `u` (a new reference, stolen) to `out`; `norm` (not NULL): a non-ASCII unit goes in as norm(u). */
static int put_unit(PyObject *out, PyObject *u, PyObject *norm) {
    if (!u) return -1;
    if (norm && !PyUnicode_IS_ASCII(u)) {
        PyObject *n = PyObject_CallOneArg(norm, u);
        Py_DECREF(u);
        if (!n) return -1;
        u = n;
    }
    int rc = PyList_Append(out, u);
    Py_DECREF(u);
    return rc;
}

static int unit_strings(Winnower *self, PyObject *text, PyObject *out, PyObject *norm) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const uint8_t *fold = self->fold, *classes = self->classes;
    Py_UCS4 last = (Py_UCS4)(self->table_end - 1);
    uint8_t local[MAX_KEY + 8];
    size_t wcap = sizeof(local), wlen = 0;
    uint8_t *word = local;
    int rc = -1;
    for (Py_ssize_t i = 0; i <= n; i++) {
        int cls;
        Py_UCS4 c = 0;
        uint8_t f = ' ';
        if (i == n) {
            cls = SEP;
        } else {
            c = PyUnicode_READ(kind, data, i);
            if (c < 0x80) {
                f = fold[c];
                cls = f == ' ' ? SEP : WORD;
            } else {
                cls = classes[c < last ? c : last];
            }
        }
        if (cls == DROP) continue;
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
            if (put_unit(out, PyUnicode_DecodeUTF8((const char *)word, (Py_ssize_t)wlen, "surrogatepass"), norm) < 0)
                goto done;
            wlen = 0;
        }
        if (cls == CHAR && put_unit(out, PyUnicode_FromOrdinal((int)c), norm) < 0) goto done;
    }
    rc = 0;
done:
    if (word != local) PyMem_Free(word);
    return rc;
}

static PyObject *Winnower_units(Winnower *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "units(text: str, normalise=None)");
        return NULL;
    }
    PyObject *norm = nargs == 2 && args[1] != Py_None ? args[1] : NULL;
    PyObject *out = PyList_New(0);
    if (out && unit_strings(self, args[0], out, norm) < 0) Py_CLEAR(out);
    return out;
}

#endif /* WINNOW_UNITS_H */
