/* Whole-sentence prints (detectors/sentences.py), in one pass over the str's code points.
 *
 * Pieces are cut after `.`, `!` or `?` followed by white space, a non-ASCII character or the end; after the CJK
 * stops 。．｡！？; and at a line break (dropped), except where a hard-wrapped sentence goes on: a line that ends in
 * no stop and a next line that starts, after spaces or tabs, with a lowercase letter. A piece is a sentence proper
 * when a stop ended it, or when the last character before its line break or end that is no white space, closing
 * quote or bracket (format characters vanish, as in units) is a stop. Its hash mixes the keyed hashes of its units
 * (the fingerprints' own units, so no second keyed hash is needed); a piece without units is skipped. The pure path in
 * detectors/sentences.py is the reference (property-tested).
 */

#define SENT_MAX 2048
#define SENT_MUL 0x9E3779B97F4A7C15ULL

static inline uint64_t sent_final(uint64_t h, uint64_t n) {
    uint64_t f = h ^ (n * 0xC2B2AE3D27D4EB4FULL);
    f ^= f >> 33;
    f *= 0xFF51AFD7ED558CCDULL;
    f ^= f >> 33;
    return f ? f : 1;
}

static inline int sent_stop_ascii(Py_UCS4 c) { return c == '.' || c == '!' || c == '?'; }
static inline int sent_stop_cjk(Py_UCS4 c) {
    return c == 0x3002 || c == 0xFF0E || c == 0xFF61 || c == 0xFF01 || c == 0xFF1F;
}
/* Whether the line after a line break at j - 1 starts (past spaces and tabs) with a lowercase letter; also when the
 * text ends first: the end closes the piece as the cut would, and a session's next turn, which resumes at the last
 * piece's start, decides it. */
static inline int sent_wrapped(int kind, const void *data, Py_ssize_t j, Py_ssize_t n) {
    for (; j < n; j++) {
        Py_UCS4 d = PyUnicode_READ(kind, data, j);
        if (d != ' ' && d != '\t') return Py_UNICODE_ISLOWER(d);
    }
    return 1;
}
static inline int sent_closer(Py_UCS4 c) {
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == 0x201D || c == 0x2019 || c == 0xBB ||
           c == 0x300D || c == 0x300F || c == 0xFF09 || c == 0x3011;
}

typedef struct {
    uint64_t h, n;     /* the open piece: mixed unit hashes, units */
    uint64_t total;    /* units so far */
    Py_ssize_t count;  /* hashes listed */
    PyObject *hashes, *ends; /* ends NULL: a source's print (sentences proper only) */
} SentAcc;

static int sent_unit(SentAcc *a, uint64_t v) {
    a->h = a->h * SENT_MUL + v;
    a->n++;
    a->total++;
    return 0;
}

/* Close the open piece; returns -1 on error. */
static int sent_close(SentAcc *a, int proper) {
    if (a->n) {
        if (a->ends || proper) {
            PyObject *h = PyLong_FromUnsignedLongLong(proper ? sent_final(a->h, a->n) : 0);
            if (!h || PyList_Append(a->hashes, h) < 0) {
                Py_XDECREF(h);
                return -1;
            }
            Py_DECREF(h);
            if (a->ends) {
                PyObject *e = PyLong_FromUnsignedLongLong(a->total);
                if (!e || PyList_Append(a->ends, e) < 0) {
                    Py_XDECREF(e);
                    return -1;
                }
                Py_DECREF(e);
            }
            a->count++;
        }
    }
    a->h = 0;
    a->n = 0;
    return 0;
}

/* The last unit pushed by word_unit/char_unit into `tmp`, mixed into the piece. */
static inline void sent_take(SentAcc *a, U64s *tmp) {
    sent_unit(a, tmp->v[tmp->n - 1]);
    tmp->n = 0;
}

