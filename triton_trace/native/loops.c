/* The cache simulation's loops, compiled once per machine by analysis/native.py (cc -O2, cached on disk) and
   called through ctypes, which lets go of the interpreter lock for the call: the two L2 partitions run on two
   threads. lockstep.py's numpy passes apply the same rules (tests/test_cache_jit.py compares every count).

   L2 state: one row per set, of the set's integer type T (int32 where every line fits, else int64):
   tags[ways], stamps[ways], valid | dirty << 4 per way[ways], then the set's previous access (line, kind), its
   dirty lines and its next stamp. An access's kind: sector mask << 3 | read << 2 | write << 1 | copy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AHEAD 16

static inline void prefetch_row(const void *p, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch((const char *)p + b, 1, 1);
}

static const int64_t POP[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};

/* One access to set ``s``: sectors fetched, made dirty, found valid; returns the sectors written back.
   ``dirty_ways`` < 0: no limit on a set's dirty lines. */
#define DEFINE_ONE(T, SUF)                                                                                       \
static inline int64_t one_##SUF(T *st, int64_t row_len, int64_t ways, int64_t s, int64_t tg, int64_t k,      \
                                const uint8_t *widen, int64_t dirty_ways, int64_t *got, int64_t *made,         \
                                int64_t *found) {                                                              \
    T *row = st + s * row_len;                                                                                 \
    int64_t m8 = k >> 3, rd = (k >> 2) & 1;                                                                    \
    if ((int64_t)row[3 * ways] == tg && (int64_t)row[3 * ways + 1] == k) {                                    \
        *got = 0; *made = 0; *found = rd ? POP[m8 & 15] : 0;   /* the set's previous access again */          \
        return 0;                                                                                              \
    }                                                                                                          \
    row[3 * ways] = (T)tg;                                                                                     \
    row[3 * ways + 1] = (T)k;                                                                                  \
    int64_t way = -1;                                                                                          \
    for (int64_t w = 0; w < ways; w++)                                                                         \
        if ((int64_t)row[w] == tg) { way = w; break; }                                                         \
    int hit = way >= 0;                                                                                        \
    if (!hit) {                      /* an empty way (stamp -1), else the least recently used; ties: first */  \
        T best = row[ways];                                                                                    \
        way = 0;                                                                                               \
        for (int64_t w = 1; w < ways; w++)                                                                     \
            if (row[ways + w] < best) { best = row[ways + w]; way = w; }                                      \
    }                                                                                                          \
    int64_t cp = k & 1, wr = (k >> 1) & 1;                                                                     \
    int drop = wr == 1 && cp == 1;                                                                             \
    int64_t vd = (int64_t)row[2 * ways + way];                                                                 \
    int64_t df = vd >> 4;                                                                                      \
    int64_t evicted = 0;                                                                                       \
    if (!hit && !drop) evicted += POP[df & 15];                                                                \
    int64_t v = hit ? (vd & 15) : 0, d = hit ? df : 0;                                                         \
    int64_t rm = rd ? m8 : 0, wm = (wr && !cp) ? m8 : 0;                                                       \
    int64_t fetch = (int64_t)widen[rm & ~v & 15] & ~v & 15;                                                    \
    *got = cp ? 0 : POP[fetch];                                                                                \
    *made = POP[wm & ~d & 15];                                                                                 \
    *found = POP[rm & v & 15];                                                                                 \
    T stamp = row[3 * ways + 3];                                                                               \
    row[3 * ways + 3] = stamp + 1;                                                                             \
    int64_t new_d;                                                                                             \
    if (drop) {                                                                                                \
        if (hit) {                   /* a write drops the other partition's copy (where there is none: nothing) */ \
            row[way] = -1; row[ways + way] = -1; row[2 * ways + way] = 0;                                     \
        }                                                                                                      \
        new_d = (int64_t)row[2 * ways + way] >> 4;                                                             \
    } else {                                                                                                   \
        new_d = d | wm;                                                                                        \
        row[way] = (T)tg;                                                                                      \
        row[ways + way] = stamp;                                                                               \
        row[2 * ways + way] = (T)((v | fetch | m8) | (new_d << 4));                                            \
    }                                                                                                          \
    if (dirty_ways >= 0) {                                                                                     \
        row[3 * ways + 2] += (new_d != 0 ? 1 : 0) - (df != 0 ? 1 : 0);                                         \
        if ((int64_t)row[3 * ways + 2] > dirty_ways) {   /* clean the least recently used dirty line */       \
            int64_t pick = -1;                                                                                 \
            for (int64_t w = 0; w < ways; w++)                                                                 \
                if (((int64_t)row[2 * ways + w] >> 4) != 0 && (pick < 0 || row[ways + w] < row[ways + pick]))  \
                    pick = w;                                                                                  \
            evicted += POP[((int64_t)row[2 * ways + pick] >> 4) & 15];                                        \
            row[2 * ways + pick] &= 15;                                                                        \
            row[3 * ways + 2] -= 1;                                                                            \
        }                                                                                                      \
    }                                                                                                          \
    return evicted;                                                                                            \
}

