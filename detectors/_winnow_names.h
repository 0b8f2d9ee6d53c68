/* name_words: a prompt's distinct name-like words (detectors/toolcalls.py), in one pass over the str's own storage.
 * A prompt re-sends its whole history every turn, so this runs over most of the text crosstalk reads: a regex took
 * about as long as fingerprinting itself (docs/adr/0019). Pure computation: no I/O, no clock.
 */
#ifndef WINNOW_NAMES_H
#define WINNOW_NAMES_H

#include <Python.h>

static inline int name_char(Py_UCS4 c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static inline int name_sep(Py_UCS4 c) { return c == '_' || c == '-'; }

/* name_words(text, limit) -> set of str, or None past `limit` distinct words. A word is a maximal run of
 * [A-Za-z0-9_-] with the separators at its ends taken off; it is name-like when it starts with a letter, is at most
 * 64 characters long, and holds a separator (snake_case, kebab-case) or a lower-case letter followed by a capital
 * (camelCase). The same rule as toolcalls.name_words_py (property-tested equal). */
static PyObject *name_words(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *text;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "Un", &text, &limit)) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *seen = PySet_New(NULL);
    if (seen == NULL) return NULL;
    while (i < n) {
        if (!name_char(PyUnicode_READ(kind, data, i))) {
            i++;
            continue;
        }
        Py_ssize_t a = i;
        while (i < n && name_char(PyUnicode_READ(kind, data, i))) i++;
        Py_ssize_t b = i;
        while (a < b && name_sep(PyUnicode_READ(kind, data, a))) a++;
        while (b > a && name_sep(PyUnicode_READ(kind, data, b - 1))) b--;
        if (b - a < 2 || b - a > 64) continue;
        Py_UCS4 first = PyUnicode_READ(kind, data, a);
        if (!((first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z'))) continue;
        int like = 0;
        for (Py_ssize_t j = a + 1; j < b && !like; j++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, j), p = PyUnicode_READ(kind, data, j - 1);
            like = name_sep(c) || (p >= 'a' && p <= 'z' && c >= 'A' && c <= 'Z');
        }
        if (!like) continue;
        PyObject *word = PyUnicode_Substring(text, a, b);
        if (word == NULL || PySet_Add(seen, word) < 0) {
            Py_XDECREF(word);
            Py_DECREF(seen);
            return NULL;
        }
        Py_DECREF(word);
        if (PySet_GET_SIZE(seen) > limit) {
            Py_DECREF(seen);
            Py_RETURN_NONE;
        }
    }
    return seen;
}

#define NAMES_METHODS                                                                                                  \
    {"name_words", name_words, METH_VARARGS,                                                                           \
     "name_words(text, limit) -> the distinct name-like words of text (a set), or None past limit of them"},

#endif
