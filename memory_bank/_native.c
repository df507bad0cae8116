/* The loops over every posting or memory that a search or a restart runs, compiled (setup.py
 * builds this module; where it is not built, NumPy computes the same results):
 *
 * scan_runs: BM25's posting scan, memory_bank.index.LexicalIndex.score_top.
 *
 * Every score starts at 0; then for each posting i (position pos[i], term frequency tf[i]) of
 * each run of postings (one query token's, of weight w), in the order the runs are given:
 *
 *     norm = lengths[pos[i]] * c1;  norm += c0;
 *     part = tf[i] * w;  part *= k1p1;  denom = norm + tf[i];  acc[pos[i]] += part / denom
 *
 * in float32, in exactly this order of operations, which is what the NumPy fallback computes
 * with whole-array operations (norms once, then tf * w, *=, take, +=, /=, np.add.at): the
 * scores are the same bits either way (tested). The norms come from the lengths as each
 * posting is read, so no array of them is recomputed after every add (0.3-0.5 ms at a million
 * memories, before the first search after each). The NumPy version makes six passes over each
 * run and allocates four temporaries; this one reads each posting once, without the GIL, then
 * finds the best positive scores as top_positive does. Positions are int32 or int64,
 * frequencies float32 or uint16 (an index keeps them as the snapshot stored them).
 *
 * postings_misfit: one pass checking that every run of a CSR posting list ascends strictly,
 * names positions in [0, n) and has positive frequencies (memory_bank.lexical_snapshot).
 *
 * top_positive: the k best positive scores in one pass (memory_bank.topk.top_positive).
 *
 * echo_share, day_evidence and neighbour_lift: the ranking's per-candidate steps over the few
 * hundred memories a search scores (memory_bank.index.Partition.echo and
 * memory_bank.retrieval.stages), each the NumPy version's operations in its order, in one loop
 * instead of a dozen small array operations (about 0.2 of a search's 1 ms at 10k memories).
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

/* One run of postings: its arrays and its weight. */
typedef struct {
    Py_buffer pos, tf;
    int got;        /* buffers held: 0, 1 or 2 */
    int wide, tf16; /* int64 positions; uint16 frequencies */
    float w;
    Py_ssize_t m;
} Run;

static int
want_tf(Py_buffer *b, int *tf16)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (b->ndim == 1 && f[1] == '\0' && b->itemsize == 4 && f[0] == 'f') {
        *tf16 = 0;
        return 1;
    }
    if (b->ndim == 1 && f[1] == '\0' && b->itemsize == 2 && f[0] == 'H') {
        *tf16 = 1;
        return 1;
    }
    PyErr_SetString(PyExc_TypeError, "tf: expected a contiguous 1-d array of float32 or uint16");
    return 0;
}