/* A line's home set (lockstep.L2._hash, in the same wrapping 64-bit arithmetic): the slot by Fibonacci
   hashing, the partition by an independent hash bit. */
static inline int64_t home_set(int64_t line, int64_t per_part) {
    uint64_t u = (uint64_t)line;
    uint64_t slot = ((u * 0x9E3779B97F4A7C15ull) >> 40) % (uint64_t)per_part;
    uint64_t home = (u * 0xC2B2AE3D27D4EB4Full) >> 63;
    return (int64_t)(home * (uint64_t)per_part + slot);
}

/* Accesses applied in order (lockstep.L2.run's counts per access); returns the sectors written back. */
#define DEFINE_STEPS(T, SUF)                                                                                     \
int64_t tt_steps_##SUF(T *st, int64_t row_len, const T *sets, const T *line, const uint8_t *kind, int64_t n,   \
                       const uint8_t *widen, int64_t dirty_ways, int64_t *got, int64_t *made, int64_t *hit_s) { \
    int64_t ways = (row_len - 4) / 3, evicted = 0;                                                             \
    for (int64_t i = 0; i < n; i++)                                                                            \
        evicted += one_##SUF(st, row_len, ways, (int64_t)sets[i], (int64_t)line[i], (int64_t)kind[i], widen,   \
                             dirty_ways, got + i, made + i, hit_s + i);                                        \
    return evicted;                                                                                            \
}

/* A window's stream entries in time order (cache._l2_slice): each entry L1 sent sectors on for looks its line
   up at its home set (hashed here), and a far one then in its near partition (a copy). ``part`` >= 0: only the lookups in that
   partition's sets (the partitions share no set: two threads take one each; an entry's lookups and hits are
   counted by its near partition, its DRAM sectors by its home). Adds DRAM sectors per row to read_s/write_s and
   (read lookups, read hits, write lookups, write hits) to totals; returns the sectors written back. */
