/* BM25's posting scan in one pass: the inner loop of memory_bank.index.LexicalIndex.score_array.
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

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(acc, norms, pos, tf, w, k1p1): acc[pos] += tf*w*k1p1 / (norms[pos] + tf), in float32."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25scan", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__bm25scan(void)
{
    return PyModule_Create(&module);
}