static int
want_pos(Py_buffer *b, int *wide)
{
    *wide = b->itemsize == 8;
    return want(b, "pos", 'i', *wide ? 8 : 4);
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

/* Offers scores s[from, to) to a min-heap (hs, hi) of at most k of the best positive scores
 * seen so far, by (score, earlier index); *size is how many it holds and *thr the score to
 * beat (0 until it is full, then its worst). Scores must come in index order: one equal to the
 * heap's worst never enters, since the one held came earlier. One comparison per score, which
 * almost always fails once the heap is full: no branch to mispredict on zeros mixed with
 * positives. */
static void
offer(const float *s, Py_ssize_t from, Py_ssize_t to, float *hs, int64_t *hi, Py_ssize_t k,
      Py_ssize_t *size, float *thr)
{
    float t = *thr;
    Py_ssize_t z = *size;
    for (Py_ssize_t i = from; i < to && k > 0; i++) {
        if (((i - from) & (BLOCK - 1)) == 0 && i + BLOCK <= to) {
            /* A block none of whose scores beats the threshold is skipped whole (NaN never
             * does); the compiler turns this test into a few vector compares. */
            int any = 0;
            for (Py_ssize_t j = 0; j < BLOCK; j++)
                any |= s[i + j] > t;
            if (!any) {
                i += BLOCK - 1;
                continue;
            }
        }
        float v = s[i];
        if (!(v > t))
            continue;
        if (z < k) {
            Py_ssize_t j = z++;
            hs[j] = v;
            hi[j] = i;
            while (j > 0) { /* sift up */
                Py_ssize_t q = (j - 1) / 2;
                if (!worse(hs[j], hi[j], hs[q], hi[q]))
                    break;
                swap(hs, hi, j, q);
                j = q;
            }
            if (z == k)
                t = hs[0];
        } else {
            hs[0] = v;
            hi[0] = i;
            sift_down(hs, hi, k, 0);
            t = hs[0];
        }
    }
    *thr = t;
    *size = z;
}

/* The heap's entries best first: pop the worst to the end, one at a time. */
static void
heap_sorted(float *hs, int64_t *hi, Py_ssize_t size)
{
    for (Py_ssize_t end = size - 1; end > 0; end--) {
        swap(hs, hi, 0, end);
        sift_down(hs, hi, end, 0);
    }
}

/* The scan of one run for each kind of position and frequency array: the index of the first
 * posting past the n scored positions (or negative), else -1. Four postings at a time where
 * the compiler has vector types: their lengths gathered, their norms and parts computed as one
 * vector (each lane the same IEEE operations, so the same bits as one at a time), then added
 * one by one in order; the division, the loop's slowest step, is then done four at once. */
#if defined(__GNUC__) || defined(__clang__)
typedef float v4sf __attribute__((vector_size(16)));
#define SCAN_FOUR(PT)                                                                            \
    const v4sf vw = {fw, fw, fw, fw}, vk = {fk, fk, fk, fk};                                     \
    const v4sf v0 = {c0, c0, c0, c0}, v1 = {c1, c1, c1, c1};                                     \
    for (; i + 4 <= m; i += 4) {                                                                 \
        uint64_t q0 = (uint64_t)(int64_t)p[i], q1 = (uint64_t)(int64_t)p[i + 1];                 \
        uint64_t q2 = (uint64_t)(int64_t)p[i + 2], q3 = (uint64_t)(int64_t)p[i + 3];             \
        if ((q0 >= n) | (q1 >= n) | (q2 >= n) | (q3 >= n))                                       \
            break; /* the loop below stops at the bad one */                                     \
        v4sf tt = {(float)t[i], (float)t[i + 1], (float)t[i + 2], (float)t[i + 3]};              \
        v4sf nn = {ln[q0], ln[q1], ln[q2], ln[q3]};                                              \
        nn = nn * v1;                                                                            \
        nn = nn + v0;                                                                            \
        v4sf part = tt * vw;                                                                     \
        part = part * vk;                                                                        \
        v4sf denom = nn + tt;                                                                    \
        part = part / denom;                                                                     \
        a[q0] = a[q0] + part[0];                                                                 \
        a[q1] = a[q1] + part[1];                                                                 \
        a[q2] = a[q2] + part[2];                                                                 \
        a[q3] = a[q3] + part[3];                                                                 \
    }
#else
#define SCAN_FOUR(PT)
#endif

#define DEFINE_SCAN(NAME, PT, TT)                                                                \
    static Py_ssize_t NAME(float *a, const float *ln, uint64_t n, const PT *p, const TT *t,      \
                           Py_ssize_t m, float fw, float fk, float c0, float c1)                 \
    {                                                                                            \
        Py_ssize_t i = 0;                                                                        \
        SCAN_FOUR(PT)                                                                            \
        for (; i < m; i++) {                                                                     \
            uint64_t q = (uint64_t)(int64_t)p[i]; /* a negative position is past n too */       \
            if (q >= n)                                                                          \
                return i;                                                                        \
            float tt = (float)t[i];                                                              \
            float norm = ln[q] * c1;                                                             \
            norm = norm + c0;                                                                    \
            float part = tt * fw;                                                                \
            part = part * fk;                                                                    \
            float denom = norm + tt;                                                             \
            part = part / denom;                                                                 \
            a[q] = a[q] + part;                                                                  \
        }                                                                                        \
        return -1;                                                                               \
    }

DEFINE_SCAN(scan_i32_f32, int32_t, float)
DEFINE_SCAN(scan_i32_u16, int32_t, uint16_t)
DEFINE_SCAN(scan_i64_f32, int64_t, float)
DEFINE_SCAN(scan_i64_u16, int64_t, uint16_t)

static PyObject *
scan_runs(PyObject *self, PyObject *args)
{
    PyObject *acc_obj, *len_obj, *runs_obj, *op_obj, *os_obj;
    double c0d, c1d, k1p1;
    if (!PyArg_ParseTuple(args, "OOddOdOO", &acc_obj, &len_obj, &c0d, &c1d, &runs_obj, &k1p1, &op_obj,
                          &os_obj))
        return NULL;
    PyObject *seq = PySequence_Fast(runs_obj, "runs must be a sequence of (pos, tf, w)");
    if (seq == NULL)
        return NULL;
    Py_ssize_t nruns = PySequence_Fast_GET_SIZE(seq);
    Run *runs = PyMem_Calloc(nruns ? nruns : 1, sizeof(Run));
    Py_buffer acc, lens, op, os;
    Py_buffer *bufs[4] = {&acc, &lens, &op, &os};
    PyObject *objs[4] = {acc_obj, len_obj, op_obj, os_obj};
    int got = 0;
    PyObject *result = NULL;
    if (runs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < 4; got++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (got != 1 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[got], bufs[got], flags) < 0)
            goto done;
    }
    if (!want(&acc, "acc", 'f', 4) || !want(&lens, "lengths", 'f', 4) ||
        !want(&op, "out_positions", 'i', 8) || !want(&os, "out_scores", 'f', 4))
        goto done;
    Py_ssize_t n = acc.shape[0], k = op.shape[0];
    if (lens.shape[0] != n) {
        PyErr_SetString(PyExc_ValueError, "lengths must match acc in length");
        goto done;
    }
    if (os.shape[0] != k) {
        PyErr_SetString(PyExc_ValueError, "out_scores must match out_positions in length");
        goto done;
    }
    {   /* acc is cleared first: it must share no memory with what is read or written after */
        const char *a0 = (const char *)acc.buf, *a1 = a0 + (size_t)n * sizeof(float);
        const Py_buffer *others[3] = {&lens, &op, &os};
        for (int i = 0; i < 3; i++) {
            const char *b0 = (const char *)others[i]->buf, *b1 = b0 + others[i]->len;
            if (others[i]->len > 0 && n > 0 && b0 < a1 && a0 < b1) {
                PyErr_SetString(PyExc_ValueError, "acc must not share memory with the other arrays");
                goto done;
            }
        }
    }
    for (Py_ssize_t r = 0; r < nruns; r++) {
        PyObject *pos_obj, *tf_obj;
        double w;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, r), "OOd", &pos_obj, &tf_obj, &w))
            goto done;
        Run *run = &runs[r];
        if (PyObject_GetBuffer(pos_obj, &run->pos, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        run->got = 1;
        if (PyObject_GetBuffer(tf_obj, &run->tf, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        run->got = 2;
        if (!want_pos(&run->pos, &run->wide) || !want_tf(&run->tf, &run->tf16))
            goto done;
        run->m = run->pos.shape[0];
        if (run->tf.shape[0] != run->m) {
            PyErr_SetString(PyExc_ValueError, "tf must match pos in length");
            goto done;
        }
        run->w = (float)w;
    }
    float *a = (float *)acc.buf, *hs = (float *)os.buf;
    int64_t *hi = (int64_t *)op.buf;
    const float *ln = (const float *)lens.buf;
    const float fk = (float)k1p1, c0 = (float)c0d, c1 = (float)c1d;
    Py_ssize_t bad_run = -1, bad = -1, size = 0;
    float thr = 0.0f;
    Py_BEGIN_ALLOW_THREADS
    memset(a, 0, (size_t)n * sizeof(float));
    for (Py_ssize_t r = 0; r < nruns && bad < 0; r++) {
        Run *run = &runs[r];
        const void *p = run->pos.buf, *t = run->tf.buf;
        if (run->wide)
            bad = run->tf16 ? scan_i64_u16(a, ln, (uint64_t)n, p, t, run->m, run->w, fk, c0, c1)
                            : scan_i64_f32(a, ln, (uint64_t)n, p, t, run->m, run->w, fk, c0, c1);
        else
            bad = run->tf16 ? scan_i32_u16(a, ln, (uint64_t)n, p, t, run->m, run->w, fk, c0, c1)
                            : scan_i32_f32(a, ln, (uint64_t)n, p, t, run->m, run->w, fk, c0, c1);
        bad_run = r;
    }
    if (bad < 0) {
        offer(a, 0, n, hs, hi, k, &size, &thr);
        heap_sorted(hs, hi, size);
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "posting %zd of run %zd points past the %zd scored positions",
                     bad, bad_run, n);
        goto done;
    }
    result = PyLong_FromSsize_t(size);
done:
    if (runs != NULL) {
        for (Py_ssize_t r = 0; r < nruns; r++) {
            if (runs[r].got > 0)
                PyBuffer_Release(&runs[r].pos);
            if (runs[r].got > 1)
                PyBuffer_Release(&runs[r].tf);
        }
    }
    PyMem_Free(runs);
    for (int i = 0; i < got; i++)
        PyBuffer_Release(bufs[i]);
    Py_DECREF(seq);
    return result;
}

static PyObject *
postings_misfit(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    Py_buffer starts, pos, tf;
    Py_buffer *bufs[3] = {&starts, &pos, &tf};
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOn", &objs[0], &objs[1], &objs[2], &n))
        return NULL;
    int got = 0;
    for (; got < 3; got++) {
        if (PyObject_GetBuffer(objs[got], bufs[got], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            break;
    }
    PyObject *result = NULL;
    int wide, tf16;
    if (got < 3 || !want(&starts, "starts", 'i', 8) || !want_pos(&pos, &wide) || !want_tf(&tf, &tf16))
        goto done;
    Py_ssize_t rows = starts.shape[0] - 1, m = pos.shape[0];
    const int64_t *st = (const int64_t *)starts.buf;
    if (rows < 0 || st[0] != 0 || st[rows] != m || tf.shape[0] != m) {
        result = PyUnicode_FromString("its postings do not fit their row pointers");
        goto done;
    }
    const char *why = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows && why == NULL; r++) {
        int64_t a = st[r], b = st[r + 1];
        if (b < a || b > m) {
            why = "the row pointers of its postings go backwards";
            break;
        }
        int64_t prev = -1;
        for (int64_t i = a; i < b; i++) {
            int64_t p = wide ? ((const int64_t *)pos.buf)[i] : ((const int32_t *)pos.buf)[i];
            if (p < 0 || p >= n) {
                why = "a posting names a memory it does not hold";
                break;
            }
            if (p <= prev) {
                why = "a token's postings are not in ascending order";
                break;
            }
            prev = p;
            if (tf16 ? ((const uint16_t *)tf.buf)[i] == 0 : !(((const float *)tf.buf)[i] > 0)) {
                why = "a count is not positive";
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (why != NULL)
        result = PyUnicode_FromString(why);
    else {
        result = Py_None;
        Py_INCREF(result);
    }
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(bufs[i]);
    return result;
}


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
    float thr = 0.0f;
    Py_BEGIN_ALLOW_THREADS
    offer(s, 0, n, hs, hi, k, &size, &thr);
    heap_sorted(hs, hi, size);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(size);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(bufs[i]);
    return result;
}

/* -- echo_share, day_evidence, neighbour_lift ---------------------------------------------- */

/* Takes n buffers (objs) with the flags given (writable where asked), releasing them all on
 * failure; returns how many were taken (n on success). */
static int
take_buffers(PyObject **objs, Py_buffer **bufs, const int *writable, int n)
{
    int got = 0;
    for (; got < n; got++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable[got] ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[got], bufs[got], flags) < 0)
            break;
    }
    return got;
}

/* Releases the first got of bufs and returns result (NULL when an exception is set). */
static PyObject *
released(PyObject *result, Py_buffer **bufs, int got)
{
    for (int i = 0; i < got; i++)
        PyBuffer_Release(bufs[i]);
    return result;
}

static int
want_f64(Py_buffer *b, const char *name)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (b->ndim == 1 && b->itemsize == 8 && f[0] == 'd' && f[1] == '\0')
        return 1;
    PyErr_Format(PyExc_TypeError, "%s: expected a contiguous 1-d array of float64", name);
    return 0;
}

static PyObject *
echo_share(PyObject *self, PyObject *args)
{
    PyObject *objs[5];
    Py_buffer st, ids, ps, qs, out;
    Py_buffer *bufs[5] = {&st, &ids, &ps, &qs, &out};
    const int writable[5] = {0, 0, 0, 0, 1};
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4]))
        return NULL;
    int got = take_buffers(objs, bufs, writable, 5);
    PyObject *result = NULL;
    unsigned char *wanted = NULL;
    if (got < 5)
        goto done;
    if (!want(&st, "user_starts", 'i', 8) || !want(&ids, "user_ids", 'i', 4) || !want(&ps, "positions", 'i', 8) ||
        !want(&qs, "query_ids", 'i', 4) || !want_f64(&out, "out"))
        goto done;
    Py_ssize_t m = ps.shape[0], nq = qs.shape[0], nst = st.shape[0], nids = ids.shape[0];
    if (out.shape[0] != m) {
        PyErr_SetString(PyExc_ValueError, "out must match positions in length");
        goto done;
    }
    const int32_t *q = (const int32_t *)qs.buf;
    int32_t maxq = -1;
    for (Py_ssize_t i = 0; i < nq; i++)
        if (q[i] > maxq)
            maxq = q[i];
    wanted = PyMem_Calloc((size_t)maxq + 2, 1);
    if (wanted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nq; i++)
        if (q[i] >= 0)
            wanted[q[i]] = 1; /* unknown query tokens (negative ids) match nothing */
    const int64_t *s = (const int64_t *)st.buf, *p = (const int64_t *)ps.buf;
    const int32_t *u = (const int32_t *)ids.buf;
    double *o = (double *)out.buf;
    Py_ssize_t bad = -1;
    for (Py_ssize_t j = 0; j < m; j++) {
        int64_t at = p[j];
        if (at < 0 || at >= nst - 1 || s[at] < 0 || s[at + 1] > nids) { /* nst - 1: no overflow */
            bad = j;
            break;
        }
        int64_t a = s[at], b = s[at + 1];
        if (b <= a || nq == 0) {
            o[j] = 0.0;
            continue;
        }
        int64_t common = 0;
        for (int64_t i = a; i < b; i++)
            common += u[i] >= 0 && u[i] <= maxq && wanted[u[i]];
        int64_t size = b - a;
        o[j] = (double)common / (double)(size > nq ? size : nq);
    }
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "position %zd has no words in the index", bad);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(wanted);
    return released(result, bufs, got);
}