#define DEFINE_ENTRIES(T, SUF)                                                                                   \
int64_t tt_entries_##SUF(T *st, int64_t row_len, const int64_t *row, const T *line,                          \
                         const uint8_t *mask, const int64_t *near, const uint8_t *rw, int64_t n, int64_t per_part, \
                         const uint8_t *widen, int64_t dirty_ways, int64_t part, int64_t *read_s, int64_t *write_s, \
                         int64_t *totals) {                                                                    \
    int64_t ways = (row_len - 4) / 3, evicted = 0, got, made, found;                                          \
    for (int64_t i = 0; i < n; i++) {                                                                          \
        if (i + AHEAD < n) {         /* sets are hashed: each lookup is a random row, fetched ahead of time */ \
            int64_t h = home_set((int64_t)line[i + AHEAD], per_part);                                          \
            prefetch_row(st + h * row_len, row_len * (int64_t)sizeof(T));                                      \
        }                                                                                                      \
        if (mask[i] == 0) continue;                  /* served by L1 entirely */                                \
        int64_t r = row[i];                                                                                    \
        int64_t hs = home_set((int64_t)line[i], per_part);                                                     \
        int64_t hp = hs / per_part;                                                                            \
        int far = near[r] != hp;                                                                               \
        int mine_home = part < 0 || hp == part, mine_near = part < 0 || near[r] == part;                       \
        if (!(mine_home || mine_near)) continue;                                                               \
        int64_t m = (int64_t)mask[i] & 15;                                                                     \
        int64_t k = (m << 3) | (int64_t)rw[r];                                                                 \
        found = 0;                                                                                             \
        if (mine_home) {                                                                                       \
            evicted += one_##SUF(st, row_len, ways, hs, (int64_t)line[i], k, widen, dirty_ways, &got, &made, &found); \
            read_s[r] += got;                                                                                  \
            write_s[r] += made;                                                                                \
        }                                                                                                      \
        if (!mine_near) continue;                                                                              \
        if (far) {                                                                                             \
            int64_t ps = hs >= per_part ? hs - per_part : hs + per_part;                                       \
            evicted += one_##SUF(st, row_len, ways, ps, (int64_t)line[i], k | 1, widen, dirty_ways, &got, &made, &found); \
        }                                                                                                      \
        int64_t sec = POP[m];                                                                                  \
        if ((k >> 2) & 1) { totals[0] += sec; totals[1] += found; }                                           \
        if ((k >> 1) & 1) { totals[2] += sec; totals[3] += sec; }                                             \
    }                                                                                                          \
    return evicted;                                                                                            \
}

/* streaming.plan's closed form for a stream (stream indices t, in issue order) in which no line enters L2
   twice: every lookup misses, and a dirty line is written back when ``ways`` more lines, or ``dirty_ways``
   more dirty ones, enter its set after it. First pass: each entry's line (its tensor's base added) and home
   set, stopping at the first line seen twice, and the counts; second: fills counted down. Returns the sectors
   written back while the kernel ran; -2 when a line repeats (the counts are then partial: discard them), -3
   when a line falls outside 0..lines, -1 when out of memory. */
#define DEFINE_OPEN(X, XS, R, RS, S, SS, T, TS)                                                                  \
int64_t tt_open_##XS##_##RS##_##SS##_##TS(const X *t, int64_t n, const R *s_row, const S *s_line,             \
                                   const uint8_t *s_mask, const T *base, int64_t lines, const int64_t *near,    \
                                   const uint8_t *rw, int64_t per_part, const uint8_t *widen, int64_t ways,     \
                                   int64_t dirty_ways, int64_t n_sets, int64_t *read_s, int64_t *write_s,       \
                                   int64_t *totals) {                                                          \
    uint8_t *seen = calloc((size_t)(lines + 1), 1);                                                            \
    int64_t *fills = calloc((size_t)(2 * n_sets > 0 ? 2 * n_sets : 1), sizeof(int64_t));                       \
    int64_t *home = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));                                         \
    int64_t out = -1;                                                                                          \
    if (!seen || !fills || !home) goto done;                                                                   \
    int64_t *dirty_fills = fills + n_sets;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                                          \
        int64_t j = (int64_t)t[i], m = (int64_t)s_mask[j] & 15;                                                \
        home[i] = -1;                                                                                          \
        if (!m) continue;                            /* asks for no sector: never reaches L2 */                \
        int64_t r = (int64_t)s_row[j], ln = (int64_t)s_line[j] + (int64_t)base[r];                             \
        if (ln < 0 || ln > lines) { out = -3; goto done; }                                                     \
        if (seen[ln]) { out = -2; goto done; }                                                                 \
        seen[ln] = 1;                                                                                          \
        int64_t h = home_set(ln, per_part), k = (int64_t)rw[r], sec = POP[m];                                  \
        home[i] = h;                                                                                           \
        if (k & 4) { read_s[r] += POP[(int64_t)widen[m] & 15]; totals[0] += sec; }                            \
        if (k & 2) { write_s[r] += sec; totals[2] += sec; totals[3] += sec; dirty_fills[h] += 1; }            \
        fills[h] += 1;                                                                                         \
        if (near[r] != h / per_part && !(k & 2))     /* a far read's copy in the near partition */             \
            fills[h >= per_part ? h - per_part : h + per_part] += 1;                                           \
    }                                                                                                          \
    out = 0;                                                                                                   \
    for (int64_t i = 0; i < n; i++) {                /* fills counted down: what is left enters after */       \
        int64_t h = home[i];                                                                                   \
        if (h < 0) continue;                                                                                   \
        int64_t j = (int64_t)t[i], r = (int64_t)s_row[j], k = (int64_t)rw[r];                                  \
        int64_t sec = (k & 2) ? POP[(int64_t)s_mask[j] & 15] : 0;                                              \
        fills[h] -= 1;                                                                                         \
        if (sec) {                                                                                             \
            dirty_fills[h] -= 1;                                                                               \
            if (fills[h] >= ways || dirty_fills[h] >= dirty_ways) out += sec;                                  \
        }                                                                                                      \
        if (near[r] != h / per_part && !(k & 2))                                                               \
            fills[h >= per_part ? h - per_part : h + per_part] -= 1;                                           \
    }                                                                                                          \
