/* N's steps 3-5 (look-alike folding, whitespace collapse, trim) on the UTF-8 text of a string column, in one pass:
 * the compiled form of lib/ingest/normalize.py's canonical step for rows NFC leaves as they are.
 *
 * canonical_column(stream, suspects) -> (Column, suspect_rows)
 *   stream: a string column as an Arrow C stream capsule (`Series.__arrow_c_stream__()`): string_view chunks (what
 *   polars exports), large_string or string. suspects: a bitmap of 0x110000 bits, set for the code points NFC may
 *   change (normalize.nfc_suspect_class). Column: the canonical text of every row as one large_string array, which
 *   polars takes through the Arrow PyCapsule interface (`Column.__arrow_c_array__`): no pyarrow on either side.
 *   A null stays null. The rows that hold a suspect code point are listed and copied unchanged, for the caller to
 *   normalize with NFC on the general path.
 *
 * The tables below are normalize_plain.py's FOLD_FROM/FOLD_TO and WHITESPACE (Unicode White_Space);
 * tests/test_normalize_compiled.py holds this module equal to the general path on arbitrary text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
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

/* The Arrow C data interface's structures (https://arrow.apache.org/docs/format/CDataInterface.html): an ABI. */
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

#define ARROW_FLAG_NULLABLE 2

enum { STRING_VIEW, LARGE_STRING, STRING };

/* The output column's buffers, freed by its array's release. */
typedef struct {
    unsigned char *validity; /* NULL when no row is null */
    int64_t *offsets;
    unsigned char *data;
    const void *buffers[3];
} OutBuffers;

static void release_out_array(struct ArrowArray *array) {
    OutBuffers *out = (OutBuffers *)array->private_data;
    if (out != NULL) {
        free(out->validity);
        free(out->offsets);
        free(out->data);
        free(out);
    }
    array->release = NULL;
}

static void release_out_schema(struct ArrowSchema *schema) { schema->release = NULL; }

/* A row's bytes in a chunk, at index i (the chunk's offset applied). */
static void row_bytes(const struct ArrowArray *chunk, int kind, int64_t i, const unsigned char **ptr, int64_t *len) {
    if (kind == STRING_VIEW) {
        const unsigned char *view = (const unsigned char *)chunk->buffers[1] + i * 16;
        int32_t n, buffer, at;
        memcpy(&n, view, 4);
        *len = n;
        if (n <= 12) {
            *ptr = view + 4;
        } else {
            memcpy(&buffer, view + 8, 4);
            memcpy(&at, view + 12, 4);
            *ptr = (const unsigned char *)chunk->buffers[2 + buffer] + at;
        }
    } else if (kind == LARGE_STRING) {
        const int64_t *off = (const int64_t *)chunk->buffers[1];
        *ptr = (const unsigned char *)chunk->buffers[2] + off[i];
        *len = off[i + 1] - off[i];
    } else {
        const int32_t *off = (const int32_t *)chunk->buffers[1];
        *ptr = (const unsigned char *)chunk->buffers[2] + off[i];
        *len = (int64_t)off[i + 1] - off[i];
    }
}

/* The column being built: its buffers grow as chunks arrive. */
typedef struct {
    OutBuffers *out;
    int64_t rows, capacity_rows, written, capacity_bytes, null_count;
} Builder;

static int builder_reserve(Builder *b, int64_t rows, int64_t bytes) {
    if (b->out->offsets == NULL || b->rows + rows > b->capacity_rows) {
        int64_t want = (b->rows + rows) * 2 + 8;
        int64_t *offsets = realloc(b->out->offsets, (size_t)(want + 1) * sizeof(int64_t));
        if (offsets == NULL)
            return -1;
        b->out->offsets = offsets;
        if (b->out->validity != NULL) {
            unsigned char *validity = realloc(b->out->validity, (size_t)(want + 7) / 8);
            if (validity == NULL)
                return -1;
            memset(validity + (b->capacity_rows + 7) / 8, 0, (size_t)((want + 7) / 8 - (b->capacity_rows + 7) / 8));
            b->out->validity = validity;
        }
        b->capacity_rows = want;
    }
    if (b->out->data == NULL || b->written + bytes > b->capacity_bytes) {
        int64_t want = (b->written + bytes) * 2 + 64;
        unsigned char *data = realloc(b->out->data, (size_t)want);
        if (data == NULL)
            return -1;
        b->out->data = data;
        b->capacity_bytes = want;
    }
    return 0;
}

