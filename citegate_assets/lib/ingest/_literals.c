/* A python_repr prompt decoded in one pass when it is what repr() writes: lib/ingest/containers.py's fast path.
 *
 * string_literal(text) -> str | None
 *   text: the prompt, stripped. Its value when it is one string literal quoted with ' or " (not triple-quoted, no
 *   prefix) whose every backslash starts one of the escapes repr() writes (\\ \' \" \n \r \t \xhh \uhhhh
 *   \Uhhhhhhhh) and which holds no raw line break, NUL or lone surrogate; None for anything else, which
 *   ast.literal_eval then decides (and words the reject of). The value is the one literal_eval gives:
 *   tests/test_containers.py holds the two equal on arbitrary text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int hex_value(Py_UCS4 c) {
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* The code point of the `digits` hex digits at data[at], or -1 when they are not all there or not all hex. */
static long hex_escape(int kind, const void *data, Py_ssize_t at, Py_ssize_t end, int digits) {
    if (at + digits > end)
        return -1;
    long value = 0;
    for (int k = 0; k < digits; k++) {
        int h = hex_value(PyUnicode_READ(kind, data, at + k));
        if (h < 0)
            return -1;
        value = value * 16 + h;
    }
    return value;
}

static PyObject *string_literal(PyObject *Py_UNUSED(self), PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "string_literal: a str expected");
        return NULL;
    }
    if (PyUnicode_READY(arg) < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    if (n < 2)
        Py_RETURN_NONE;
    Py_UCS4 quote = PyUnicode_READ(kind, data, 0);
    if ((quote != '\'' && quote != '"') || PyUnicode_READ(kind, data, n - 1) != quote)
        Py_RETURN_NONE;
    if (n > 2 && PyUnicode_READ(kind, data, 1) == quote)
        Py_RETURN_NONE; /* '' followed by more: a triple quote, or two literals */
    Py_ssize_t end = n - 1; /* the body is [1, end) */
    Py_UCS4 *out = PyMem_Malloc((size_t)(end > 1 ? end - 1 : 1) * sizeof(Py_UCS4));
    if (out == NULL)
        return PyErr_NoMemory();
    Py_ssize_t w = 0;
    int plain = 1; /* no escape: the value is the body as it is */
    for (Py_ssize_t i = 1; i < end;) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == quote || c == '\n' || c == '\r' || c == 0 || (c >= 0xD800 && c <= 0xDFFF))
            goto not_plain_repr;
        if (c != '\\') {
            out[w++] = c;
            i++;
            continue;
        }
        plain = 0;
        if (i + 1 >= end) /* it escapes the closing quote */
            goto not_plain_repr;
        Py_UCS4 e = PyUnicode_READ(kind, data, i + 1);
        long value;
        switch (e) {
        case '\\': case '\'': case '"':
            out[w++] = e;
            i += 2;
            continue;
        case 'n':
            out[w++] = '\n';
            i += 2;
            continue;
        case 'r':
            out[w++] = '\r';
            i += 2;
            continue;
        case 't':
            out[w++] = '\t';
            i += 2;
            continue;
        case 'x':
            value = hex_escape(kind, data, i + 2, end, 2);
            i += 4;
            break;
        case 'u':
            value = hex_escape(kind, data, i + 2, end, 4);
            i += 6;
            break;
        case 'U':
            value = hex_escape(kind, data, i + 2, end, 8);
            i += 10;
            break;
        default: /* an escape repr() never writes (octal, \N{...}, \a, a line continuation): literal_eval's */
            goto not_plain_repr;
        }
        if (value < 0 || value > 0x10FFFF)
            goto not_plain_repr;
        out[w++] = (Py_UCS4)value;
    }
    PyObject *result;
    if (plain) {
        result = PyUnicode_Substring(arg, 1, end);
    } else {
        result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, w);
    }
    PyMem_Free(out);
    return result;
not_plain_repr:
    PyMem_Free(out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"string_literal", string_literal, METH_O,
     "string_literal(text) -> str | None: the value of a one-line ' or \" string literal holding only the escapes "
     "repr() writes; None for anything else (ast.literal_eval decides)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_literals", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__literals(void) { return PyModule_Create(&module); }
