/* The search's two loops over every memory, compiled (setup.py builds this module; where it is
 * not built, NumPy computes the same results):
 *
 * scan: BM25's posting scan in one pass, the inner loop of memory_bank.index.LexicalIndex.score_array.
 *
 * For each posting i (position pos[i], term frequency tf[i]) of one query token of weight w:
 *
 *     part = tf[i] * w;  part *= k1p1;  denom = norms[pos[i]] + tf[i];  acc[pos[i]] += part / denom
 *
 * in float32, in exactly this order of operations, which is what the NumPy fallback computes
 * with whole-array operations (tf * w, *=, take, +=, /=, np.add.at): the scores are the same
 * bits either way (tested). The NumPy version makes six passes over the postings and allocates
 * four temporaries; this one reads each posting once, without the GIL.
 *
 * top_positive: the k best positive scores in one pass (memory_bank.topk.top_positive).
 *
 * No NumPy headers: the arrays come through the buffer protocol, checked for kind, size and
 * contiguity, and every position is checked against the accumulator's length.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
want(Py_buffer *b, const char *name, char kind, Py_ssize_t itemsize)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    int ok = b->ndim == 1 && b->itemsize == itemsize && f[1] == '\0';
    if (ok && kind == 'f')
        ok = f[0] == 'f';
    else if (ok && kind == 'i')
        ok = strchr("bhilqn", f[0]) != NULL; /* a signed integer of the size asked */
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous 1-d array of %s", name,
                     kind == 'f' ? "float32" : (itemsize == 8 ? "int64" : "int32"));
        return 0;
    }
    return 1;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    PyObject *objs[4];
    Py_buffer acc, norms, pos, tf;
    Py_buffer *bufs[4] = {&acc, &norms, &pos, &tf};
    double w, k1p1;
    if (!PyArg_ParseTuple(args, "OOOOdd", &objs[0], &objs[1], &objs[2], &objs[3], &w, &k1p1))
        return NULL;
    int got = 0;
    for (; got < 4; got++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (got == 0 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[got], bufs[got], flags) < 0)
            break;
    }
    PyObject *result = NULL;
    if (got < 4)
        goto done;
    int wide = pos.itemsize == 8;
    if (!want(&acc, "acc", 'f', 4) || !want(&norms, "norms", 'f', 4) ||
        !want(&pos, "pos", 'i', wide ? 8 : 4) || !want(&tf, "tf", 'f', 4))
        goto done;
    Py_ssize_t n = acc.shape[0], m = pos.shape[0];
    if (norms.shape[0] != n || tf.shape[0] != m) {
        PyErr_SetString(PyExc_ValueError, "norms must match acc and tf must match pos in length");
        goto done;
    }
    float *a = (float *)acc.buf;
    const float *nr = (const float *)norms.buf, *t = (const float *)tf.buf;
    const float fw = (float)w, fk = (float)k1p1;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t p = wide ? (uint64_t)((const int64_t *)pos.buf)[i]
                          : (uint64_t)(int64_t)((const int32_t *)pos.buf)[i];
        if (p >= (uint64_t)n) {
            bad = i;
            break;
        }
        float part = t[i] * fw;
        part = part * fk;
        float denom = nr[p] + t[i];
        part = part / denom;
        a[p] = a[p] + part;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "posting %zd points past the %zd scored positions", bad, n);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(bufs[i]);
    return result;
}


/* The heap's order: a is "worse" than b when its score is lower, or equal with a later index
 * (ties go to the earlier index, as a stable sort by descending score gives them). */
static inline int
worse(float sa, int64_t ia, float sb, int64_t ib)
{
    return sa < sb || (sa == sb && ia > ib);
}

/* Swaps heap entries a and b (score and index together). */
static inline void
swap(float *hs, int64_t *hi, Py_ssize_t a, Py_ssize_t b)
{
    float ts = hs[a];
    hs[a] = hs[b];
    hs[b] = ts;
    int64_t ti = hi[a];
    hi[a] = hi[b];
    hi[b] = ti;
}

static void
sift_down(float *hs, int64_t *hi, Py_ssize_t k, Py_ssize_t j)
{
    for (;;) {
        Py_ssize_t l = 2 * j + 1, r = l + 1, w = j;
        if (l < k && worse(hs[l], hi[l], hs[w], hi[w]))
            w = l;
        if (r < k && worse(hs[r], hi[r], hs[w], hi[w]))
            w = r;
        if (w == j)
            return;
        swap(hs, hi, j, w);
        j = w;
    }
}

#define BLOCK 32

static PyObject *
top_positive(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    Py_buffer sc, op, os;
    Py_buffer *bufs[3] = {&sc, &op, &os};
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2]))
        return NULL;
    int got = 0;
    for (; got < 3; got++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (got > 0 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[got], bufs[got], flags) < 0)
            break;
    }
    PyObject *result = NULL;
    if (got < 3)
        goto done;
    if (!want(&sc, "scores", 'f', 4) || !want(&op, "out_positions", 'i', 8) || !want(&os, "out_scores", 'f', 4))
        goto done;
    Py_ssize_t n = sc.shape[0], k = op.shape[0];
    if (os.shape[0] != k) {
        PyErr_SetString(PyExc_ValueError, "out_scores must match out_positions in length");
        goto done;
    }
    const float *s = (const float *)sc.buf;
    float *hs = (float *)os.buf;
    int64_t *hi = (int64_t *)op.buf;
    Py_ssize_t size = 0;
    Py_BEGIN_ALLOW_THREADS
    /* A min-heap of the best k seen so far, by (score, earlier index). Scanning in index order,
     * a score equal to the heap's worst never enters: the one held came earlier. One comparison
     * per score against a threshold (0 until the heap is full, then its worst), which almost
     * always fails once it is full: no branch to mispredict on zeros mixed with positives. */
    float thr = 0.0f;
    for (Py_ssize_t i = 0; i < n && k > 0; i++) {
        if ((i & (BLOCK - 1)) == 0 && i + BLOCK <= n) {
            /* A block none of whose scores beats the threshold is skipped whole (NaN never
             * does); the compiler turns this test into a few vector compares. */
            int any = 0;
            for (Py_ssize_t j = 0; j < BLOCK; j++)
                any |= s[i + j] > thr;
            if (!any) {
                i += BLOCK - 1;
                continue;
            }
        }
        float v = s[i];
        if (!(v > thr))
            continue;
        if (size < k) {
            Py_ssize_t j = size++;
            hs[j] = v;
            hi[j] = i;
            while (j > 0) { /* sift up */
                Py_ssize_t p = (j - 1) / 2;
                if (!worse(hs[j], hi[j], hs[p], hi[p]))
                    break;
                swap(hs, hi, j, p);
                j = p;
            }
            if (size == k)
                thr = hs[0];
        } else {
            hs[0] = v;
            hi[0] = i;
            sift_down(hs, hi, k, 0);
            thr = hs[0];
        }
    }
    /* Best first: pop the worst to the end, one at a time. */
    for (Py_ssize_t end = size - 1; end > 0; end--) {
        swap(hs, hi, 0, end);
        sift_down(hs, hi, end, 0);
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(size);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(bufs[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(acc, norms, pos, tf, w, k1p1): acc[pos] += tf*w*k1p1 / (norms[pos] + tf), in float32."},
    {"top_positive", top_positive, METH_VARARGS,
     "top_positive(scores, out_positions, out_scores) -> count: the best positive scores (as many as\n"
     "out_positions holds), best first, ties to the earlier index, written into the two outputs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
