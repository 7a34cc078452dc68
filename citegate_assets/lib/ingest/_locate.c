/* The content locator of lib/ingest/locate.py in one compiled pass: its fast path.
 *
 * configure(min_prefix, probe, max_gap, hint_window, id_window, call_chars, max_openings, compare_block, head,
 *           head_tries, position_hint, Region)
 *   locate.py's constants, hint pattern and Region type, set once as it imports this module (written in one place).
 * locate(prompt, chunks, lo, hi, budget)
 *     -> (regions, chunk_chars, arrived_chars, truncated, positions, spent, over_budget)
 *   What locate.py's _locate finds, step for step: the same searches (CPython's own str.find and startswith), the same
 *   work charged in the same order, so the same stop at the budget, and the same position hints (its pattern, called).
 *   regions: Region tuples in prompt order; over_budget: regions, arrived_chars, truncated and positions are None.
 *   tests/test_locate_compiled.py holds it equal to the Python path on arbitrary prompts.
 * find(prompt, text, at, hi) -> int
 *   locate.find_text without work (a raw span's search, lib/ingest/retrievals.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static Py_ssize_t MIN_PREFIX = 40, PROBE = 24, MAX_GAP = 400, HINT_WINDOW = 120, ID_WINDOW = 200, CALL_CHARS = 32,
                  MAX_OPENINGS = 16, COMPARE_BLOCK = 64, HEAD = 64, HEAD_TRIES = 8;
static int configured = 0;
static PyObject *HINT_PATTERN = NULL; /* locate._POSITION_HINT */
static PyTypeObject *REGION = NULL;   /* locate.Region, a NamedTuple */

#define STOP (-2) /* a search stopped: over the budget, or a Python error is set (PyErr_Occurred tells which) */

typedef struct {
    Py_ssize_t *starts, *ends;
    Py_ssize_t n, cap;
} Claimed;

typedef struct {
    PyObject *prompt;
    int kind;
    const void *data;
    Py_ssize_t lo, hi, budget, spent;
    Claimed claimed;
} Search;

typedef struct {
    Py_ssize_t start, end, cfrom, cto;
} Piece;

typedef struct {
    Piece *items;
    Py_ssize_t n, cap;
} Pieces;

typedef struct {
    PyObject *chunk_id; /* borrowed from chunks */
    Py_ssize_t start, end, cfrom, cto;
    int how;
    Py_ssize_t seq; /* the order it was found in: ties of (start, end) keep it, as Python's stable sort does */
} Found;

typedef struct {
    Found *items;
    Py_ssize_t n, cap;
} Regions;

static const char *HOW[] = {"whole", "prefix", "piece"};
static PyObject *HOW_STR[3]; /* the same, interned once */
enum { WHOLE, PREFIX, PIECE };

static int grow(void **items, Py_ssize_t *cap, Py_ssize_t want, size_t size) {
    if (want <= *cap)
        return 0;
    Py_ssize_t cap2 = *cap ? *cap * 2 : 8;
    while (cap2 < want)
        cap2 *= 2;
    void *p = PyMem_Realloc(*items, (size_t)cap2 * size);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = p;
    *cap = cap2;
    return 0;
}

/* _Work.charge: 0, or STOP past the budget */
static int charge(Search *s, Py_ssize_t chars, Py_ssize_t calls) {
    s->spent += chars + calls * CALL_CHARS;
    return s->spent > s->budget ? STOP : 0;
}

static Py_ssize_t pos0(Py_ssize_t v) { return v > 0 ? v : 0; }