done:                                                                                                          \
    free(seen); free(fills); free(home);                                                                       \
    return out;                                                                                                \
}

/* A window's entries (stream indices t) gathered in one pass: each one's row, line in the simulated address
   space (its tensor's base added) and sector mask; writes the lowest and highest line to lo_hi. */
#define DEFINE_GATHER(X, XS, R, RS, S, SS, T, SUF)                                                               \
void tt_gather_##XS##_##RS##_##SS##_##SUF(const X *t, int64_t n, const R *s_row, const S *s_line,             \
                                   const uint8_t *s_mask, const T *base, int64_t *row, T *line, uint8_t *mask,  \
                                   int64_t *lo_hi) {                                                           \
    int64_t lo = (int64_t)1 << 62, hi = -1;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                                          \
        int64_t j = (int64_t)t[i], r = (int64_t)s_row[j];                                                      \
        int64_t ln = (int64_t)s_line[j] + (int64_t)base[r];                                                    \
        row[i] = r; line[i] = (T)ln; mask[i] = s_mask[j];                                                      \
        if (ln < lo) lo = ln;                                                                                  \
        if (ln > hi) hi = ln;                                                                                  \
    }                                                                                                          \
    lo_hi[0] = lo; lo_hi[1] = hi;                                                                              \
}
/* both loops over a window's stream indices, for each type of the indices, the stream's rows and lines, and
   the lines out */
#define DEFINE_BY_STREAM(X, XS, R, RS, S, SS, T, TS)                                                             \
    DEFINE_GATHER(X, XS, R, RS, S, SS, T, TS) DEFINE_OPEN(X, XS, R, RS, S, SS, T, TS)
#define DEFINE_BY_LINES(X, XS, R, RS)                                                                            \
    DEFINE_BY_STREAM(X, XS, R, RS, int32_t, i32, int32_t, i32)                                                 \
    DEFINE_BY_STREAM(X, XS, R, RS, int32_t, i32, int64_t, i64)                                                 \
    DEFINE_BY_STREAM(X, XS, R, RS, int64_t, i64, int32_t, i32)                                                 \
    DEFINE_BY_STREAM(X, XS, R, RS, int64_t, i64, int64_t, i64)
#define DEFINE_GATHERS(X, XS)                                                                                    \
    DEFINE_BY_LINES(X, XS, int32_t, i32) DEFINE_BY_LINES(X, XS, int64_t, i64)

DEFINE_ONE(int32_t, i32)
DEFINE_ONE(int64_t, i64)
DEFINE_STEPS(int32_t, i32)
DEFINE_STEPS(int64_t, i64)
DEFINE_ENTRIES(int32_t, i32)
DEFINE_ENTRIES(int64_t, i64)
DEFINE_GATHERS(int32_t, i32)
DEFINE_GATHERS(int64_t, i64)

