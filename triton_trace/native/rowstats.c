/* The per-program math values' statistics in one pass (record/checks/mathvalues_ops.py, through rowstats.py):
   per row of a float array (the leading program axis), its NaN, +Inf and -Inf counts, its finite minimum and
   maximum and its first non-finite element. numpy took a cast (fp16), a minimum and a maximum pass per op; the
   results here are the same numbers (tests/record/test_math_values_native.py compares them).

   Every float format is read as integers: a value's bits v, as a signed integer s, give the ordering key
   s ^ ((s >> (W - 1)) & MAG) (sign-magnitude to two's complement: the keys of any two values order as the
   values do, -0.0 just below +0.0). Non-finite values have the largest magnitudes of their sign, so a row is
   finite exactly where its largest key is below +Inf's and its smallest above -Inf's: the common case is one
   integer min/max pass (vectorised). Only a row that fails it is walked again, element by element.

   Formats: 0 float16, 1 bfloat16 (its uint16 bits, as Triton's interpreter holds it), 2 float32, 3 float64. */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")           /* (built with -O2, whose cost model leaves min/max reductions scalar) */
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TT_X86 1
#endif

enum { COUNT, NAN_, PINF, NINF, LANE, KIND, FIRST, NCOL };
#define MAXDIM 32

/* the fast pass over n contiguous or strided elements: the running smallest and largest key */
#define DEFINE_KEYS(W, ATTR, SUF)                                                                              \
ATTR static void keys##W##_##SUF(const char *p, int64_t n, int64_t step, int##W##_t *mn, int##W##_t *mx) {    \
    int##W##_t a = *mn, b = *mx;                                                                               \
    const int##W##_t mag = (int##W##_t)(((uint##W##_t)1 << (W - 1)) - 1);                                      \
    if (step == (int64_t)sizeof(int##W##_t)) {                                                                 \
        const int##W##_t *q = (const int##W##_t *)p;                                                           \
        for (int64_t i = 0; i < n; i++) {                                                                      \
            int##W##_t s = q[i];                                                                               \
            int##W##_t k = (int##W##_t)(s ^ ((int##W##_t)(s >> (W - 1)) & mag));                             \
            a = k < a ? k : a;                                                                                 \
            b = k > b ? k : b;                                                                                 \
        }                                                                                                      \
    } else {                                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                                      \
            int##W##_t s;                                                                                      \
            memcpy(&s, p + i * step, sizeof s);                                                                \
            int##W##_t k = (int##W##_t)(s ^ ((int##W##_t)(s >> (W - 1)) & mag));                             \
            a = k < a ? k : a;                                                                                 \
            b = k > b ? k : b;                                                                                 \
        }                                                                                                      \
    }                                                                                                          \
    *mn = a;                                                                                                   \
    *mx = b;                                                                                                   \
}

DEFINE_KEYS(16, , base)
DEFINE_KEYS(32, , base)
DEFINE_KEYS(64, , base)
#ifdef TT_X86
DEFINE_KEYS(16, __attribute__((target("avx2"))), avx2)
DEFINE_KEYS(32, __attribute__((target("avx2"))), avx2)
DEFINE_KEYS(64, __attribute__((target("avx2"))), avx2)
#endif

static int has_avx2(void) {
#ifdef TT_X86
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return known;
#else
    return 0;
#endif
}

/* a key back to its value, as a double (exact for every format); zero's sign is dropped: numpy's minimum of
   0.0 and -0.0 is whichever its reduction order met last, so the range keeps neither */
static double value_of(int64_t key, int fmt) {
    int w = fmt <= 1 ? 16 : fmt == 2 ? 32 : 64;
    uint64_t mag = (w == 64 ? ~(uint64_t)0 >> 1 : ((uint64_t)1 << (w - 1)) - 1);
    uint64_t width = w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
    uint64_t bits = (uint64_t)(key < 0 ? (key ^ (int64_t)mag) : key) & width;   /* (the key is its own inverse) */
    double v;
    if (fmt == 3) {
        memcpy(&v, &bits, 8);
    } else if (fmt == 2 || fmt == 1) {
        uint32_t b32 = (uint32_t)(fmt == 1 ? bits << 16 : bits);
        float f;
        memcpy(&f, &b32, 4);
        v = f;
    } else {                                     /* float16: sign, 5 exponent bits (bias 15), 10 mantissa */
        uint64_t sign = (bits >> 15) & 1, e = (bits >> 10) & 31, m = bits & 1023;
        if (e == 0) {
            v = (double)m * 0x1p-24;
        } else {
            uint64_t d = (e - 15 + 1023) << 52 | m << 42;
            memcpy(&v, &d, 8);
        }
        if (sign) v = -v;
    }
    return v == 0.0 ? 0.0 : v;
}

static const int64_t EXPMASK[4] = {0x7C00, 0x7F80, 0x7F800000, 0x7FF0000000000000LL};

static int64_t load_key(const char *p, int w, uint64_t *bits) {
    if (w == 16) { int16_t s; memcpy(&s, p, 2); *bits = (uint16_t)s; return s ^ ((s >> 15) & 0x7FFF); }
    if (w == 32) { int32_t s; memcpy(&s, p, 4); *bits = (uint32_t)s; return s ^ ((s >> 31) & 0x7FFFFFFF); }
    int64_t s;
    memcpy(&s, p, 8);
    *bits = (uint64_t)s;
    return s ^ ((s >> 63) & INT64_MAX);
}