/* The order day_evidence groups by: day ascending, then score descending, then index. */
typedef struct {
    int32_t day;
    double score;
    Py_ssize_t i;
} DayEntry;

static int
day_entry_cmp(const void *x, const void *y)
{
    const DayEntry *a = x, *b = y;
    if (a->day != b->day)
        return a->day < b->day ? -1 : 1;
    if (a->score != b->score) /* the higher first (NaN never reaches here: refused below) */
        return a->score > b->score ? -1 : 1;
    return a->i < b->i ? -1 : (a->i > b->i);
}

static PyObject *
day_evidence(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    Py_buffer dy, sc, out;
    Py_buffer *bufs[3] = {&dy, &sc, &out};
    const int writable[3] = {0, 0, 1};
    Py_ssize_t top;
    if (!PyArg_ParseTuple(args, "OOnO", &objs[0], &objs[1], &top, &objs[2]))
        return NULL;
    int got = take_buffers(objs, bufs, writable, 3);
    PyObject *result = NULL;
    DayEntry *e = NULL;
    if (got < 3)
        goto done;
    if (!want(&dy, "days", 'i', 4) || !want_f64(&sc, "scores") || !want_f64(&out, "out"))
        goto done;
    Py_ssize_t n = dy.shape[0];
    if (top < 1) {
        PyErr_Format(PyExc_ValueError, "top must be at least 1, got %zd", top);
        goto done;
    }
    if (sc.shape[0] != n || out.shape[0] != n) {
        PyErr_SetString(PyExc_ValueError, "days, scores and out must have one length");
        goto done;
    }
    const int32_t *d = (const int32_t *)dy.buf;
    const double *s = (const double *)sc.buf;
    double *o = (double *)out.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] != s[i]) {
            PyErr_SetString(PyExc_ValueError, "a score is NaN");
            goto done;
        }
    e = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(DayEntry));
    if (e == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        e[i].day = d[i];
        e[i].score = s[i];
        e[i].i = i;
    }
    qsort(e, (size_t)n, sizeof(DayEntry), day_entry_cmp);
    for (Py_ssize_t a = 0; a < n;) {
        Py_ssize_t b = a;
        while (b < n && e[b].day == e[a].day)
            b++;
        double sum = 0.0;
        Py_ssize_t used = 0;
        for (Py_ssize_t i = a; i < b && used < top; i++, used++)
            sum += e[i].score;
        double mean = sum / (double)used;
        for (Py_ssize_t i = a; i < b; i++)
            o[e[i].i] = mean;
        a = b;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(e);
    return released(result, bufs, got);
}