/* sentences(text, hash_fn, start, with_ends) -> (hashes, ends or None, last piece start, hashes before it) */
static PyObject *Winnower_sentences(Winnower *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "sentences(text, hash_fn, start, with_ends)");
        return NULL;
    }
    PyObject *text = args[0], *fn = args[1];
    if (check_args(text, fn) < 0) return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    int with_ends = PyObject_IsTrue(args[3]);
    if (with_ends < 0) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (start < 0 || start > n) {
        PyErr_SetString(PyExc_ValueError, "start outside the text");
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const uint8_t *fold = self->fold, *classes = self->classes;
    Py_UCS4 lastcp = (Py_UCS4)(self->table_end - 1);
    SentAcc a = {0, 0, 0, 0, PyList_New(0), NULL};
    U64s tmp;
    u64s_init(&tmp);
    uint8_t local[MAX_KEY + 8];
    size_t wcap = sizeof(local), wlen = 0;
    uint8_t *word = local;
    PyObject *result = NULL;
    if (!a.hashes) goto done;
    if (with_ends && !(a.ends = PyList_New(0))) goto done;
    Py_ssize_t piece = start, last_start = start, before = 0;
    int pending = 0;       /* an ASCII stop was the last character: the next one decides the cut */
    Py_UCS4 last_sig = 0;  /* the piece's last character that is no white space, closer or format character */
    for (Py_ssize_t i = start; i <= n; i++) {
        if (a.count >= SENT_MAX) {
            last_start = piece;
            before = a.count;
            goto full;
        }
        if (i == n) {
            if (wlen) {
                if (word_unit(self, fn, word, wlen, &tmp) < 0) goto done;
                sent_take(&a, &tmp);
                wlen = 0;
            }
            if (pending) {
                if (sent_close(&a, 1) < 0) goto done;
                piece = n;
                last_sig = 0;
            }
            break;
        }
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (pending && !(c < 0x80 && sent_closer(c))) { /* `."` `.)`: the character after the closer decides */
            pending = 0;
            if (c >= 0x80 || Py_UNICODE_ISSPACE(c)) {
                if (sent_close(&a, 1) < 0) goto done;
                piece = i;
                last_sig = 0;
            }
        }
        int cls;
        uint8_t f = ' ';
        if (c < 0x80) {
            f = fold[c];
            cls = f == ' ' ? SEP : WORD;
        } else {
            cls = classes[c < lastcp ? c : lastcp];
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
            last_sig = c;
            continue;
        }
        if (wlen) {
            if (word_unit(self, fn, word, wlen, &tmp) < 0) goto done;
            sent_take(&a, &tmp);
            wlen = 0;
        }
        if (cls == CHAR) {
            if (char_unit(self, fn, c, &tmp) < 0) goto done;
            sent_take(&a, &tmp);
            last_sig = c;
            continue;
        }
        if (c == '\n') {
            int stop = sent_stop_ascii(last_sig) || sent_stop_cjk(last_sig);
            if (last_sig && !stop && sent_wrapped(kind, data, i + 1, n)) continue; /* a wrapped sentence goes on */
            if (sent_close(&a, stop) < 0) goto done;
            piece = i + 1;
            last_sig = 0;
        } else if (sent_stop_cjk(c)) {
            if (sent_close(&a, 1) < 0) goto done;
            piece = i + 1;
            last_sig = 0;
        } else if (sent_stop_ascii(c)) {
            last_sig = c;
            pending = 1;
        } else if (!Py_UNICODE_ISSPACE(c) && !sent_closer(c)) {
            last_sig = c;
        }
    }
    last_start = piece;
    before = a.count;
    if (sent_close(&a, sent_stop_ascii(last_sig) || sent_stop_cjk(last_sig)) < 0) goto done;
full:
    result = Py_BuildValue("(OOnn)", a.hashes, a.ends ? a.ends : Py_None, last_start, before);
done:
    if (word != local) PyMem_Free(word);
    u64s_free(&tmp);
    Py_XDECREF(a.hashes);
    Py_XDECREF(a.ends);
    return result;
}