/* cache._l1_filter for entries in time order (row: each one's row; at: its line's place in a table of n_lines;
   owner, wr, load per row; L1s numbered 0..n_owners-1): a load's sectors that a load of the same L1 and line
   brought in since that line's last write stay in L1; an L1 whose loads in the window outgrow it filters
   nothing. Fills res (the sectors sent on); returns the load sectors L1 served, or -1 when out of memory.
   Entries are taken L1 by L1 (a counting sort keeps time order within each), each L1's lines keeping their
   state in one table stamped with the L1 it belongs to (never cleared between L1s). */
static int64_t l1_(const int64_t *row, const int32_t *at32, const int64_t *at64, int64_t n, int64_t n_lines, const int64_t *owner,
              int64_t n_owners, const uint8_t *mask, const uint8_t *wr, const uint8_t *load, int64_t line_bytes,
              int64_t l1_bytes, uint8_t *res) {
    int64_t *start = calloc((size_t)(n_owners + 1), sizeof(int64_t));
    int64_t *nxt = malloc((size_t)(n_owners > 0 ? n_owners : 1) * sizeof(int64_t));
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t *stamp = malloc((size_t)(n_lines > 0 ? n_lines : 1) * sizeof(int64_t));
    uint8_t *state = malloc((size_t)(n_lines > 0 ? n_lines : 1));
    int64_t served = -1;
    if (!start || !nxt || !order || !stamp || !state) goto done;
    for (int64_t i = 0; i < n; i++) start[owner[row[i]] + 1] += 1;
    for (int64_t o = 0; o < n_owners; o++) start[o + 1] += start[o];
    memcpy(nxt, start, (size_t)n_owners * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) { int64_t o = owner[row[i]]; order[nxt[o]++] = i; }
    for (int64_t a = 0; a < n_lines; a++) stamp[a] = -1;
    served = 0;
    for (int64_t o = 0; o < n_owners; o++) {
        int64_t lines = 0;
        for (int64_t j = start[o]; j < start[o + 1]; j++) {
            int64_t i = order[j], r = row[i], a = at32 ? (int64_t)at32[i] : at64[i], m = mask[i], acc;
            int first = stamp[a] != o;               /* the L1's first access to the line */
            if (first) { stamp[a] = o; acc = 0; }
            else { int64_t s = state[a]; acc = (s >> 4) ? 0 : (s & 15); }   /* loaded again after a write: afresh */
            if (load[r]) { lines += first; res[i] = (uint8_t)(m & ~acc); acc |= m & 15; }
            else res[i] = (uint8_t)m;
            state[a] = (uint8_t)(acc | ((int64_t)(wr[r] != 0) << 4));
        }
        int outgrown = lines * line_bytes > l1_bytes;   /* its loads outgrow the L1: nothing filtered */
        for (int64_t j = start[o]; j < start[o + 1]; j++) {
            int64_t i = order[j];
            if (outgrown) res[i] = mask[i];
            else served += POP[mask[i] & ~res[i] & 15];
        }
    }
done:
    free(start); free(nxt); free(order); free(stamp); free(state);
    return served;
}

int64_t tt_l1_i32(const int64_t *row, const int32_t *at, int64_t n, int64_t n_lines, const int64_t *owner,
                  int64_t n_owners, const uint8_t *mask, const uint8_t *wr, const uint8_t *load, int64_t line_bytes,
                  int64_t l1_bytes, uint8_t *res) {
    return l1_(row, at, NULL, n, n_lines, owner, n_owners, mask, wr, load, line_bytes, l1_bytes, res);
}

int64_t tt_l1_i64(const int64_t *row, const int64_t *at, int64_t n, int64_t n_lines, const int64_t *owner,
                  int64_t n_owners, const uint8_t *mask, const uint8_t *wr, const uint8_t *load, int64_t line_bytes,
                  int64_t l1_bytes, uint8_t *res) {
    return l1_(row, NULL, at, n, n_lines, owner, n_owners, mask, wr, load, line_bytes, l1_bytes, res);
}
