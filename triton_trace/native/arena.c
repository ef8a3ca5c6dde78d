/* numpy's data allocator while a launch is traced (arena.py installs it as numpy's memory handler).

   A batched chunk makes large temporaries (loaded blocks, products, masks) and frees them op after op. Through
   glibc, blocks of a few MB and more are mapped fresh and unmapped again, or sit at the top of a heap that is
   trimmed: every one comes back as fresh pages the kernel must zero on first touch, and every unmap stops the
   other threads of the process (BLAS's) to flush their TLBs; on a virtual machine both are slow. Here freed
   large blocks are kept and handed to the next request they can hold (split where much larger), so a chunk's
   temporaries reuse pages it already touched. Small blocks go to malloc. Each block carries a header before the data saying
   how it was allocated, since numpy frees an array through the handler that allocated it, whenever that is. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* numpy's PyDataMem_Handler, version 1 (numpy/ndarraytypes.h) */
typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} tt_allocator;
typedef struct {
    char name[127];
    uint8_t version;
    tt_allocator allocator;
} tt_handler;

#define SMALL_HEAD 16                    /* malloc's alignment kept */
#define BIG_HEAD 64                      /* a cache line: large data stays 64-byte aligned */
#define BIG ((size_t)1 << 20)            /* requests from here on are mapped and cached */
#define PAGE ((size_t)4096)
#define HUGE ((size_t)4 << 20)           /* numpy's own threshold for huge-page advice */
#define SLOTS 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *blocks[SLOTS];
static size_t sizes[SLOTS];
static int n_free;
static size_t cached, cap;
static size_t linger_cap;                /* while no launch is in: what may stay kept until tt_arena_trim */
static int users;                        /* launches inside tt_arena_enter .. tt_arena_exit */
static int64_t hits, misses;
static int huge_advice;                  /* 1: huge-page advice on large mappings, as numpy gives (arena.py) */

/* header words before the data: [-2] the bytes asked for, [-1] the mapping's length (0: from malloc) */
static void *tag(char *raw, size_t head, size_t asked, size_t mapped) {
    size_t *h = (size_t *)(raw + head);
    h[-1] = mapped;
    h[-2] = asked;
    return raw + head;
}

/* the smallest kept block of at least need bytes, taken off the list (NULL: none). A block much larger than
   need is split at a page boundary: need bytes are handed out, the rest stays kept (munmap frees any run of
   pages of a mapping, so the two parts are returned separately later). */
static char *take(size_t need, size_t *got) {
    int best = -1;
    char *raw = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_free; i++)
        if (sizes[i] >= need && (best < 0 || sizes[i] < sizes[best]))
            best = i;
    if (best >= 0) {
        raw = blocks[best];
        if (sizes[best] - need >= BIG && sizes[best] - need > need / 4) {
            blocks[best] += need;
            sizes[best] -= need;
            cached -= need;
            *got = need;
        } else {
            *got = sizes[best];
            cached -= sizes[best];
            n_free--;
            blocks[best] = blocks[n_free];
            sizes[best] = sizes[n_free];
        }
        hits++;
    } else {
        misses++;
    }
    pthread_mutex_unlock(&mu);
    return raw;
}

static void *big(size_t size, int zero) {
    if (size > (size_t)-1 - BIG_HEAD - PAGE)
        return NULL;
    size_t need = (size + BIG_HEAD + PAGE - 1) & ~(PAGE - 1), got = 0;
    char *raw = take(need, &got);
    if (raw) {
        if (zero)
            memset(raw + BIG_HEAD, 0, size);
        return tag(raw, BIG_HEAD, size, got);
    }
    raw = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (need >= HUGE && __atomic_load_n(&huge_advice, __ATOMIC_RELAXED))
        madvise(raw, need, MADV_HUGEPAGE);
#endif
    return tag(raw, BIG_HEAD, size, need);       /* fresh pages read as zeros */
}

static void give_back(char *raw, size_t mapped) {
    pthread_mutex_lock(&mu);
    if (cached + mapped <= (users > 0 ? cap : linger_cap) && n_free < SLOTS) {
        blocks[n_free] = raw;
        sizes[n_free] = mapped;
        n_free++;
        cached += mapped;
        pthread_mutex_unlock(&mu);
        return;
    }
    pthread_mutex_unlock(&mu);
    munmap(raw, mapped);
}

static void *a_malloc(void *ctx, size_t size) {
    (void)ctx;
    if (size >= BIG)
        return big(size, 0);
    char *raw = malloc(size + SMALL_HEAD);
    return raw ? tag(raw, SMALL_HEAD, size, 0) : NULL;
}

static void *a_calloc(void *ctx, size_t n, size_t el) {
    (void)ctx;
    if (el && n > ((size_t)-1 - BIG_HEAD - PAGE) / el)
        return NULL;
    size_t size = n * el;
    if (size >= BIG)
        return big(size, 1);
    char *raw = calloc(1, size + SMALL_HEAD);
    return raw ? tag(raw, SMALL_HEAD, size, 0) : NULL;
}

static void a_free(void *ctx, void *p, size_t size) {
    (void)ctx;
    (void)size;
    if (!p)
        return;
    size_t mapped = ((size_t *)p)[-1];
    if (mapped)
        give_back((char *)p - BIG_HEAD, mapped);
    else
        free((char *)p - SMALL_HEAD);
}