/* bisect.bisect_left / bisect_right on a sorted array */
static Py_ssize_t bisect_left(const Py_ssize_t *a, Py_ssize_t n, Py_ssize_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static Py_ssize_t bisect_right(const Py_ssize_t *a, Py_ssize_t n, Py_ssize_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < a[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* _Claimed.add */
static int claimed_add(Claimed *c, Py_ssize_t start, Py_ssize_t end) {
    if (start >= end)
        return 0;
    Py_ssize_t i = bisect_left(c->ends, c->n, start), j = bisect_right(c->starts, c->n, end);
    if (j < i)
        j = i; /* a list's slice [i:j] with j < i is empty at i */
    if (i < j) {
        if (c->starts[i] < start)
            start = c->starts[i];
        if (c->ends[j - 1] > end)
            end = c->ends[j - 1];
    }
    Py_ssize_t n2 = c->n - (j - i) + 1;
    if (n2 > c->cap) {
        Py_ssize_t cap2 = c->cap ? c->cap * 2 : 16;
        Py_ssize_t *starts = PyMem_Realloc(c->starts, (size_t)cap2 * sizeof(Py_ssize_t));
        if (starts == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->starts = starts;
        Py_ssize_t *ends = PyMem_Realloc(c->ends, (size_t)cap2 * sizeof(Py_ssize_t));
        if (ends == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->ends = ends;
        c->cap = cap2;
    }
    memmove(c->starts + i + 1, c->starts + j, (size_t)(c->n - j) * sizeof(Py_ssize_t));
    memmove(c->ends + i + 1, c->ends + j, (size_t)(c->n - j) * sizeof(Py_ssize_t));
    c->starts[i] = start;
    c->ends[i] = end;
    c->n = n2;
    return 0;
}

/* _Claimed.end_of_stretch_holding: -1 for None */
static Py_ssize_t claimed_end_holding(const Claimed *c, Py_ssize_t at) {
    Py_ssize_t i = bisect_right(c->starts, c->n, at) - 1;
    return (i >= 0 && at < c->ends[i]) ? c->ends[i] : -1;
}

/* _Claimed.overlaps */
static int claimed_overlaps(const Claimed *c, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t i = bisect_right(c->ends, c->n, start);
    return i < c->n && c->starts[i] < end;
}

static Py_ssize_t str_find(Search *s, PyObject *needle, Py_ssize_t at, Py_ssize_t hi) {
    Py_ssize_t found = PyUnicode_Find(s->prompt, needle, at, hi, 1);
    return found == -2 ? STOP : found;
}

/* prompt.startswith(needle, at, hi): 1, 0, or STOP on an error */
static int str_startswith(Search *s, PyObject *needle, Py_ssize_t at, Py_ssize_t hi) {
    Py_ssize_t r = PyUnicode_Tailmatch(s->prompt, needle, at, hi, -1);
    return r < 0 ? STOP : (int)r;
}

/* locate.find_text with work */
static Py_ssize_t find_text(Search *s, PyObject *text, Py_ssize_t at, Py_ssize_t hi) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), found;
    if (n <= HEAD) {
        found = str_find(s, text, at, hi);
        if (found == STOP || charge(s, pos0((found >= 0 ? found + n : hi) - at), 1) < 0)
            return STOP;
        return found;
    }
    PyObject *head = PyUnicode_Substring(text, 0, HEAD);
    if (head == NULL)
        return STOP;
    for (Py_ssize_t t = 0; t < HEAD_TRIES; t++) {
        found = str_find(s, head, at, hi);
        if (found == STOP ||
            charge(s, pos0((found >= 0 ? found + HEAD : hi) - at) + (found >= 0 ? n : 0), 1) < 0) {
            Py_DECREF(head);
            return STOP;
        }
        if (found < 0) {
            Py_DECREF(head);
            return found;
        }
        int starts = str_startswith(s, text, found, hi);
        if (starts == STOP) {
            Py_DECREF(head);
            return STOP;
        }
        if (starts) {
            Py_DECREF(head);
            return found;
        }
        at = found + 1;
    }
    Py_DECREF(head);
    found = str_find(s, text, at, hi);
    if (found == STOP || charge(s, pos0((found >= 0 ? found + n : hi) - at), 1) < 0)
        return STOP;
    return found;
}

/* _Search.find_free */
static Py_ssize_t find_free(Search *s, PyObject *needle, Py_ssize_t at, Py_ssize_t hi) {
    for (;;) {
        Py_ssize_t found = find_text(s, needle, at, hi);
        if (found < 0)
            return found; /* -1 or STOP */
        Py_ssize_t end = claimed_end_holding(&s->claimed, found);
        if (end < 0)
            return found;
        at = end;
    }
}

/* _Search.common_prefix of prompt[i:hi] and text[j:]: the same blocks and halvings charged, on a length found by
 * comparing characters (what each startswith of a block would have answered) */
static Py_ssize_t common_prefix(Search *s, Py_ssize_t i, PyObject *text, Py_ssize_t j) {
    Py_ssize_t tlen = PyUnicode_GET_LENGTH(text);
    Py_ssize_t limit = s->hi - i < tlen - j ? s->hi - i : tlen - j;
    Py_ssize_t same = 0; /* the true common length, up to limit */
    if (limit > 0) {
        int tkind = PyUnicode_KIND(text);
        const void *tdata = PyUnicode_DATA(text);
        while (same < limit &&
               PyUnicode_READ(s->kind, s->data, i + same) == PyUnicode_READ(tkind, tdata, j + same))
            same++;
    }
    Py_ssize_t good = 0, block = COMPARE_BLOCK, size = 0;
    int broke = 0;
    while (good < limit) {
        size = block < limit - good ? block : limit - good;
        if (charge(s, size, 1) < 0)
            return STOP;
        if (same < good + size) {
            broke = 1;
            break;
        }
        good += size;
        block *= 2;
    }
    if (!broke)
        return good;
    Py_ssize_t bad = good + size;
    while (bad - good > 1) {
        Py_ssize_t mid = (good + bad) / 2;
        if (charge(s, mid - good, 1) < 0)
            return STOP;
        if (same >= mid)
            good = mid;
        else
            bad = mid;
    }
    return good;
}

/* _Search.occurrences: up to want places, appended to spots */
static int occurrences(Search *s, PyObject *text, Py_ssize_t want, Py_ssize_t at, Py_ssize_t **spots,
                       Py_ssize_t *n, Py_ssize_t *cap) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(text), step = len > 1 ? len : 1;
    *n = 0;
    if (charge(s, len, 1) < 0)
        return STOP;
    int starts = str_startswith(s, text, at, s->hi);
    if (starts == STOP)
        return STOP;
    if (starts) {
        if (grow((void **)spots, cap, 1, sizeof(Py_ssize_t)) < 0)
            return STOP;
        (*spots)[(*n)++] = at;
        at += step;
    } else {
        at += 1;
    }
    while (*n < want) {
        Py_ssize_t found = find_text(s, text, at, s->hi);
        if (found == STOP)
            return STOP;
        if (found < 0)
            break;
        if (grow((void **)spots, cap, *n + 1, sizeof(Py_ssize_t)) < 0)
            return STOP;
        (*spots)[(*n)++] = found;
        at = found + step;
    }
    return 0;
}

static int add_region(Regions *r, PyObject *chunk_id, Py_ssize_t start, Py_ssize_t end, Py_ssize_t cfrom,
                      Py_ssize_t cto, int how) {
    if (grow((void **)&r->items, &r->cap, r->n + 1, sizeof(Found)) < 0)
        return -1;
    r->items[r->n] = (Found){chunk_id, start, end, cfrom, cto, how, r->n};
    r->n++;
    return 0;
}

static int set_len(PyObject *dict, PyObject *key, Py_ssize_t value) {
    PyObject *v = PyLong_FromSsize_t(value);
    if (v == NULL)
        return -1;
    int r = PyDict_SetItem(dict, key, v);
    Py_DECREF(v);
    return r;
}

typedef struct {
    Py_ssize_t id, spot; /* an index into a group's ids, the place it is given */
} Pair;

/* _Search.assign for chunks of equal text (more than one id): pairs (index into ids, spot) in out, their count, or
 * STOP. An id written just before an occurrence wins, then retrieved order. */
static Py_ssize_t assign_many(Search *s, PyObject *ids, const Py_ssize_t *spots, Py_ssize_t nspots, Pair *out) {
    Py_ssize_t nids = PyList_GET_SIZE(ids);
    if (charge(s, nspots * nids * ID_WINDOW, nspots * nids) < 0)
        return STOP;
    Py_ssize_t *free_ids = PyMem_Malloc((size_t)(nids + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *chosen = PyMem_Malloc((size_t)(nspots + 1) * sizeof(Py_ssize_t));
    if (free_ids == NULL || chosen == NULL) {
        PyMem_Free(free_ids);
        PyMem_Free(chosen);
        PyErr_NoMemory();
        return STOP;
    }
    Py_ssize_t nfree = nids;
    for (Py_ssize_t k = 0; k < nids; k++)
        free_ids[k] = k;
    for (Py_ssize_t p = 0; p < nspots; p++) {
        Py_ssize_t from = spots[p] - ID_WINDOW > s->lo ? spots[p] - ID_WINDOW : s->lo;
        PyObject *window = PyUnicode_Substring(s->prompt, from, spots[p]);
        if (window == NULL)
            goto fail;
        /* max(named, key=window.rfind): the first of the named ids written latest */
        Py_ssize_t best = -1, best_at = 0;
        for (Py_ssize_t k = 0; k < nfree; k++) {
            PyObject *id = PyList_GET_ITEM(ids, free_ids[k]);
            int in = PySequence_Contains(window, id);
            if (in < 0) {
                Py_DECREF(window);
                goto fail;
            }
            if (!in)
                continue;
            Py_ssize_t at = PyUnicode_Find(window, id, 0, PY_SSIZE_T_MAX, -1);
            if (at == -2) {
                Py_DECREF(window);
                goto fail;
            }
            if (best < 0 || at > best_at)
                best = k, best_at = at;
        }
        Py_DECREF(window);
        if (best >= 0) {
            chosen[p] = free_ids[best];
            memmove(free_ids + best, free_ids + best + 1, (size_t)(nfree - best - 1) * sizeof(Py_ssize_t));
            nfree--;
        } else {
            chosen[p] = -1;
        }
    }
    Py_ssize_t n = 0, next_free = 0;
    for (Py_ssize_t p = 0; p < nspots; p++) {
        if (chosen[p] >= 0)
            out[n++] = (Pair){chosen[p], spots[p]};
        else if (next_free < nfree)
            out[n++] = (Pair){free_ids[next_free++], spots[p]};
    }
    PyMem_Free(free_ids);
    PyMem_Free(chosen);
    return n;
fail:
    PyMem_Free(free_ids);
    PyMem_Free(chosen);
    return STOP;
}

/* _Search.longest_prefix: good, with *start the place (-1: none), or STOP */
static Py_ssize_t longest_prefix(Search *s, PyObject *text, Py_ssize_t at, Py_ssize_t *start) {
    PyObject *opening = PyUnicode_Substring(text, 0, MIN_PREFIX);
    if (opening == NULL)
        return STOP;
    Py_ssize_t good = 0;
    *start = -1;
    for (Py_ssize_t t = 0; t < MAX_OPENINGS; t++) {
        Py_ssize_t found = find_free(s, opening, at, s->hi);
        if (found == STOP) {
            Py_DECREF(opening);
            return STOP;
        }
        if (found < 0) {
            Py_DECREF(opening);
            return good;
        }
        Py_ssize_t more = common_prefix(s, found + MIN_PREFIX, text, MIN_PREFIX);
        if (more == STOP) {
            Py_DECREF(opening);
            return STOP;
        }
        if (MIN_PREFIX + more > good)
            good = MIN_PREFIX + more, *start = found;
        at = found + 1;
    }
    Py_DECREF(opening);
    Py_ssize_t bad = PyUnicode_GET_LENGTH(text);
    while (bad - good > 1) {
        Py_ssize_t mid = (good + bad) / 2;
        PyObject *prefix = PyUnicode_Substring(text, 0, mid);
        if (prefix == NULL)
            return STOP;
        Py_ssize_t found = find_free(s, prefix, *start, s->hi);
        Py_DECREF(prefix);
        if (found == STOP)
            return STOP;
        if (found >= 0)
            good = mid, *start = found;
        else
            bad = mid;
    }
    return good;
}

/* _Search.pieces into out (emptied first): 0 or STOP */
static int pieces_of(Search *s, PyObject *text, Py_ssize_t at, Pieces *out) {
    out->n = 0;
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (len < MIN_PREFIX)
        return 0;
    Py_ssize_t start, good = longest_prefix(s, text, at, &start);
    if (good == STOP)
        return STOP;
    if (start < 0)
        return 0;
    if (grow((void **)&out->items, &out->cap, 1, sizeof(Piece)) < 0)
        return STOP;
    out->items[out->n++] = (Piece){start, start + good, 0, good};
    Py_ssize_t at_prompt = start + good, at_chunk = good;
    int tkind = PyUnicode_KIND(text);
    const void *tdata = PyUnicode_DATA(text);
    for (;;) {
        Py_ssize_t c = at_chunk;
        while (c < len && PyUnicode_READ(tkind, tdata, c) == ' ')
            c++;
        /* the probe text[c:c+PROBE]; shorter than 8 characters, the chunk's rest is too short to seek */
        Py_ssize_t plen = len - c < PROBE ? len - c : PROBE;
        if (plen < 8)
            break;
        PyObject *probe = PyUnicode_Substring(text, c, c + plen);
        if (probe == NULL)
            return STOP;
        Py_ssize_t until = at_prompt + MAX_GAP + plen;
        Py_ssize_t q = find_free(s, probe, at_prompt, s->hi < until ? s->hi : until);
        Py_DECREF(probe);
        if (q == STOP)
            return STOP;
        if (q < 0)
            break;
        Py_ssize_t b = q, cb = c;
        while (b > at_prompt && cb > 0 &&
               PyUnicode_READ(s->kind, s->data, b - 1) == PyUnicode_READ(tkind, tdata, cb - 1))
            b--, cb--;
        Py_ssize_t more = common_prefix(s, q + plen, text, c + plen);
        if (more == STOP)
            return STOP;
        Py_ssize_t e = q + plen + more, ce = c + (e - q);
        if (charge(s, q - b, 1) < 0)
            return STOP;
        if (grow((void **)&out->items, &out->cap, out->n + 1, sizeof(Piece)) < 0)
            return STOP;
        out->items[out->n++] = (Piece){b, e, cb, ce};
        at_prompt = e, at_chunk = ce;
        if (ce >= len)
            break;
    }
    return 0;
}

typedef struct {
    PyObject *chunk_id; /* borrowed */
    Py_ssize_t group;   /* its text: the index of its group */
    Pieces pieces;
    int alive;
} Candidate;

typedef struct {
    PyObject *text; /* borrowed (a key of groups) */
    PyObject *ids;  /* borrowed (the value of groups) */
    Py_ssize_t opening;
} Group;

static int by_place(const void *a, const void *b) {
    const Found *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* text[from:].strip() is not empty */
static int rest_is_text(PyObject *text, Py_ssize_t from) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t k = from < 0 ? 0 : from; k < len; k++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, k)))
            return 1;
    return 0;
}

/* A candidate's pieces' total length (the first part of max's key) */
static Py_ssize_t covered_chars(const Pieces *p) {
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < p->n; k++)
        total += p->items[k].end - p->items[k].start;
    return total;
}