/* The first null: every row before it is valid. */
static int builder_first_null(Builder *b) {
    size_t size = (size_t)(b->capacity_rows + 7) / 8;
    b->out->validity = malloc(size ? size : 1);
    if (b->out->validity == NULL)
        return -1;
    memset(b->out->validity, 0, size);
    for (int64_t r = 0; r < b->rows; r++)
        b->out->validity[r >> 3] |= (unsigned char)(1 << (r & 7));
    return 0;
}

/* One chunk's rows appended, canonical (the GIL released: nothing here touches Python). Returns 0, or -2 for a row
 * that is not UTF-8; marks suspect rows in is_suspect (indexed by output row). */
static int append_chunk(Builder *b, const struct ArrowArray *chunk, int kind, const unsigned char *bitmap,
                        unsigned char *is_suspect_row) {
    const unsigned char *validity = chunk->null_count != 0 ? (const unsigned char *)chunk->buffers[0] : NULL;
    unsigned char *out = b->out->data;
    int64_t *out_off = b->out->offsets;
    for (int64_t k = 0; k < chunk->length; k++) {
        int64_t i = chunk->offset + k, r = b->rows;
        if (validity != NULL && !((validity[i >> 3] >> (i & 7)) & 1)) {
            out_off[r + 1] = b->written;
            b->null_count++;
            b->rows++;
            continue;
        }
        const unsigned char *s;
        int64_t n;
        row_bytes(chunk, kind, i, &s, &n);
        Py_ssize_t got = canonical_row(s, (Py_ssize_t)n, out + b->written, bitmap);
        if (got == -2)
            return -2;
        if (got == -1) { /* the caller normalizes it: its text as it is */
            memcpy(out + b->written, s, (size_t)n);
            got = (Py_ssize_t)n;
            is_suspect_row[r] = 1;
        }
        if (b->out->validity != NULL)
            b->out->validity[r >> 3] |= (unsigned char)(1 << (r & 7));
        b->written += got;
        out_off[r + 1] = b->written;
        b->rows++;
    }
    return 0;
}

/* The bytes a chunk's valid rows hold (canonical text is never longer than its input). */
static int64_t chunk_bytes(const struct ArrowArray *chunk, int kind) {
    const unsigned char *validity = chunk->null_count != 0 ? (const unsigned char *)chunk->buffers[0] : NULL;
    int64_t total = 0;
    for (int64_t k = 0; k < chunk->length; k++) {
        int64_t i = chunk->offset + k;
        if (validity != NULL && !((validity[i >> 3] >> (i & 7)) & 1))
            continue; /* a null's view or offsets may hold anything */
        const unsigned char *s;
        int64_t n;
        row_bytes(chunk, kind, i, &s, &n);
        if (n < 0)
            return -1;
        total += n;
    }
    return total;
}

static int chunk_has_nulls(const struct ArrowArray *chunk) {
    return chunk->null_count != 0 && chunk->buffers[0] != NULL;
}

/* Column: the canonical text as an Arrow array polars imports through __arrow_c_array__ (once). */
typedef struct {
    PyObject_HEAD struct ArrowSchema schema;
    struct ArrowArray array;
} Column;