/* The index of the first element of a (ascending, n long) not below v. */
static inline Py_ssize_t
lower_bound(const int64_t *a, Py_ssize_t n, int64_t v)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static PyObject *
neighbour_lift(PyObject *self, PyObject *args)
{
    PyObject *objs[6];
    Py_buffer sd, at, pv, nx, sc, out;
    Py_buffer *bufs[6] = {&sd, &at, &pv, &nx, &sc, &out};
    const int writable[6] = {0, 0, 0, 0, 0, 1};
    double wp, wn;
    if (!PyArg_ParseTuple(args, "OOOOOddO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &wp, &wn,
                          &objs[5]))
        return NULL;
    int got = take_buffers(objs, bufs, writable, 6);
    PyObject *result = NULL;
    if (got < 6)
        goto done;
    if (!want(&sd, "scored", 'i', 8) || !want(&at, "ranked_at", 'i', 8) || !want(&pv, "prev", 'i', 8) ||
        !want(&nx, "next", 'i', 8) || !want_f64(&sc, "scores") || !want_f64(&out, "out"))
        goto done;
    Py_ssize_t ns = sd.shape[0], m = at.shape[0];
    if (pv.shape[0] != m || nx.shape[0] != m || sc.shape[0] != ns || out.shape[0] != ns) {
        PyErr_SetString(PyExc_ValueError, "prev and next must match ranked_at, scores and out scored");
        goto done;
    }
    const int64_t *scored = (const int64_t *)sd.buf, *r = (const int64_t *)at.buf;
    const int64_t *prev = (const int64_t *)pv.buf, *next = (const int64_t *)nx.buf;
    const double *s = (const double *)sc.buf;
    double *o = (double *)out.buf;
    memcpy(o, s, (size_t)ns * sizeof(double));
    for (Py_ssize_t j = 0; j < m; j++) {
        int64_t i = r[j];
        if (i < 0 || i >= ns) {
            PyErr_Format(PyExc_IndexError, "ranked_at[%zd] is outside the scored", j);
            goto done;
        }
        double me = s[i], lifts[2] = {0.0, 0.0};
        const int64_t around[2] = {prev[j], next[j]};
        const double w[2] = {wp, wn};
        for (int side = 0; side < 2; side++) {
            if (around[side] < 0)
                continue;
            Py_ssize_t k = lower_bound(scored, ns, around[side]);
            if (k >= ns || scored[k] != around[side]) {
                PyErr_Format(PyExc_ValueError, "a neighbour of ranked_at[%zd] is not scored", j);
                goto done;
            }
            double x = s[k] - me; /* np.maximum(0.0, x): a NaN stays NaN */
            lifts[side] = w[side] * (x != x ? x : (x > 0.0 ? x : 0.0));
        }
        o[i] = me + (lifts[0] + lifts[1]);
    }
    result = Py_NewRef(Py_None);
done:
    return released(result, bufs, got);
}