/* A position header right before a region ("2" for "Source 2:"): _POSITION_HINT's first group that matched, its
 * leading zeros dropped; None (a new reference) when there is none. */
static PyObject *header_ref(PyObject *window) {
    PyObject *m = PyObject_CallMethod(HINT_PATTERN, "search", "O", window);
    if (m == NULL || m == Py_None)
        return m;
    PyObject *groups = PyObject_CallMethod(m, "groups", NULL);
    Py_DECREF(m);
    if (groups == NULL)
        return NULL;
    PyObject *ref = NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(groups); k++) {
        PyObject *g = PyTuple_GET_ITEM(groups, k);
        int truth = PyObject_IsTrue(g);
        if (truth < 0) {
            Py_DECREF(groups);
            return NULL;
        }
        if (truth) {
            ref = g;
            break;
        }
    }
    if (ref == NULL || !PyUnicode_Check(ref)) {
        Py_DECREF(groups);
        Py_RETURN_NONE;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(ref), zeros = 0;
    while (zeros < len && PyUnicode_READ_CHAR(ref, zeros) == '0')
        zeros++;
    PyObject *out = zeros == len ? PyUnicode_FromString("0") : PyUnicode_Substring(ref, zeros, len);
    Py_DECREF(groups);
    return out;
}

/* locate._read_position_hints: each region as a Region with its header_ref, into list; positions: "2" -> the chunk an
 * answer's "[2]" means (by the headers, else the N-th region) */