static void Column_dealloc(Column *self) {
    if (self->array.release != NULL)
        self->array.release(&self->array);
    if (self->schema.release != NULL)
        self->schema.release(&self->schema);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void schema_capsule_free(PyObject *capsule) {
    struct ArrowSchema *schema = PyCapsule_GetPointer(capsule, "arrow_schema");
    if (schema != NULL) {
        if (schema->release != NULL)
            schema->release(schema);
        free(schema);
    }
}

static void array_capsule_free(PyObject *capsule) {
    struct ArrowArray *array = PyCapsule_GetPointer(capsule, "arrow_array");
    if (array != NULL) {
        if (array->release != NULL)
            array->release(array);
        free(array);
    }
}

static PyObject *Column_arrow_c_array(Column *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"requested_schema", NULL};
    PyObject *requested = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", keywords, &requested))
        return NULL;
    if (self->array.release == NULL) {
        PyErr_SetString(PyExc_ValueError, "this column was already taken");
        return NULL;
    }
    struct ArrowSchema *schema = malloc(sizeof *schema);
    struct ArrowArray *array = malloc(sizeof *array);
    if (schema == NULL || array == NULL) {
        free(schema);
        free(array);
        return PyErr_NoMemory();
    }
    /* moved into the capsules: whoever imports them owns the buffers now */
    *schema = self->schema;
    *array = self->array;
    self->schema.release = NULL;
    self->array.release = NULL;
    PyObject *schema_capsule = PyCapsule_New(schema, "arrow_schema", schema_capsule_free);
    if (schema_capsule == NULL) {
        schema->release(schema);
        free(schema);
        array->release(array);
        free(array);
        return NULL;
    }
    PyObject *array_capsule = PyCapsule_New(array, "arrow_array", array_capsule_free);
    if (array_capsule == NULL) {
        Py_DECREF(schema_capsule);
        array->release(array);
        free(array);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, schema_capsule, array_capsule);
    Py_DECREF(schema_capsule);
    Py_DECREF(array_capsule);
    return pair;
}