static void *a_realloc(void *ctx, void *p, size_t size) {
    if (!p)
        return a_malloc(ctx, size);
    size_t *h = (size_t *)p;
    size_t asked = h[-2], mapped = h[-1];
    if (!mapped && size < BIG) {
        char *raw = realloc((char *)p - SMALL_HEAD, size + SMALL_HEAD);
        return raw ? tag(raw, SMALL_HEAD, size, 0) : NULL;
    }
    if (mapped && size + BIG_HEAD <= mapped) {     /* fits the mapping it has */
        h[-2] = size;
        return p;
    }
    void *q = a_malloc(ctx, size);
    if (!q)
        return NULL;
    memcpy(q, p, asked < size ? asked : size);
    a_free(ctx, p, asked);
    return q;
}

/* fork(): a kept block holds no data, so a child may get it as zero pages (MADV_WIPEONFORK) instead of
   sharing its pages with this process, whose next write to each would then copy it (a traced launch forks its
   workers between two chunks, record/parallel/, and goes on writing the temporaries of its next one). The
   lock is held across the fork, so no block changes hands meanwhile; the child takes the lock over as its
   own (the thread that held it in the parent is the one thread it has). */
static void fork_advise(int advice) {
#if defined(MADV_WIPEONFORK) && defined(MADV_KEEPONFORK)
    for (int i = 0; i < n_free; i++)
        madvise(blocks[i], sizes[i], advice);
#else
    (void)advice;
#endif
}

static void before_fork(void) {
    pthread_mutex_lock(&mu);
#ifdef MADV_WIPEONFORK
    fork_advise(MADV_WIPEONFORK);
#endif
}

static void after_fork_parent(void) {
#ifdef MADV_KEEPONFORK
    fork_advise(MADV_KEEPONFORK);
#endif
    pthread_mutex_unlock(&mu);
}

static void after_fork_child(void) {
#ifdef MADV_KEEPONFORK
    fork_advise(MADV_KEEPONFORK);
#endif
    pthread_mutex_init(&mu, NULL);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void register_fork(void) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

tt_handler tt_arena_handler = {"triton_trace_arena", 1, {NULL, a_malloc, a_calloc, a_realloc, a_free}};
const char tt_arena_capsule_name[] = "mem_handler";   /* the capsule name numpy looks for */

/* A launch starts: freed large blocks are kept, up to limit bytes over all launches running. */
void tt_arena_enter(int64_t limit) {
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&mu);
    users++;
    if (limit > 0 && (size_t)limit > cap)
        cap = (size_t)limit;
    pthread_mutex_unlock(&mu);
}

/* Unmap kept blocks, under the lock's protection, until at most keep bytes stay kept (the smallest blocks
   stay: they serve the most requests). Returns the bytes unmapped. */
static int64_t shrink(size_t keep) {
    char *drop[SLOTS];
    size_t len[SLOTS], total = 0;
    int n = 0;
    pthread_mutex_lock(&mu);
    while (cached > keep && n_free > 0) {
        int big = 0;
        for (int i = 1; i < n_free; i++)
            if (sizes[i] > sizes[big])
                big = i;
        drop[n] = blocks[big];
        len[n] = sizes[big];
        total += sizes[big];
        cached -= sizes[big];
        n++;
        n_free--;
        blocks[big] = blocks[n_free];
        sizes[big] = sizes[n_free];
    }
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n; i++)
        munmap(drop[i], len[i]);
    return (int64_t)total;
}

/* A launch ended. When it was the last one in, what is kept beyond linger bytes is unmapped; the rest, and
   blocks freed meanwhile (the launch's recording, dropped before the next launch), up to linger bytes in
   all, wait for the next launch (arena.py calls tt_arena_trim a moment later if none comes; after it, freed
   blocks are unmapped). Returns the bytes unmapped. */
int64_t tt_arena_exit(int64_t linger) {
    pthread_mutex_lock(&mu);
    if (users > 0)
        users--;
    int last = users == 0;
    if (last)
        linger_cap = linger > 0 ? (size_t)linger : 0;
    pthread_mutex_unlock(&mu);
    return last ? shrink(linger_cap) : 0;
}

/* No launch came for a while: unmap everything kept, unless a launch is in now. */
int64_t tt_arena_trim(void) {
    pthread_mutex_lock(&mu);
    int idle = users == 0;
    if (idle)
        linger_cap = 0;
    pthread_mutex_unlock(&mu);
    return idle ? shrink(0) : 0;
}

/* Whether new large mappings get huge-page advice (arena.py decides: by default not, see small_pages). */
void tt_arena_huge(int on) {
    __atomic_store_n(&huge_advice, on ? 1 : 0, __ATOMIC_RELAXED);
}

/* hits, misses (large requests served from the kept blocks or mapped), bytes kept, blocks kept, launches in */
void tt_arena_stats(int64_t *out) {
    pthread_mutex_lock(&mu);
    out[0] = hits;
    out[1] = misses;
    out[2] = (int64_t)cached;
    out[3] = n_free;
    out[4] = users;
    pthread_mutex_unlock(&mu);
}