static int read_hints(Search *s, const Regions *regions, PyObject *list, PyObject *positions) {
    Py_ssize_t previous_end = s->lo;
    int any_ref = 0;
    for (Py_ssize_t k = 0; k < regions->n; k++) {
        Found f = regions->items[k];
        Py_ssize_t from = f.start - HINT_WINDOW > previous_end ? f.start - HINT_WINDOW : previous_end;
        PyObject *window = PyUnicode_Substring(s->prompt, from, f.start);
        if (window == NULL)
            return -1;
        PyObject *ref = header_ref(window);
        Py_DECREF(window);
        if (ref == NULL)
            return -1;
        any_ref |= ref != Py_None;
        PyObject *region = REGION->tp_alloc(REGION, 7);
        PyObject *items[7] = {f.chunk_id, PyLong_FromSsize_t(f.start), PyLong_FromSsize_t(f.end),
                              PyLong_FromSsize_t(f.cfrom), PyLong_FromSsize_t(f.cto), HOW_STR[f.how], ref};
        if (region == NULL || items[1] == NULL || items[2] == NULL || items[3] == NULL || items[4] == NULL) {
            Py_XDECREF(region);
            for (int i = 1; i < 5; i++)
                Py_XDECREF(items[i]);
            Py_DECREF(ref);
            return -1;
        }
        Py_INCREF(f.chunk_id);
        Py_INCREF(HOW_STR[f.how]);
        for (int i = 0; i < 7; i++)
            PyTuple_SET_ITEM(region, i, items[i]); /* the references are the region's now */
        PyList_SET_ITEM(list, k, region);
        if (f.end > previous_end)
            previous_end = f.end;
    }
    for (Py_ssize_t k = 0; k < regions->n; k++) {
        PyObject *region = PyList_GET_ITEM(list, k), *chunk_id = PyTuple_GET_ITEM(region, 0), *key;
        if (any_ref) {
            key = PyTuple_GET_ITEM(region, 6);
            if (key == Py_None)
                continue;
            Py_INCREF(key);
        } else {
            key = PyUnicode_FromFormat("%zd", k + 1);
            if (key == NULL)
                return -1;
        }
        PyObject *was = PyDict_SetDefault(positions, key, chunk_id);
        Py_DECREF(key);
        if (was == NULL)
            return -1;
    }
    return 0;
}

