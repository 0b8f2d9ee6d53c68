/* table_find: a str's code points looked up in a byte table over every code point (detectors/canaries.py's folding
 * table), in one pass over the str's own storage: no encoding, no array of code points.
 * Pure computation: no I/O, no clock.
 */
#ifndef WINNOW_TABLE_H
#define WINNOW_TABLE_H

#include <Python.h>

/* table_find(text, table, start) -> (index, value): the first index >= start whose code point's table byte is not 0,
 * and that byte; (-1, 0) when there is none. The table must cover every code point (0x110000 bytes). */
static PyObject *table_find(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *text;
    Py_buffer table;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "Uy*n", &text, &table, &start)) return NULL;
    if (table.len < 0x110000) {
        PyBuffer_Release(&table);
        PyErr_SetString(PyExc_ValueError, "the table must hold a byte for every code point");
        return NULL;
    }
    const uint8_t *t = table.buf;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = start < 0 ? 0 : start;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    uint8_t v = 0;
    switch (kind) { /* one loop per width, so each reads its storage directly */
    case PyUnicode_1BYTE_KIND:
        for (const Py_UCS1 *s = data; i < n && !(v = t[s[i]]); i++) {}
        break;
    case PyUnicode_2BYTE_KIND:
        for (const Py_UCS2 *s = data; i < n && !(v = t[s[i]]); i++) {}
        break;
    default:
        for (const Py_UCS4 *s = data; i < n && !(v = t[s[i] < 0x110000 ? s[i] : 0]); i++) {}
        break;
    }
    PyBuffer_Release(&table);
    if (i >= n) return Py_BuildValue("(ni)", (Py_ssize_t)-1, 0);
    return Py_BuildValue("(ni)", i, (int)v);
}

#define TABLE_METHODS                                                                                                  \
    {"table_find", table_find, METH_VARARGS,                                                                           \
     "table_find(text, table, start) -> (index, value): the first code point at or after start whose table byte is "  \
     "not 0"},

#endif