static PyMethodDef methods[] = {
    {"scan_runs", scan_runs, METH_VARARGS,
     "scan_runs(acc, lengths, c0, c1, runs, k1p1, out_positions, out_scores) -> count: acc set to 0,\n"
     "then for each (pos, tf, w) of runs, in order, acc[pos] += tf*w*k1p1 / (lengths[pos]*c1 + c0 + tf)\n"
     "in float32; the best positive scores written into the outputs as top_positive does."},
    {"postings_misfit", postings_misfit, METH_VARARGS,
     "postings_misfit(starts, pos, tf, n) -> None or why: every row of the CSR postings ascends\n"
     "strictly within [0, n) and has positive frequencies."},
    {"top_positive", top_positive, METH_VARARGS,
     "top_positive(scores, out_positions, out_scores) -> count: the best positive scores (as many as\n"
     "out_positions holds), best first, ties to the earlier index, written into the two outputs."},
    {"echo_share", echo_share, METH_VARARGS,
     "echo_share(user_starts, user_ids, positions, query_ids, out): per position, the query's ids among\n"
     "its user words over max(their count, the query's), as float64 (0 without user words)."},
    {"day_evidence", day_evidence, METH_VARARGS,
     "day_evidence(days, scores, top, out): per entry, the mean of the top best scores of its day\n"
     "(summed best first), as float64."},
    {"neighbour_lift", neighbour_lift, METH_VARARGS,
     "neighbour_lift(scored, ranked_at, prev, next, scores, w_prev, w_next, out): scores with each\n"
     "ranked one lifted towards its neighbours' (w * max(0, theirs - its own)), into out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