static PyMethodDef Column_methods[] = {
    {"__arrow_c_array__", (PyCFunction)(void (*)(void))Column_arrow_c_array, METH_VARARGS | METH_KEYWORDS,
     "The column as (schema, array) Arrow PyCapsules; it can be taken once."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "citegate_assets.lib.ingest._canonical.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = (destructor)Column_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A canonical text column, taken by polars through the Arrow PyCapsule interface.",
    .tp_methods = Column_methods,
};

static int stream_error(struct ArrowArrayStream *stream, const char *what) {
    const char *why = stream->get_last_error ? stream->get_last_error(stream) : NULL;
    PyErr_Format(PyExc_ValueError, "%s: %s", what, why ? why : "the stream gave no reason");
    return -1;
}

static PyObject *canonical_column(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *capsule;
    Py_buffer suspects;
    if (!PyArg_ParseTuple(args, "Oy*", &capsule, &suspects))
        return NULL;
    PyObject *result = NULL, *suspect_rows = NULL;
    unsigned char *is_suspect_row = NULL;
    struct ArrowSchema schema = {0};
    struct ArrowArray chunk = {0};
    Builder b = {0};
    Column *column = NULL;
    if (!PyCapsule_IsValid(capsule, "arrow_array_stream")) {
        PyErr_SetString(PyExc_TypeError, "stream: an Arrow C stream capsule (arrow_array_stream) expected");
        goto done;
    }
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (suspects.len != 0x110000 / 8) {
        PyErr_SetString(PyExc_ValueError, "suspects: a bitmap of 0x110000 bits expected");
        goto done;
    }
    const unsigned char *bitmap = (const unsigned char *)suspects.buf;
    if (stream->get_schema(stream, &schema) != 0) {
        stream_error(stream, "cannot read the column's schema");
        goto done;
    }
    int kind = strcmp(schema.format, "vu") == 0  ? STRING_VIEW
               : strcmp(schema.format, "U") == 0 ? LARGE_STRING
               : strcmp(schema.format, "u") == 0 ? STRING
                                                 : -1;
    if (kind < 0) {
        PyErr_Format(PyExc_ValueError, "a string column expected, not Arrow format %s", schema.format);
        goto done;
    }
    b.out = calloc(1, sizeof(OutBuffers));
    if (b.out == NULL || builder_reserve(&b, 0, 0) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    b.out->offsets[0] = 0;
    int64_t suspect_capacity = 0;
    while (1) {
        if (stream->get_next(stream, &chunk) != 0) {
            stream_error(stream, "cannot read the column's next chunk");
            goto done;
        }
        if (chunk.release == NULL)
            break; /* the end of the stream */
        if (chunk.n_buffers < (kind == STRING_VIEW ? 2 : 3)) {
            PyErr_SetString(PyExc_ValueError, "a string chunk with too few buffers");
            goto done;
        }
        int64_t bytes = chunk_bytes(&chunk, kind);
        if (bytes < 0) {
            PyErr_SetString(PyExc_ValueError, "a string chunk with a negative length");
            goto done;
        }
        if (builder_reserve(&b, chunk.length, bytes) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (chunk_has_nulls(&chunk) && b.out->validity == NULL && builder_first_null(&b) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (b.rows + chunk.length > suspect_capacity) {
            int64_t want = b.capacity_rows;
            unsigned char *grown = realloc(is_suspect_row, (size_t)want + 1);
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            memset(grown + suspect_capacity, 0, (size_t)(want + 1 - suspect_capacity));
            is_suspect_row = grown;
            suspect_capacity = want;
        }
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = append_chunk(&b, &chunk, kind, bitmap, is_suspect_row);
        Py_END_ALLOW_THREADS
        chunk.release(&chunk);
        if (status == -2) {
            PyErr_SetString(PyExc_ValueError,
                            "a row is not UTF-8: it ends inside a code point or holds one past U+10FFFF");
            goto done;
        }
    }
    suspect_rows = PyList_New(0);
    if (suspect_rows == NULL)
        goto done;
    for (int64_t r = 0; r < b.rows; r++) {
        if (!is_suspect_row[r])
            continue;
        PyObject *at = PyLong_FromLongLong(r);
        if (at == NULL || PyList_Append(suspect_rows, at) < 0) {
            Py_XDECREF(at);
            goto done;
        }
        Py_DECREF(at);
    }
    column = PyObject_New(Column, &ColumnType);
    if (column == NULL)
        goto done;
    b.out->buffers[0] = b.out->validity;
    b.out->buffers[1] = b.out->offsets;
    b.out->buffers[2] = b.out->data;
    column->array = (struct ArrowArray){
        .length = b.rows,
        .null_count = b.null_count,
        .offset = 0,
        .n_buffers = 3,
        .n_children = 0,
        .buffers = b.out->buffers,
        .release = release_out_array,
        .private_data = b.out,
    };
    column->schema = (struct ArrowSchema){
        .format = "U",
        .name = "",
        .flags = ARROW_FLAG_NULLABLE,
        .release = release_out_schema,
    };
    b.out = NULL; /* the column owns the buffers */
    result = Py_BuildValue("(OO)", (PyObject *)column, suspect_rows);
done:
    if (chunk.release != NULL)
        chunk.release(&chunk);
    if (schema.release != NULL)
        schema.release(&schema);
    if (b.out != NULL) {
        struct ArrowArray unused = {.private_data = b.out};
        release_out_array(&unused);
    }
    Py_XDECREF(column);
    free(is_suspect_row);
    Py_XDECREF(suspect_rows);
    PyBuffer_Release(&suspects);
    return result;
}

static PyMethodDef methods[] = {
    {"canonical_column", canonical_column, METH_VARARGS,
     "canonical_column(stream, suspects) -> (Column, suspect_rows): N's folding, whitespace collapse and trim on a "
     "string column given as an Arrow C stream capsule; rows with a code point NFC may change are listed and copied "
     "as they are."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_canonical", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__canonical(void) {
    init_byte_class();
    if (PyType_Ready(&ColumnType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ColumnType);
    if (PyModule_AddObject(m, "Column", (PyObject *)&ColumnType) < 0) {
        Py_DECREF(&ColumnType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