static PyObject *locate(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *prompt, *chunks;
    Py_ssize_t lo, hi, budget;
    if (!PyArg_ParseTuple(args, "UOnnn:locate", &prompt, &chunks, &lo, &hi, &budget))
        return NULL;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_locate.configure was not called");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(chunks, "locate: chunks must be a sequence of (chunk_id, text)");
    if (seq == NULL)
        return NULL;
    Search s = {.prompt = prompt, .kind = PyUnicode_KIND(prompt), .data = PyUnicode_DATA(prompt), .lo = lo, .hi = hi,
                .budget = budget};
    PyObject *chunk_chars = PyDict_New(), *groups = PyDict_New(), *arrived = PyDict_New(), *truncated = PySet_New(NULL),
             *retried = PySet_New(NULL), *result = NULL;
    Group *gs = NULL;
    Candidate *cands = NULL;
    Py_ssize_t ngroups = 0, ncands = 0, cands_cap = 0, spots_cap = 0, pairs_cap = 0;
    Py_ssize_t *spots = NULL;
    Pair *pairs = NULL;
    Regions regions = {NULL, 0, 0};
    Pieces scratch = {NULL, 0, 0};
    if (chunk_chars == NULL || groups == NULL || arrived == NULL || truncated == NULL || retried == NULL)
        goto done;

    Py_ssize_t nchunks = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < nchunks; k++) {
        PyObject *pair = items[k];
        if (!(PyTuple_Check(pair) || PyList_Check(pair)) || PySequence_Fast_GET_SIZE(pair) != 2 ||
            !PyUnicode_Check(PySequence_Fast_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "locate: each chunk must be a (chunk_id, str) pair");
            goto done;
        }
        PyObject *chunk_id = PySequence_Fast_GET_ITEM(pair, 0), *text = PySequence_Fast_GET_ITEM(pair, 1);
        if (set_len(chunk_chars, chunk_id, PyUnicode_GET_LENGTH(text)) < 0)
            goto done;
        if (PyUnicode_GET_LENGTH(text) == 0)
            continue;
        PyObject *ids = PyDict_GetItemWithError(groups, text);
        if (ids == NULL) {
            if (PyErr_Occurred())
                goto done;
            ids = PyList_New(0);
            if (ids == NULL)
                goto done;
            int r = PyDict_SetItem(groups, text, ids);
            Py_DECREF(ids); /* groups holds it */
            if (r < 0)
                goto done;
        }
        if (PyList_Append(ids, chunk_id) < 0)
            goto done;
    }

    /* whole chunks: each text where its opening first stands, and as often as it was retrieved */
    ngroups = PyDict_GET_SIZE(groups);
    gs = PyMem_Malloc((size_t)(ngroups + 1) * sizeof(Group));
    if (gs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    {
        Py_ssize_t pos = 0, g = 0;
        PyObject *text, *ids;
        while (PyDict_Next(groups, &pos, &text, &ids))
            gs[g++] = (Group){text, ids, -1};
    }
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *text = gs[g].text, *ids = gs[g].ids;
        Py_ssize_t len = PyUnicode_GET_LENGTH(text), nids = PyList_GET_SIZE(ids), nspots = 0;
        PyObject *opening = PyUnicode_Substring(text, 0, MIN_PREFIX);
        if (opening == NULL)
            goto done;
        gs[g].opening = find_text(&s, opening, s.lo, s.hi);
        Py_DECREF(opening);
        if (gs[g].opening == STOP)
            goto stopped;
        if (gs[g].opening >= 0 && occurrences(&s, text, nids, gs[g].opening, &spots, &nspots, &spots_cap) == STOP)
            goto stopped;
        Py_ssize_t npairs;
        if (grow((void **)&pairs, &pairs_cap, nspots + 1, sizeof(Pair)) < 0)
            goto done;
        if (nids == 1) {
            npairs = nspots ? 1 : 0;
            pairs[0] = (Pair){0, nspots ? spots[0] : 0};
        } else {
            npairs = assign_many(&s, ids, spots, nspots, pairs);
            if (npairs == STOP)
                goto stopped;
        }
        for (Py_ssize_t p = 0; p < npairs; p++) {
            PyObject *chunk_id = PyList_GET_ITEM(ids, pairs[p].id);
            Py_ssize_t start = pairs[p].spot;
            if (add_region(&regions, chunk_id, start, start + len, 0, len, WHOLE) < 0 ||
                set_len(arrived, chunk_id, len) < 0 || claimed_add(&s.claimed, start, start + len) < 0)
                goto done;
        }
        /* pending: its ids not located whole (by now), whose opening stands somewhere; candidates in that order,
         * an id seen twice keeping its first place and taking its later text (a dict built from pairs) */
        for (Py_ssize_t k = 0; k < nids; k++) {
            PyObject *chunk_id = PyList_GET_ITEM(ids, k);
            int has = PyDict_Contains(arrived, chunk_id);
            if (has < 0)
                goto done;
            if (has || gs[g].opening < 0)
                continue;
            if (grow((void **)&cands, &cands_cap, ncands + 1, sizeof(Candidate)) < 0)
                goto done;
            cands[ncands++] = (Candidate){chunk_id, g, {NULL, 0, 0}, 1};
        }
    }
    /* the pending chunks' pieces, in pending order (each search charged as it runs), into a dict's order */
    {
        Py_ssize_t kept = 0;
        for (Py_ssize_t k = 0; k < ncands; k++) {
            Candidate *c = &cands[k];
            if (pieces_of(&s, gs[c->group].text, gs[c->group].opening, &c->pieces) == STOP)
                goto stopped;
            Py_ssize_t same = -1;
            for (Py_ssize_t m = 0; m < kept; m++) {
                int eq = PyObject_RichCompareBool(cands[m].chunk_id, c->chunk_id, Py_EQ);
                if (eq < 0)
                    goto done;
                if (eq) {
                    same = m;
                    break;
                }
            }
            if (same >= 0) { /* the key keeps its place, the value and text are the later ones */
                PyMem_Free(cands[same].pieces.items);
                cands[same].pieces = c->pieces;
                cands[same].group = c->group;
                c->pieces = (Pieces){NULL, 0, 0};
            } else {
                Candidate moved = *c;
                c->pieces = (Pieces){NULL, 0, 0};
                cands[kept++] = moved;
            }
        }
        for (Py_ssize_t k = kept; k < ncands; k++)
            PyMem_Free(cands[k].pieces.items);
        ncands = kept;
    }
    /* cut or re-split chunks: the longest match claims its stretch first */
    for (;;) {
        Py_ssize_t alive = 0, total = 0, best = -1, best_cov = 0, best_len = 0;
        for (Py_ssize_t k = 0; k < ncands; k++) {
            if (!cands[k].alive)
                continue;
            alive++;
            total += cands[k].pieces.n;
            Py_ssize_t cov = covered_chars(&cands[k].pieces), tlen = PyUnicode_GET_LENGTH(gs[cands[k].group].text);
            if (best < 0 || cov > best_cov || (cov == best_cov && -tlen > -best_len))
                best = k, best_cov = cov, best_len = tlen;
        }
        if (!alive)
            break;
        if (charge(&s, alive + total, 1) < 0)
            goto stopped;
        Candidate *c = &cands[best];
        c->alive = 0;
        if (c->pieces.n == 0)
            break;
        if (charge(&s, 0, c->pieces.n) < 0)
            goto stopped;
        Py_ssize_t clear = 0;
        while (clear < c->pieces.n &&
               !claimed_overlaps(&s.claimed, c->pieces.items[clear].start, c->pieces.items[clear].end))
            clear++;
        if (clear < c->pieces.n) {
            int tried = PySet_Contains(retried, c->chunk_id);
            if (tried < 0)
                goto done;
            if (!tried) { /* part of its stretch went to a better match: look again, once */
                if (PySet_Add(retried, c->chunk_id) < 0)
                    goto done;
                if (pieces_of(&s, gs[c->group].text, gs[c->group].opening, &scratch) == STOP)
                    goto stopped;
                if (grow((void **)&cands, &cands_cap, ncands + 1, sizeof(Candidate)) < 0)
                    goto done;
                c = &cands[best]; /* cands may have moved */
                cands[ncands++] = (Candidate){c->chunk_id, c->group, scratch, 1};
                scratch = (Pieces){NULL, 0, 0};
                continue;
            }
            if (clear == 0)
                continue;
            c->pieces.n = clear;
        }
        PyObject *text = gs[c->group].text;
        for (Py_ssize_t k = 0; k < c->pieces.n; k++)
            if (claimed_add(&s.claimed, c->pieces.items[k].start, c->pieces.items[k].end) < 0)
                goto done;
        if (charge(&s, c->pieces.n * s.claimed.n, 1) < 0)
            goto stopped;
        int how = c->pieces.n > 1 ? PIECE : PREFIX;
        for (Py_ssize_t k = 0; k < c->pieces.n; k++) {
            Piece p = c->pieces.items[k];
            if (add_region(&regions, c->chunk_id, p.start, p.end, p.cfrom, p.cto, how) < 0)
                goto done;
        }
        Py_ssize_t covered = c->pieces.items[c->pieces.n - 1].cto;
        if (set_len(arrived, c->chunk_id, covered) < 0)
            goto done;
        if (rest_is_text(text, covered) && PySet_Add(truncated, c->chunk_id) < 0)
            goto done;
    }
    /* in prompt order: sorted by (start, end), ties in the order found */
    qsort(regions.items, (size_t)regions.n, sizeof(Found), by_place);
    if (charge(&s, regions.n * HINT_WINDOW, regions.n) < 0)
        goto stopped;
    {
        PyObject *list = PyList_New(regions.n), *positions = PyDict_New();
        if (list == NULL || positions == NULL || read_hints(&s, &regions, list, positions) < 0) {
            Py_XDECREF(list);
            Py_XDECREF(positions);
            goto done;
        }
        result = Py_BuildValue("(NOOONnO)", list, chunk_chars, arrived, truncated, positions, s.spent, Py_False);
    }
    goto done;
