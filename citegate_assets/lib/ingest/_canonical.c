/* N's steps 3-5 (look-alike folding, whitespace collapse, trim) on the UTF-8 text of an Arrow string column, in one
 * pass: the compiled form of lib/ingest/normalize.py's canonical step for rows NFC leaves as they are.
 *
 * canonical(data, offsets, suspects, out_data, out_offsets) -> (bytes written, suspect_rows)
 *   data: the column's UTF-8 bytes; offsets: its n + 1 int64 offsets into data (Arrow large_string buffers).
 *   suspects: a bitmap of 0x110000 bits, set for the code points NFC may change (normalize.nfc_suspect_class).
 *   out_data, out_offsets: writable buffers at least as large as data's used bytes and offsets (Arrow's own, so
 *   no Python object ends up inside the column polars takes). The canonical text of every row is written there in
 *   the same layout; the rows that hold a suspect code point are listed and copied unchanged, for the caller to
 *   normalize with NFC on the general path.
 *
 * The tables below are normalize_plain.py's FOLD_FROM/FOLD_TO and WHITESPACE (Unicode White_Space);
 * tests/test_normalize_compiled.py holds this module equal to the general path on arbitrary text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { PLAIN = 0, SPACE = 1, MULTI = 2 };

/* What each byte is when it starts a code point: ASCII White_Space, other ASCII, or a multi-byte lead. */
static unsigned char byte_class[256];

static void init_byte_class(void) {
    for (int b = 0; b < 256; b++) byte_class[b] = b < 0x80 ? PLAIN : MULTI;
    byte_class['\t'] = byte_class['\n'] = byte_class['\v'] = byte_class['\f'] = byte_class['\r'] = SPACE;
    byte_class[' '] = SPACE;
}