/* A row that is not all finite, element by element in row-major order: counts, finite range, first lane. */
static void walk(const char *row, int nd, const int64_t *shape, const int64_t *strides, int fmt, int64_t scale,
                 int64_t *out, double *lo, double *hi) {
    int w = fmt <= 1 ? 16 : fmt == 2 ? 32 : 64;
    uint64_t expm = (uint64_t)EXPMASK[fmt], magm = (w == 64 ? ~(uint64_t)0 >> 1 : ((uint64_t)1 << (w - 1)) - 1);
    int64_t idx[MAXDIM] = {0};
    int64_t kmin = INT64_MAX, kmax = INT64_MIN, nan = 0, pinf = 0, ninf = 0, first = -1, kind = 0, flat = 0;
    int64_t inner = nd ? shape[nd - 1] : 1, step = nd ? strides[nd - 1] : 0;
    for (;;) {
        const char *p = row;
        for (int d = 0; d < nd - 1; d++) p += idx[d] * strides[d];
        for (int64_t i = 0; i < inner; i++, flat++) {
            uint64_t bits;
            int64_t key = load_key(p + i * step, w, &bits);
            uint64_t m = bits & magm;
            if (m < expm) {
                kmin = key < kmin ? key : kmin;
                kmax = key > kmax ? key : kmax;
                continue;
            }
            int k = m > expm ? 1 : (bits & ~magm) ? 3 : 2;
            nan += k == 1;
            pinf += k == 2;
            ninf += k == 3;
            if (first < 0) { first = flat; kind = k; }
        }
        int d = nd - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    out[NAN_] = nan * scale;
    out[PINF] = pinf * scale;
    out[NINF] = ninf * scale;
    out[LANE] = first;
    out[KIND] = kind;
    *lo = kmin <= kmax ? value_of(kmin, fmt) : 1.0 / 0.0;
    *hi = kmin <= kmax ? value_of(kmax, fmt) : -1.0 / 0.0;
}

#define FAST_ROW(W)                                                                                            \
    do {                                                                                                       \
        int##W##_t a = (int##W##_t)(((uint##W##_t)1 << (W - 1)) - 1), b = (int##W##_t)-a - 1;                \
        for (;;) {                                                                                             \
            const char *p = row;                                                                               \
            for (int d = 0; d < nd - 1; d++) p += idx[d] * st[d];                                             \
            if (avx2) keys##W##_avx2(p, inner, step, &a, &b); else keys##W##_base(p, inner, step, &a, &b);   \
            int d = nd - 2;                                                                                    \
            for (; d >= 0; d--) {                                                                              \
                if (++idx[d] < sh[d]) break;                                                                   \
                idx[d] = 0;                                                                                    \
            }                                                                                                  \
            if (d < 0) break;                                                                                  \
        }                                                                                                      \
        kmin = a;                                                                                              \
        kmax = b;                                                                                              \
    } while (0)

#ifndef TT_X86
#define keys16_avx2 keys16_base
#define keys32_avx2 keys32_base
#define keys64_avx2 keys64_base
#endif

/* ``rows`` rows of ``data`` (row stride ``row_stride`` bytes), each of ``ndim`` further dimensions (``shape``,
   ``strides`` in bytes; a stride-0 dimension is read once, its counts scaled); ``out`` is rows x 7 int64
   (COUNT, NAN, PINF, NINF, LANE: the first non-finite element's index in the row-major order of the row's
   distinct values, -1 for none; KIND: 1 NaN, 2 +Inf, 3 -Inf, 0 none; FIRST: -1), ``lo``/``hi`` the finite
   minimum and maximum (+inf/-inf for none). Returns the rows that held a non-finite value, -1 for a bad
   argument. */
int64_t tt_row_stats(const char *data, int64_t fmt, int64_t rows, int64_t row_stride, int64_t ndim,
                     const int64_t *shape, const int64_t *strides, int64_t *out, double *lo, double *hi) {
    if (fmt < 0 || fmt > 3 || ndim < 0 || ndim > MAXDIM || rows < 0) return -1;
    int w = fmt <= 1 ? 16 : fmt == 2 ? 32 : 64;
    int64_t sh[MAXDIM], st[MAXDIM], scale = 1, distinct = 1;
    int nd = 0;
    /* the distinct values' dimensions, merged where one steps evenly into the next (row-major order kept) */
    for (int64_t d = 0; d < ndim; d++) {
        if (shape[d] == 0) nd = -1;
        if (nd < 0) break;
        if (strides[d] == 0 || shape[d] == 1) { scale *= shape[d]; continue; }
        if (nd > 0 && st[nd - 1] == strides[d] * shape[d]) {
            sh[nd - 1] *= shape[d];
            st[nd - 1] = strides[d];
        } else {
            sh[nd] = shape[d];
            st[nd] = strides[d];
            nd++;
        }
    }
    if (nd < 0) return -1;
    for (int d = 0; d < nd; d++) distinct *= sh[d];
    int64_t inner = nd ? sh[nd - 1] : 1, step = nd ? st[nd - 1] : w / 8;
    int avx2 = has_avx2(), bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        const char *row = data + r * row_stride;
        int64_t idx[MAXDIM] = {0}, kmin, kmax;
        if (w == 16) FAST_ROW(16); else if (w == 32) FAST_ROW(32); else FAST_ROW(64);
        int64_t *o = out + r * NCOL;
        int64_t pinf_key = EXPMASK[fmt];
        o[COUNT] = distinct * scale;
        o[NAN_] = o[PINF] = o[NINF] = o[KIND] = 0;
        o[LANE] = o[FIRST] = -1;
        if (kmax < pinf_key && kmin > -pinf_key - 1) {
            lo[r] = value_of(kmin, fmt);
            hi[r] = value_of(kmax, fmt);
        } else {
            bad++;
            walk(row, nd, sh, st, (int)fmt, scale, o, lo + r, hi + r);
        }
    }
    return bad;
}