stopped:
    if (!PyErr_Occurred())
        result = Py_BuildValue("(OOOOOnO)", Py_None, chunk_chars, Py_None, Py_None, Py_None, s.spent, Py_True);
done:
    for (Py_ssize_t k = 0; k < ncands; k++)
        PyMem_Free(cands[k].pieces.items);
    PyMem_Free(cands);
    PyMem_Free(scratch.items);
    PyMem_Free(gs);
    PyMem_Free(spots);
    PyMem_Free(pairs);
    PyMem_Free(regions.items);
    PyMem_Free(s.claimed.starts);
    PyMem_Free(s.claimed.ends);
    Py_XDECREF(chunk_chars);
    Py_XDECREF(groups);
    Py_XDECREF(arrived);
    Py_XDECREF(truncated);
    Py_XDECREF(retried);
    Py_DECREF(seq);
    return result;
}

static PyObject *find(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *prompt, *text;
    Py_ssize_t at, hi;
    if (!PyArg_ParseTuple(args, "UUnn:find", &prompt, &text, &at, &hi))
        return NULL;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "_locate.configure was not called");
        return NULL;
    }
    /* a budget no search reaches: nothing is charged */
    Search s = {.prompt = prompt, .kind = PyUnicode_KIND(prompt), .data = PyUnicode_DATA(prompt), .hi = hi,
                .budget = PY_SSIZE_T_MAX};
    Py_ssize_t found = find_text(&s, text, at, hi);
    return found == STOP ? NULL : PyLong_FromSsize_t(found);
}

static PyObject *configure(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *pattern, *region;
    if (!PyArg_ParseTuple(args, "nnnnnnnnnnOO!:configure", &MIN_PREFIX, &PROBE, &MAX_GAP, &HINT_WINDOW, &ID_WINDOW,
                          &CALL_CHARS, &MAX_OPENINGS, &COMPARE_BLOCK, &HEAD, &HEAD_TRIES, &pattern, &PyType_Type,
                          &region))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)region, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure: Region must be a NamedTuple");
        return NULL;
    }
    Py_INCREF(pattern);
    Py_XSETREF(HINT_PATTERN, pattern);
    Py_INCREF(region);
    Py_XSETREF(REGION, (PyTypeObject *)region);
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "locate.py's constants, set as it imports this module."},
    {"locate", locate, METH_VARARGS, "What locate.py's _locate finds."},
    {"find", find, METH_VARARGS, "locate.find_text without work: prompt.find(text, at, hi), head first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_locate", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__locate(void) {
    for (int k = 0; k < 3; k++)
        if (HOW_STR[k] == NULL && (HOW_STR[k] = PyUnicode_InternFromString(HOW[k])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