static int is_white_space(uint32_t cp) {
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* The ASCII text a look-alike folds to ("" removes it), or NULL when the code point is not folded. White_Space
 * look-alikes (no-break and thin spaces) are not here: whitespace collapse turns them into one space either way. */
static const char *folded(uint32_t cp) {
    switch (cp) {
    case 0x2018: case 0x2019: case 0x201A: case 0x201B: case 0x2032:
        return "'";
    case 0x201C: case 0x201D: case 0x201E: case 0x201F: case 0x2033:
        return "\"";
    case 0x2010: case 0x2011: case 0x2012: case 0x2013: case 0x2014: case 0x2015: case 0x2212:
        return "-";
    case 0x2026:
        return "...";
    case 0x200B: case 0x200C: case 0x200D: case 0x2060: case 0xFEFF: case 0xAD:
        return "";
    default:
        return NULL;
    }
}

static int is_suspect(const unsigned char *bitmap, uint32_t cp) {
    return (bitmap[cp >> 3] >> (cp & 7)) & 1;
}

/* The code point at s, len bytes long (2, 3 or 4, from its lead byte). */
static uint32_t decode(const unsigned char *s, int len) {
    if (len == 2)
        return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    if (len == 3)
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
           (s[3] & 0x3F);
}

/* One row: writes its canonical text at out and returns its length, -1 if it holds a suspect code point, -2 if it
 * is not UTF-8 (a code point past its end or past U+10FFFF). Branch-free on ASCII: every whitespace byte is written
 * as a space and kept only when the byte before it was not one (or when it is not at the start), so a run becomes
 * one space. */
static Py_ssize_t canonical_row(const unsigned char *s, Py_ssize_t n, unsigned char *out, const unsigned char *bitmap) {
    Py_ssize_t i = 0, w = 0;
    int after_space = 1; /* the last byte written is a space, or none is written yet: leading whitespace is trimmed */
    while (i < n) {
        unsigned char b = s[i];
        unsigned char cls = byte_class[b];
        if (cls != MULTI) {
            int space = cls == SPACE;
            out[w] = space ? ' ' : b;
            w += !(space & after_space);
            after_space = space;
            i++;
            continue;
        }
        int len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        if (i + len > n) /* checked before decoding: never read past the row */
            return -2;
        uint32_t cp = decode(s + i, len);
        if (cp > 0x10FFFF) /* not UTF-8, and past the bitmap */
            return -2;
        i += len;
        if (is_suspect(bitmap, cp))
            return -1;
        if (is_white_space(cp)) {
            out[w] = ' ';
            w += !after_space;
            after_space = 1;
            continue;
        }
        const char *fold = folded(cp);
        if (fold == NULL) {
            memcpy(out + w, s + i - len, (size_t)len);
            w += len;
        } else { /* "" removes it: the whitespace around it stays one run */
            size_t k = strlen(fold);
            if (k == 0)
                continue;
            memcpy(out + w, fold, k);
            w += (Py_ssize_t)k;
        }
        after_space = 0;
    }
    if (w > 0 && out[w - 1] == ' ') /* only whitespace writes a space: the trailing run is trimmed */
        w--;
    return w;
}

static PyObject *canonical(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer data, offsets, suspects, out_data, out_offsets;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &data, &offsets, &suspects, &out_data, &out_offsets))
        return NULL;
    PyObject *result = NULL, *suspect_rows = NULL;
    unsigned char *is_suspect_row = NULL;
    if (offsets.len % 8 != 0 || offsets.len < 8) {
        PyErr_SetString(PyExc_ValueError, "offsets: n + 1 int64 values expected");
        goto done;
    }
    if (suspects.len != 0x110000 / 8) {
        PyErr_SetString(PyExc_ValueError, "suspects: a bitmap of 0x110000 bits expected");
        goto done;
    }
    Py_ssize_t rows = offsets.len / 8 - 1;
    const int64_t *off = (const int64_t *)offsets.buf;
    const unsigned char *text = (const unsigned char *)data.buf;
    const unsigned char *bitmap = (const unsigned char *)suspects.buf;
    int64_t base = off[0];
    if (base < 0 || off[rows] < base || off[rows] > data.len) {
        PyErr_SetString(PyExc_ValueError, "offsets outside the data buffer");
        goto done;
    }
    /* canonical text is never longer than its input: every fold and collapse shortens or keeps it */
    if (out_data.len < off[rows] - base || out_offsets.len < offsets.len) {
        PyErr_SetString(PyExc_ValueError, "output buffers smaller than the input's");
        goto done;
    }
    suspect_rows = PyList_New(0);
    is_suspect_row = PyMem_Calloc((size_t)rows + 1, 1);
    if (suspect_rows == NULL || is_suspect_row == NULL) {
        if (is_suspect_row == NULL)
            PyErr_NoMemory();
        goto done;
    }
    unsigned char *out = (unsigned char *)out_data.buf;
    int64_t *out_off = (int64_t *)out_offsets.buf;
    int64_t w = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    out_off[0] = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        int64_t start = off[r], end = off[r + 1];
        if (end < start || end > off[rows] || start < base) {
            bad = 1;
            break;
        }
        Py_ssize_t got = canonical_row(text + start, (Py_ssize_t)(end - start), out + w, bitmap);
        if (got == -2) {
            bad = 2;
            break;
        }
        if (got == -1) { /* the caller normalizes it: its text as it is */
            memcpy(out + w, text + start, (size_t)(end - start));
            got = (Py_ssize_t)(end - start);
            is_suspect_row[r] = 1;
        }
        w += got;
        out_off[r + 1] = w;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad == 1 ? "offsets not increasing"
                                                   : "a row is not UTF-8: it ends inside a code point or holds one "
                                                     "past U+10FFFF");
        goto done;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        if (!is_suspect_row[r])
            continue;
        PyObject *at = PyLong_FromSsize_t(r);
        if (at == NULL || PyList_Append(suspect_rows, at) < 0) {
            Py_XDECREF(at);
            goto done;
        }
        Py_DECREF(at);
    }
    result = Py_BuildValue("(LO)", (long long)w, suspect_rows);
done:
    PyMem_Free(is_suspect_row);
    Py_XDECREF(suspect_rows);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&suspects);
    PyBuffer_Release(&out_data);
    PyBuffer_Release(&out_offsets);
    return result;
}

static PyMethodDef methods[] = {
    {"canonical", canonical, METH_VARARGS,
     "canonical(data, offsets, suspects, out_data, out_offsets) -> (bytes written, suspect_rows): N's folding, "
     "whitespace collapse and trim on Arrow large_string buffers, written into the output buffers; rows with a code "
     "point NFC may change are listed and copied as they are."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_canonical", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__canonical(void) {
    init_byte_class();
    return PyModule_Create(&module);
}
