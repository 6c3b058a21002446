/*
 * iodiag embedded collector: an LD_PRELOAD interposition library.
 *
 * Every process that loads it (through LD_PRELOAD, inherited by fork, spawn,
 * forkserver, subprocess and Dask workers) writes one binary trace:
 *
 *   <IODIAG_TRACE_DIR>/<host>-<pid>-<start_ns>.iot    4096-byte header + fixed 48-byte records
 *   <IODIAG_TRACE_DIR>/<host>-<pid>-<start_ns>.names  (file id, path) pairs, appended once per path
 *
 * The .iot file is mmap'd MAP_SHARED: a record is in the page cache as soon
 * as it is written, so a process killed by SIGTERM or SIGKILL leaves every
 * record it completed.  A slot is reserved by an atomic add on the header's
 * count and published by writing its op byte last (release store); a reader
 * skips slots whose op is still 0 (in flight at the kill).  The file grows in
 * chunks up to IODIAG_MAX_RECORDS (default 2^32 per process: every record of a long run is kept,
 * on disk); past a cap records are counted as dropped and the header is flagged CAPPED (the job is
 * then partial, and the reader says how many were dropped after which time).
 *
 * Design rules: public glibc symbols (and the 64-bit / __xstat compat
 * variants that wheels built on old glibc call) are interposed and forwarded
 * with dlsym(RTLD_NEXT); our own I/O uses raw syscalls so it is never traced
 * and never recurses; a thread-local guard makes re-entry (signal handlers,
 * calls from inside a hook) pass straight through; calls made before the
 * constructor ran resolve their target lazily.  The record format is
 * mirrored in iodiag/collectors/embedded/format.py.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* glibc declares path arguments nonnull, yet NULL reaches us (statx with
 * AT_EMPTY_PATH); the library is built with -fno-delete-null-pointer-checks
 * so these checks stay. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- format (keep in sync with format.py) ------------------------------ */
#define IOT_MAGIC "IODIAGT1"
#define IOT_VERSION 1
#define IOT_HEADER 4096
#define IOT_CHUNK 65536 /* records added to the file at a time */

enum {
    OPC_NONE = 0, OPC_READ, OPC_WRITE, OPC_OPEN, OPC_CLOSE, OPC_STAT, OPC_SEEK,
    OPC_FSYNC, OPC_READDIR, OPC_MKDIR, OPC_RENAME, OPC_UNLINK,
    OPC_FDATASYNC, OPC_FLUSH, OPC_DUP, OPC_FDOPEN, OPC_RMDIR, OPC_OPENDIR, OPC_CLOSEDIR, OPC_FDOPENDIR,
};
enum { MOD_POSIX = 0, MOD_STDIO = 2 };
enum { RF_FAILED = 1, RF_MEM_UNALIGNED = 2, RF_OFFSET_UNKNOWN = 4, RF_CREATE = 8, RF_DIR = 16 };
enum { HF_EXITED = 1, HF_EXEC = 2, HF_CAPPED = 4 };

typedef struct {
    uint8_t op;
    uint8_t module;
    uint16_t flags;
    uint32_t tid;
    uint64_t file_id;
    int64_t offset;
    int64_t length;
    uint64_t start_ns;
    uint64_t dur_ns;
} rec_t;
_Static_assert(sizeof(rec_t) == 48, "record size");

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t rec_size;
    uint64_t header_size;
    uint64_t count;   /* reserved slots (atomic) */
    uint64_t cap;
    uint64_t dropped; /* records past the cap (atomic) */
    uint32_t flags;   /* HF_* (atomic) */
    int32_t exit_status;
    int64_t pid;
    int64_t ppid;
    uint64_t start_ns;
    uint64_t end_ns;
    char host[64];
    char exe[1024];
    char cmdline[2048];
    uint32_t cmdline_len;
} hdr_t;
_Static_assert(sizeof(hdr_t) <= IOT_HEADER, "header size");

/* ---- state ------------------------------------------------------------- */
static int g_state; /* 0 not started, 1 starting, 2 tracing, 3 off */
static hdr_t *g_hdr;
static rec_t *g_recs;
static int g_fd_trace = -1, g_fd_names = -1;
static uint64_t g_file_recs; /* records the file currently holds room for */
static int g_grow_lock;
static uint64_t g_cap = (uint64_t)1 << 32; /* records per process: no practical cap (disk-bound) */
static pid_t g_pid;
static char g_dir[2048];
static int g_cfg_done;
static char g_excl[32][256];
static size_t g_excl_len[32];
static int g_nexcl;
static char g_cwd[4096];
static int g_cwd_len;

static TLS int t_busy;
static TLS uint32_t t_tid;

#define MAX_FD 65536
typedef struct { uint64_t id; int64_t off; } fdent_t;
static fdent_t g_fd[MAX_FD];

#define MAP_SLOTS 8192 /* FILE* and DIR* tables (open addressing) */
typedef struct { uintptr_t key; uint64_t id; int64_t off; uint64_t t0; int64_t n; } ptrent_t;
static ptrent_t g_streams[MAP_SLOTS];
static ptrent_t g_dirs[MAP_SLOTS];

#define SEEN_SLOTS 65536
static uint64_t g_seen[SEEN_SLOTS];
static int g_seen_used;

/* ---- real functions ---------------------------------------------------- */
#define REAL(name) ({ if (UNLIKELY(!real_##name)) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name); real_##name; })
#define REALV(name, ver) ({ if (UNLIKELY(!real_##name)) real_##name = (__typeof__(real_##name))resolve_compat(#name, ver); real_##name; })

static void *resolve_compat(const char *name, const char *ver) {
    void *p = dlvsym(RTLD_NEXT, name, ver);
    return p ? p : dlsym(RTLD_NEXT, name);
}

/* ---- small helpers (no libc I/O) --------------------------------------- */
static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t my_tid(void) {
    if (UNLIKELY(!t_tid)) t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}

static inline pid_t raw_getpid(void) { return (pid_t)syscall(SYS_getpid); }

static uint64_t hash_path(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; }
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33;
    return h ? h : 1;
}

static void load_config(void) {
    if (g_cfg_done) return;
    const char *d = getenv("IODIAG_TRACE_DIR");
    if (d && *d && strlen(d) < sizeof(g_dir) - 64) strcpy(g_dir, d);
    const char *c = getenv("IODIAG_MAX_RECORDS");
    if (c && *c) { long long v = atoll(c); if (v > 0) g_cap = (uint64_t)v; }
    const char *e = getenv("IODIAG_EXCLUDE");
    if (!e) e = "/proc/:/sys/:/dev/";
    g_nexcl = 0;
    while (*e && g_nexcl < 32) {
        const char *s = strchr(e, ':');
        size_t n = s ? (size_t)(s - e) : strlen(e);
        if (n > 0 && n < 255) { memcpy(g_excl[g_nexcl], e, n); g_excl[g_nexcl][n] = 0; g_excl_len[g_nexcl] = n; g_nexcl++; }
        e += n + (s ? 1 : 0);
    }
    long r = syscall(SYS_getcwd, g_cwd, sizeof(g_cwd));
    g_cwd_len = r > 0 ? (int)strlen(g_cwd) : 0;
    if (!g_pid) g_pid = raw_getpid();
    g_cfg_done = 1;
}

static void refresh_cwd(void) {
    char buf[4096];
    long r = syscall(SYS_getcwd, buf, sizeof(buf));
    if (r > 0) { memcpy(g_cwd, buf, (size_t)r); g_cwd_len = (int)strlen(g_cwd); }
}

/* Absolute, lexically normalised path of `p` relative to dirfd (AT_FDCWD or a
 * directory fd).  Returns its length, 0 when it cannot be resolved. */
static size_t abs_path(int dirfd, const char *p, char *out, size_t cap) {
    if (!p) return 0;
    char tmp[4096 + 256];
    size_t n = 0;
    if (p[0] == '/') {
        n = strnlen(p, sizeof(tmp) - 1);
        memcpy(tmp, p, n);
    } else {
        size_t bl;
        char base[4096];
        if (dirfd == AT_FDCWD) {
            if (!g_cwd_len) return 0;
            bl = (size_t)g_cwd_len; memcpy(base, g_cwd, bl);
        } else {
            char link[64];
            snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
            long r = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof(base) - 1);
            if (r <= 0) return 0;
            bl = (size_t)r;
        }
        size_t pl = strnlen(p, sizeof(tmp) - bl - 2);
        memcpy(tmp, base, bl);
        tmp[bl] = '/';
        memcpy(tmp + bl + 1, p, pl);
        n = bl + 1 + pl;
    }
    tmp[n] = 0;
    /* normalise: collapse //, drop /./, resolve /../ lexically, drop trailing / */
    size_t o = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && tmp[i] == '/') i++;
        if (i >= n) break;
        size_t s = i;
        while (i < n && tmp[i] != '/') i++;
        size_t len = i - s;
        if (len == 1 && tmp[s] == '.') continue;
        if (len == 2 && tmp[s] == '.' && tmp[s + 1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
            continue;
        }
        if (o + 1 + len >= cap) return 0;
        out[o++] = '/';
        memcpy(out + o, tmp + s, len);
        o += len;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    return o;
}

static int excluded(const char *p, size_t n) {
    for (int i = 0; i < g_nexcl; i++) {
        size_t l = g_excl_len[i];
        if (n >= l && memcmp(p, g_excl[i], l) == 0) return 1;
        /* "/x/" also excludes the directory "/x" itself */
        if (l > 1 && g_excl[i][l - 1] == '/' && n == l - 1 && memcmp(p, g_excl[i], n) == 0) return 1;
    }
    return 0;
}

/* ---- trace file -------------------------------------------------------- */
static void read_small(const char *path, char *buf, size_t cap, uint32_t *len) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    if (fd >= 0) {
        while (n < cap) {
            long r = syscall(SYS_read, fd, buf + n, cap - n);
            if (r <= 0) break;
            n += (size_t)r;
        }
        syscall(SYS_close, fd);
    }
    if (len) *len = (uint32_t)n;
}

static int start_trace(void) {
    load_config();
    if (!g_dir[0]) return 0;
    uint64_t t0 = now_ns();
    pid_t pid = raw_getpid();
    char host[64] = {0};
    read_small("/proc/sys/kernel/hostname", host, sizeof(host) - 1, NULL);
    for (size_t i = 0; i < sizeof(host); i++)
        if (host[i] == '\n' || host[i] == '/') host[i] = 0;
    if (!host[0]) strcpy(host, "host");
    /* one folder may collect traces of several nodes (a shared file system): the host is part of the name */
    char path[2200];
    snprintf(path, sizeof(path), "%s/%s-%d-%llu.iot", g_dir, host, (int)pid, (unsigned long long)t0);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    uint64_t init = g_cap < IOT_CHUNK ? g_cap : IOT_CHUNK;
    if (syscall(SYS_ftruncate, fd, (long)(IOT_HEADER + init * sizeof(rec_t))) != 0) { syscall(SYS_close, fd); return 0; }
    /* the mapping only reserves address space (the file grows in chunks); where an address-space limit
     * (ulimit -v) refuses it, halve the reservation: the cap then says how many records fit, in the header */
    void *m = MAP_FAILED;
    for (;;) {
        size_t maplen = IOT_HEADER + (size_t)g_cap * sizeof(rec_t);
        m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED || g_cap <= IOT_CHUNK) break;
        g_cap /= 2;
    }
    if (m == MAP_FAILED) { syscall(SYS_close, fd); return 0; }
    hdr_t *h = (hdr_t *)m;
    memcpy(h->magic, IOT_MAGIC, 8);
    h->version = IOT_VERSION;
    h->rec_size = sizeof(rec_t);
    h->header_size = IOT_HEADER;
    h->cap = g_cap;
    h->pid = pid;
    h->ppid = (int64_t)syscall(SYS_getppid);
    h->start_ns = t0;
    h->exit_status = -1;
    syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", h->exe, sizeof(h->exe) - 1);
    memcpy(h->host, host, sizeof(h->host));
    read_small("/proc/self/cmdline", h->cmdline, sizeof(h->cmdline), &h->cmdline_len);
    char npath[2200];
    snprintf(npath, sizeof(npath), "%s/%s-%d-%llu.names", g_dir, host, (int)pid, (unsigned long long)t0);
    g_fd_names = (int)syscall(SYS_openat, AT_FDCWD, npath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    g_fd_trace = fd;
    g_file_recs = init;
    g_hdr = h;
    g_recs = (rec_t *)((char *)m + IOT_HEADER);
    g_pid = pid;
    return 1;
}

/* 1 when records can be written in this process. */
static int ensure_tracing(void) {
    int s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    if (LIKELY(s == 2)) return 1;
    if (s == 3) return 0;
    int expect = 0;
    if (__atomic_compare_exchange_n(&g_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        int ok = start_trace();
        __atomic_store_n(&g_state, ok ? 2 : 3, __ATOMIC_RELEASE);
        return ok;
    }
    while ((s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE)) == 1) sched_yield();
    return s == 2;
}

static void grow_to(uint64_t idx) {
    while (__atomic_exchange_n(&g_grow_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
    uint64_t have = __atomic_load_n(&g_file_recs, __ATOMIC_ACQUIRE);
    if (idx >= have) {
        uint64_t want = (idx / IOT_CHUNK + 1) * IOT_CHUNK;
        if (want > g_cap) want = g_cap;
        if (syscall(SYS_ftruncate, g_fd_trace, (long)(IOT_HEADER + want * sizeof(rec_t))) == 0)
            __atomic_store_n(&g_file_recs, want, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&g_grow_lock, 0, __ATOMIC_RELEASE);
}

static void emit(int op, int module, int flags, uint64_t id, int64_t off, int64_t len, uint64_t t0, uint64_t t1) {
    if (UNLIKELY(!ensure_tracing())) return;
    uint64_t idx = __atomic_fetch_add(&g_hdr->count, 1, __ATOMIC_RELAXED);
    if (UNLIKELY(idx >= g_cap)) {
        __atomic_fetch_add(&g_hdr->dropped, 1, __ATOMIC_RELAXED);
        __atomic_fetch_or(&g_hdr->flags, HF_CAPPED, __ATOMIC_RELAXED);
        return;
    }
    if (UNLIKELY(idx >= __atomic_load_n(&g_file_recs, __ATOMIC_ACQUIRE))) {
        grow_to(idx);
        if (idx >= __atomic_load_n(&g_file_recs, __ATOMIC_ACQUIRE)) { /* disk full: count as dropped */
            __atomic_fetch_add(&g_hdr->dropped, 1, __ATOMIC_RELAXED);
            __atomic_fetch_or(&g_hdr->flags, HF_CAPPED, __ATOMIC_RELAXED);
            return;
        }
    }
    rec_t *r = &g_recs[idx];
    r->module = (uint8_t)module;
    r->flags = (uint16_t)flags;
    r->tid = my_tid();
    r->file_id = id;
    r->offset = off;
    r->length = len;
    r->start_ns = t0;
    r->dur_ns = t1 >= t0 ? t1 - t0 : 0;
    __atomic_store_n(&r->op, (uint8_t)op, __ATOMIC_RELEASE);
}

/* Record `path` under `id` in the names file, once per process. */
static void note_name(uint64_t id, const char *p, size_t n) {
    if (!ensure_tracing() || g_fd_names < 0) return;
    g_seen_used = 1;
    size_t h = (size_t)(id & (SEEN_SLOTS - 1));
    for (int probe = 0; probe < 32; probe++) {
        size_t k = (h + (size_t)probe) & (SEEN_SLOTS - 1);
        uint64_t cur = __atomic_load_n(&g_seen[k], __ATOMIC_ACQUIRE);
        if (cur == id) return;
        if (cur == 0) {
            uint64_t z = 0;
            if (__atomic_compare_exchange_n(&g_seen[k], &z, id, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
            if (z == id) return;
        }
    }
    char buf[16 + 4096];
    if (n > 4096) n = 4096;
    uint32_t len = (uint32_t)n, pad = 0;
    memcpy(buf, &id, 8);
    memcpy(buf + 8, &len, 4);
    memcpy(buf + 12, &pad, 4);
    memcpy(buf + 16, p, n);
    syscall(SYS_write, g_fd_names, buf, 16 + n);
}

/* file id of a path (0 when excluded or unresolvable); registers its name. */
static uint64_t path_id(int dirfd, const char *p) {
    char a[4096];
    size_t n = abs_path(dirfd, p, a, sizeof(a));
    if (!n || excluded(a, n)) return 0;
    uint64_t id = hash_path(a, n);
    note_name(id, a, n);
    return id;
}

static inline int64_t fd_off(int fd) { return __atomic_load_n(&g_fd[fd].off, __ATOMIC_RELAXED); }

static void track_fd(int fd, uint64_t id, int64_t off) {
    if (fd < 0 || fd >= MAX_FD) return;
    __atomic_store_n(&g_fd[fd].off, off, __ATOMIC_RELAXED);
    __atomic_store_n(&g_fd[fd].id, id, __ATOMIC_RELEASE);
}

static inline uint64_t fd_id(int fd) {
    return (fd >= 0 && fd < MAX_FD) ? __atomic_load_n(&g_fd[fd].id, __ATOMIC_ACQUIRE) : 0;
}

/* id of an fd we do not track yet (e.g. inherited, or dup'd through a path we
 * did not see): resolved through /proc/self/fd, used for fdopen only. */
static uint64_t fd_id_resolve(int fd) {
    uint64_t id = fd_id(fd);
    if (id) return id;
    char link[64], target[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    long r = syscall(SYS_readlinkat, AT_FDCWD, link, target, sizeof(target) - 1);
    if (r <= 0 || target[0] != '/') return 0;
    target[r] = 0;
    if (excluded(target, (size_t)r)) return 0;
    id = hash_path(target, (size_t)r);
    note_name(id, target, (size_t)r);
    long pos = syscall(SYS_lseek, fd, 0, SEEK_CUR);
    track_fd(fd, id, pos >= 0 ? pos : -1);
    return id;
}

/* ---- pointer maps (FILE*, DIR*) ---------------------------------------- */
#define TOMB ((uintptr_t)1)
static inline size_t ptr_hash(uintptr_t k) { k ^= k >> 17; k *= 0x9E3779B97F4A7C15ull; return (size_t)(k >> 40) & (MAP_SLOTS - 1); }

static ptrent_t *map_find(ptrent_t *m, const void *p) {
    uintptr_t k = (uintptr_t)p;
    if (!k) return NULL;
    size_t h = ptr_hash(k);
    for (int i = 0; i < MAP_SLOTS; i++) {
        ptrent_t *e = &m[(h + (size_t)i) & (MAP_SLOTS - 1)];
        uintptr_t cur = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (cur == k) return e;
        if (cur == 0) return NULL;
    }
    return NULL;
}

static ptrent_t *map_put(ptrent_t *m, const void *p, uint64_t id, int64_t off) {
    uintptr_t k = (uintptr_t)p;
    ptrent_t *old = map_find(m, p); /* a stale entry of a recycled pointer */
    if (old) { old->id = id; old->off = off; old->t0 = 0; old->n = 0; return old; }
    size_t h = ptr_hash(k);
    for (int i = 0; i < MAP_SLOTS; i++) {
        ptrent_t *e = &m[(h + (size_t)i) & (MAP_SLOTS - 1)];
        uintptr_t cur = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (cur == 0 || cur == TOMB) {
            if (__atomic_compare_exchange_n(&e->key, &cur, k, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                e->id = id; e->off = off; e->t0 = 0; e->n = 0;
                return e;
            }
        }
    }
    return NULL;
}

static inline void map_del(ptrent_t *e) { if (e) __atomic_store_n(&e->key, TOMB, __ATOMIC_RELEASE); }

/* ---- process lifecycle ------------------------------------------------- */
static void mark_end(uint32_t flag, int status) {
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) != 2 || raw_getpid() != g_pid) return;
    if (status != -1 || !(__atomic_load_n(&g_hdr->flags, __ATOMIC_ACQUIRE) & HF_EXITED))
        g_hdr->exit_status = status; /* the destructor (status unknown) keeps what exit() recorded */
    __atomic_store_n(&g_hdr->end_ns, now_ns(), __ATOMIC_RELEASE);
    __atomic_fetch_or(&g_hdr->flags, flag, __ATOMIC_RELEASE);
}

static void after_fork_child(void) {
    /* The parent's mapping stays the parent's: drop it and start a new trace lazily. */
    if (g_state == 2 && g_hdr) munmap(g_hdr, IOT_HEADER + (size_t)g_cap * sizeof(rec_t));
    if (g_fd_trace >= 0) syscall(SYS_close, g_fd_trace);
    if (g_fd_names >= 0) syscall(SYS_close, g_fd_names);
    g_fd_trace = g_fd_names = -1;
    g_hdr = NULL; g_recs = NULL; g_file_recs = 0; g_grow_lock = 0;
    if (g_seen_used) { memset(g_seen, 0, sizeof(g_seen)); g_seen_used = 0; }
    t_tid = 0;
    t_busy = 0;
    g_pid = raw_getpid();
    __atomic_store_n(&g_state, g_dir[0] ? 0 : 3, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void iodiag_init(void) {
    load_config();
    g_pid = raw_getpid();
    if (!g_dir[0]) __atomic_store_n(&g_state, 3, __ATOMIC_RELEASE);
    pthread_atfork(NULL, NULL, after_fork_child);
}

__attribute__((destructor)) static void iodiag_fini(void) { mark_end(HF_EXITED, -1); }

/* ---- hook scaffolding -------------------------------------------------- */
#define ON (LIKELY(!t_busy) && __atomic_load_n(&g_state, __ATOMIC_RELAXED) != 3)
#define ENTER t_busy = 1
#define LEAVE t_busy = 0

static inline int mem_flag(const void *buf) { return ((uintptr_t)buf & 7) ? RF_MEM_UNALIGNED : 0; }

static void after_open(int dirfd, const char *path, int flags, mode_t mode, int fd, uint64_t t0, uint64_t t1, int dir) {
    if (!g_cfg_done) load_config();
    if (fd < 0) { /* a failed open is a metadata call too: recorded, flagged */
        uint64_t fid = path_id(dirfd, path);
        if (fid) emit(OPC_OPEN, MOD_POSIX, RF_FAILED | ((flags & O_CREAT) ? RF_CREATE : 0), fid, flags, (int64_t)mode, t0, t1);
        return;
    }
    char a[4096];
    size_t n = abs_path(dirfd, path, a, sizeof(a));
    if (!n || excluded(a, n)) { track_fd(fd, 0, 0); return; }
    if ((flags & __O_TMPFILE) == __O_TMPFILE && n + 14 < sizeof(a)) { /* an unnamed file inside the directory */
        memcpy(a + n, "/<O_TMPFILE>", 13);
        n += 12;
    }
    uint64_t id = hash_path(a, n);
    note_name(id, a, n);
    track_fd(fd, id, (flags & O_APPEND) ? -1 : 0);
    int rf = ((flags & O_CREAT) ? RF_CREATE : 0) | (dir ? RF_DIR : 0);
    emit(dir ? OPC_OPENDIR : OPC_OPEN, MOD_POSIX, rf, id, flags, (int64_t)mode, t0, t1);
}

#define OPEN_MODE(flags) \
    mode_t mode = 0; \
    if ((flags) & (O_CREAT | __O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = (mode_t)va_arg(ap, int); va_end(ap); }

#define DEF_OPEN(name) \
    static int (*real_##name)(const char *, int, ...); \
    EXPORT int name(const char *path, int flags, ...) { \
        OPEN_MODE(flags); \
        if (!ON) return REAL(name)(path, flags, mode); \
        ENTER; uint64_t t0 = now_ns(); int fd = REAL(name)(path, flags, mode); uint64_t t1 = now_ns(); int e = errno; \
        after_open(AT_FDCWD, path, flags, mode, fd, t0, t1, 0); errno = e; LEAVE; return fd; }
DEF_OPEN(open)
DEF_OPEN(open64)

#define DEF_OPENAT(name) \
    static int (*real_##name)(int, const char *, int, ...); \
    EXPORT int name(int dirfd, const char *path, int flags, ...) { \
        OPEN_MODE(flags); \
        if (!ON) return REAL(name)(dirfd, path, flags, mode); \
        ENTER; uint64_t t0 = now_ns(); int fd = REAL(name)(dirfd, path, flags, mode); uint64_t t1 = now_ns(); int e = errno; \
        after_open(dirfd, path, flags, mode, fd, t0, t1, 0); errno = e; LEAVE; return fd; }
DEF_OPENAT(openat)
DEF_OPENAT(openat64)

#define DEF_OPEN2(name) \
    static int (*real_##name)(const char *, int); \
    EXPORT int name(const char *path, int flags) { \
        if (!ON) return REAL(name)(path, flags); \
        ENTER; uint64_t t0 = now_ns(); int fd = REAL(name)(path, flags); uint64_t t1 = now_ns(); int e = errno; \
        after_open(AT_FDCWD, path, flags, 0, fd, t0, t1, 0); errno = e; LEAVE; return fd; }
DEF_OPEN2(__open_2)
DEF_OPEN2(__open64_2)

#define DEF_OPENAT2(name) \
    static int (*real_##name)(int, const char *, int); \
    EXPORT int name(int dirfd, const char *path, int flags) { \
        if (!ON) return REAL(name)(dirfd, path, flags); \
        ENTER; uint64_t t0 = now_ns(); int fd = REAL(name)(dirfd, path, flags); uint64_t t1 = now_ns(); int e = errno; \
        after_open(dirfd, path, flags, 0, fd, t0, t1, 0); errno = e; LEAVE; return fd; }
DEF_OPENAT2(__openat_2)
DEF_OPENAT2(__openat64_2)

#define DEF_CREAT(name) \
    static int (*real_##name)(const char *, mode_t); \
    EXPORT int name(const char *path, mode_t mode) { \
        if (!ON) return REAL(name)(path, mode); \
        ENTER; uint64_t t0 = now_ns(); int fd = REAL(name)(path, mode); uint64_t t1 = now_ns(); int e = errno; \
        after_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, fd, t0, t1, 0); errno = e; LEAVE; return fd; }
DEF_CREAT(creat)
DEF_CREAT(creat64)

static int (*real_close)(int);
EXPORT int close(int fd) {
    uint64_t id = fd_id(fd);
    if (!id || !ON) return REAL(close)(fd);
    if (raw_getpid() != g_pid) return REAL(close)(fd); /* vfork child: parent's tables */
    ENTER;
    uint64_t t0 = now_ns(); int r = REAL(close)(fd); uint64_t t1 = now_ns(); int e = errno;
    if (r == 0 || e == EBADF) track_fd(fd, 0, 0);
    emit(OPC_CLOSE, MOD_POSIX, r < 0 ? RF_FAILED : 0, id, -1, 0, t0, t1);
    errno = e; LEAVE; return r;
}

/* close_range / closefrom close many fds at once: forget them (no records, as
 * they are mostly a child's clean-up before exec). */
static void forget_fds(unsigned int first, unsigned int last) {
    if (raw_getpid() != g_pid) return;
    for (unsigned int fd = first; fd <= last && fd < MAX_FD; fd++)
        if (g_fd[fd].id) track_fd((int)fd, 0, 0);
}
static int (*real_close_range)(unsigned int, unsigned int, int);
EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
    int r = REAL(close_range)(first, last, flags);
    if (r == 0 && !(flags & 4 /* CLOSE_RANGE_CLOEXEC */)) { int e = errno; forget_fds(first, last); errno = e; }
    return r;
}
static void (*real_closefrom)(int);
EXPORT void closefrom(int lowfd) {
    REAL(closefrom)(lowfd);
    int e = errno; forget_fds(lowfd < 0 ? 0 : (unsigned int)lowfd, MAX_FD - 1); errno = e;
}

/* ---- dup --------------------------------------------------------------- */
static void after_dup(int oldfd, int newfd, uint64_t t0, uint64_t t1) {
    if (newfd < 0 || newfd == oldfd) return;
    uint64_t id = fd_id(oldfd);
    track_fd(newfd, id, id ? fd_off(oldfd) : 0);
    if (id) emit(OPC_DUP, MOD_POSIX, 0, id, newfd, 0, t0, t1);
}

static int (*real_dup)(int);
EXPORT int dup(int fd) {
    if (!ON || raw_getpid() != g_pid) return REAL(dup)(fd);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(dup)(fd); uint64_t t1 = now_ns(); int e = errno;
    after_dup(fd, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_dup2)(int, int);
EXPORT int dup2(int fd, int fd2) {
    if (!ON || raw_getpid() != g_pid) return REAL(dup2)(fd, fd2);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(dup2)(fd, fd2); uint64_t t1 = now_ns(); int e = errno;
    after_dup(fd, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_dup3)(int, int, int);
EXPORT int dup3(int fd, int fd2, int fl) {
    if (!ON || raw_getpid() != g_pid) return REAL(dup3)(fd, fd2, fl);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(dup3)(fd, fd2, fl); uint64_t t1 = now_ns(); int e = errno;
    after_dup(fd, r, t0, t1); errno = e; LEAVE; return r;
}

/* fcntl is variadic; every third argument fits in one 64-bit register. */
#define DEF_FCNTL(name) \
    static int (*real_##name)(int, int, ...); \
    EXPORT int name(int fd, int cmd, ...) { \
        va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap); \
        if ((cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC) || !ON || raw_getpid() != g_pid) return REAL(name)(fd, cmd, arg); \
        ENTER; uint64_t t0 = now_ns(); int r = REAL(name)(fd, cmd, arg); uint64_t t1 = now_ns(); int e = errno; \
        after_dup(fd, r, t0, t1); errno = e; LEAVE; return r; }
DEF_FCNTL(fcntl)
DEF_FCNTL(fcntl64)

/* ---- read / write ------------------------------------------------------ */
#define RW_BODY(OPC, CALL, BUF) \
    uint64_t id = fd_id(fd); \
    if (!id || !ON) return CALL; \
    ENTER; uint64_t t0 = now_ns(); ssize_t r = CALL; uint64_t t1 = now_ns(); int e = errno; \
    int64_t off = fd_off(fd); int fl = mem_flag(BUF); \
    if (r > 0 && off >= 0) off = __atomic_fetch_add(&g_fd[fd].off, r, __ATOMIC_RELAXED); \
    if (off < 0) fl |= RF_OFFSET_UNKNOWN; \
    emit(OPC, MOD_POSIX, fl | (r < 0 ? RF_FAILED : 0), id, off, r < 0 ? 0 : r, t0, t1); \
    errno = e; LEAVE; return r;

#define PRW_BODY(OPC, CALL, BUF, OFF) \
    uint64_t id = fd_id(fd); \
    if (!id || !ON) return CALL; \
    ENTER; uint64_t t0 = now_ns(); ssize_t r = CALL; uint64_t t1 = now_ns(); int e = errno; \
    emit(OPC, MOD_POSIX, mem_flag(BUF) | (r < 0 ? RF_FAILED : 0), id, (int64_t)(OFF), r < 0 ? 0 : r, t0, t1); \
    errno = e; LEAVE; return r;

static ssize_t (*real_read)(int, void *, size_t);
EXPORT ssize_t read(int fd, void *buf, size_t n) { RW_BODY(OPC_READ, REAL(read)(fd, buf, n), buf) }
static ssize_t (*real_write)(int, const void *, size_t);
EXPORT ssize_t write(int fd, const void *buf, size_t n) { RW_BODY(OPC_WRITE, REAL(write)(fd, buf, n), buf) }
static ssize_t (*real_readv)(int, const struct iovec *, int);
EXPORT ssize_t readv(int fd, const struct iovec *v, int c) { RW_BODY(OPC_READ, REAL(readv)(fd, v, c), (c > 0 ? v[0].iov_base : NULL)) }
static ssize_t (*real_writev)(int, const struct iovec *, int);
EXPORT ssize_t writev(int fd, const struct iovec *v, int c) { RW_BODY(OPC_WRITE, REAL(writev)(fd, v, c), (c > 0 ? v[0].iov_base : NULL)) }

static ssize_t (*real_pread)(int, void *, size_t, off_t);
EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t o) { PRW_BODY(OPC_READ, REAL(pread)(fd, buf, n, o), buf, o) }
static ssize_t (*real_pread64)(int, void *, size_t, off64_t);
EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t o) { PRW_BODY(OPC_READ, REAL(pread64)(fd, buf, n, o), buf, o) }
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t o) { PRW_BODY(OPC_WRITE, REAL(pwrite)(fd, buf, n, o), buf, o) }
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t o) { PRW_BODY(OPC_WRITE, REAL(pwrite64)(fd, buf, n, o), buf, o) }
static ssize_t (*real_preadv)(int, const struct iovec *, int, off_t);
EXPORT ssize_t preadv(int fd, const struct iovec *v, int c, off_t o) { PRW_BODY(OPC_READ, REAL(preadv)(fd, v, c, o), (c > 0 ? v[0].iov_base : NULL), o) }
static ssize_t (*real_preadv64)(int, const struct iovec *, int, off64_t);
EXPORT ssize_t preadv64(int fd, const struct iovec *v, int c, off64_t o) { PRW_BODY(OPC_READ, REAL(preadv64)(fd, v, c, o), (c > 0 ? v[0].iov_base : NULL), o) }
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
EXPORT ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) { PRW_BODY(OPC_WRITE, REAL(pwritev)(fd, v, c, o), (c > 0 ? v[0].iov_base : NULL), o) }
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);
EXPORT ssize_t pwritev64(int fd, const struct iovec *v, int c, off64_t o) { PRW_BODY(OPC_WRITE, REAL(pwritev64)(fd, v, c, o), (c > 0 ? v[0].iov_base : NULL), o) }

/* preadv2/pwritev2: offset -1 means "at the current file offset" */
#define PRW2_BODY(OPC, CALL, BUF, OFF) \
    if ((OFF) != -1) { PRW_BODY(OPC, CALL, BUF, OFF) } else { RW_BODY(OPC, CALL, BUF) }
static ssize_t (*real_preadv2)(int, const struct iovec *, int, off_t, int);
EXPORT ssize_t preadv2(int fd, const struct iovec *v, int c, off_t o, int f) { PRW2_BODY(OPC_READ, REAL(preadv2)(fd, v, c, o, f), (c > 0 ? v[0].iov_base : NULL), o) }
static ssize_t (*real_preadv64v2)(int, const struct iovec *, int, off64_t, int);
EXPORT ssize_t preadv64v2(int fd, const struct iovec *v, int c, off64_t o, int f) { PRW2_BODY(OPC_READ, REAL(preadv64v2)(fd, v, c, o, f), (c > 0 ? v[0].iov_base : NULL), o) }
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
EXPORT ssize_t pwritev2(int fd, const struct iovec *v, int c, off_t o, int f) { PRW2_BODY(OPC_WRITE, REAL(pwritev2)(fd, v, c, o, f), (c > 0 ? v[0].iov_base : NULL), o) }
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off64_t, int);
EXPORT ssize_t pwritev64v2(int fd, const struct iovec *v, int c, off64_t o, int f) { PRW2_BODY(OPC_WRITE, REAL(pwritev64v2)(fd, v, c, o, f), (c > 0 ? v[0].iov_base : NULL), o) }

/* sendfile / copy_file_range: a read on the source and a write on the target */
static void copy_records(int in, int out, int64_t *inoff, int64_t *outoff, ssize_t r, uint64_t t0, uint64_t t1) {
    uint64_t iid = fd_id(in), oid = fd_id(out);
    int fl = r < 0 ? RF_FAILED : 0;
    int64_t n = r < 0 ? 0 : r;
    if (iid) {
        int64_t o = inoff ? *inoff - n : (n > 0 ? __atomic_fetch_add(&g_fd[in].off, n, __ATOMIC_RELAXED) : fd_off(in));
        emit(OPC_READ, MOD_POSIX, fl, iid, o, n, t0, t1);
    }
    if (oid) {
        int64_t o = outoff ? *outoff - n : (n > 0 ? __atomic_fetch_add(&g_fd[out].off, n, __ATOMIC_RELAXED) : fd_off(out));
        emit(OPC_WRITE, MOD_POSIX, fl, oid, o, n, t0, t1);
    }
}
#define DEF_SENDFILE(name) \
    static ssize_t (*real_##name)(int, int, off_t *, size_t); \
    EXPORT ssize_t name(int out, int in, off_t *off, size_t n) { \
        if (!ON || (!fd_id(in) && !fd_id(out))) return REAL(name)(out, in, off, n); \
        ENTER; uint64_t t0 = now_ns(); ssize_t r = REAL(name)(out, in, off, n); uint64_t t1 = now_ns(); int e = errno; \
        int64_t io = off ? (int64_t)*off : 0; \
        copy_records(in, out, off ? &io : NULL, NULL, r, t0, t1); errno = e; LEAVE; return r; }
DEF_SENDFILE(sendfile)
DEF_SENDFILE(sendfile64)

static ssize_t (*real_copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned);
EXPORT ssize_t copy_file_range(int in, off64_t *inoff, int out, off64_t *outoff, size_t n, unsigned fl) {
    if (!ON || (!fd_id(in) && !fd_id(out))) return REAL(copy_file_range)(in, inoff, out, outoff, n, fl);
    ENTER; uint64_t t0 = now_ns(); ssize_t r = REAL(copy_file_range)(in, inoff, out, outoff, n, fl); uint64_t t1 = now_ns(); int e = errno;
    int64_t io = inoff ? (int64_t)*inoff : 0, oo = outoff ? (int64_t)*outoff : 0;
    copy_records(in, out, inoff ? &io : NULL, outoff ? &oo : NULL, r, t0, t1); errno = e; LEAVE; return r;
}

/* ---- seek, sync -------------------------------------------------------- */
#define DEF_LSEEK(name, T) \
    static T (*real_##name)(int, T, int); \
    EXPORT T name(int fd, T o, int wh) { \
        uint64_t id = fd_id(fd); \
        if (!id || !ON) return REAL(name)(fd, o, wh); \
        ENTER; uint64_t t0 = now_ns(); T r = REAL(name)(fd, o, wh); uint64_t t1 = now_ns(); int e = errno; \
        if (r >= 0) __atomic_store_n(&g_fd[fd].off, (int64_t)r, __ATOMIC_RELAXED); \
        emit(OPC_SEEK, MOD_POSIX, r < 0 ? RF_FAILED : 0, id, (int64_t)r, 0, t0, t1); \
        errno = e; LEAVE; return r; }
DEF_LSEEK(lseek, off_t)
DEF_LSEEK(lseek64, off64_t)

#define DEF_SYNC(name, OPC) \
    static int (*real_##name)(int); \
    EXPORT int name(int fd) { \
        uint64_t id = fd_id(fd); \
        if (!id || !ON) return REAL(name)(fd); \
        ENTER; uint64_t t0 = now_ns(); int r = REAL(name)(fd); uint64_t t1 = now_ns(); int e = errno; \
        emit(OPC, MOD_POSIX, r < 0 ? RF_FAILED : 0, id, -1, 0, t0, t1); errno = e; LEAVE; return r; }
DEF_SYNC(fsync, OPC_FSYNC)
DEF_SYNC(fdatasync, OPC_FDATASYNC)

/* ---- stat family ------------------------------------------------------- */
static void stat_path(int dirfd, const char *path, int r, uint64_t t0, uint64_t t1) {
    if (!g_cfg_done) load_config();
    uint64_t id = path_id(dirfd, path);
    if (id) emit(OPC_STAT, MOD_POSIX, r < 0 ? RF_FAILED : 0, id, -1, 0, t0, t1);
}
static void stat_fd(int fd, int r, uint64_t t0, uint64_t t1) {
    uint64_t id = fd_id(fd);
    if (id) emit(OPC_STAT, MOD_POSIX, r < 0 ? RF_FAILED : 0, id, -1, 0, t0, t1);
}

#define DEF_STAT(name, ST) \
    static int (*real_##name)(const char *, ST *); \
    EXPORT int name(const char *p, ST *b) { \
        if (!ON) return REAL(name)(p, b); \
        ENTER; uint64_t t0 = now_ns(); int r = REAL(name)(p, b); uint64_t t1 = now_ns(); int e = errno; \
        stat_path(AT_FDCWD, p, r, t0, t1); errno = e; LEAVE; return r; }
DEF_STAT(stat, struct stat)
DEF_STAT(stat64, struct stat64)
DEF_STAT(lstat, struct stat)
DEF_STAT(lstat64, struct stat64)

#define DEF_FSTAT(name, ST) \
    static int (*real_##name)(int, ST *); \
    EXPORT int name(int fd, ST *b) { \
        if (!fd_id(fd) || !ON) return REAL(name)(fd, b); \
        ENTER; uint64_t t0 = now_ns(); int r = REAL(name)(fd, b); uint64_t t1 = now_ns(); int e = errno; \
        stat_fd(fd, r, t0, t1); errno = e; LEAVE; return r; }
DEF_FSTAT(fstat, struct stat)
DEF_FSTAT(fstat64, struct stat64)

#define DEF_FSTATAT(name, ST) \
    static int (*real_##name)(int, const char *, ST *, int); \
    EXPORT int name(int d, const char *p, ST *b, int fl) { \
        if (!ON) return REAL(name)(d, p, b, fl); \
        ENTER; uint64_t t0 = now_ns(); int r = REAL(name)(d, p, b, fl); uint64_t t1 = now_ns(); int e = errno; \
        if (p && !p[0] && (fl & AT_EMPTY_PATH)) stat_fd(d, r, t0, t1); else stat_path(d, p, r, t0, t1); \
        errno = e; LEAVE; return r; }
DEF_FSTATAT(fstatat, struct stat)
DEF_FSTATAT(fstatat64, struct stat64)

static int (*real_statx)(int, const char *, int, unsigned int, struct statx *);
EXPORT int statx(int d, const char *p, int fl, unsigned int mask, struct statx *b) {
    if (!ON) return REAL(statx)(d, p, fl, mask, b);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(statx)(d, p, fl, mask, b); uint64_t t1 = now_ns(); int e = errno;
    if (p && !p[0] && (fl & AT_EMPTY_PATH)) stat_fd(d, r, t0, t1); else stat_path(d, p, r, t0, t1);
    errno = e; LEAVE; return r;
}

/* glibc < 2.33 compat entry points, still called by manylinux wheels (HDF5, netCDF) */
#define DEF_XSTAT(name, ST) \
    static int (*real_##name)(int, const char *, ST *); \
    EXPORT int name(int v, const char *p, ST *b) { \
        if (!ON) return REALV(name, "GLIBC_2.2.5")(v, p, b); \
        ENTER; uint64_t t0 = now_ns(); int r = REALV(name, "GLIBC_2.2.5")(v, p, b); uint64_t t1 = now_ns(); int e = errno; \
        stat_path(AT_FDCWD, p, r, t0, t1); errno = e; LEAVE; return r; }
DEF_XSTAT(__xstat, struct stat)
DEF_XSTAT(__xstat64, struct stat64)
DEF_XSTAT(__lxstat, struct stat)
DEF_XSTAT(__lxstat64, struct stat64)

#define DEF_FXSTAT(name, ST) \
    static int (*real_##name)(int, int, ST *); \
    EXPORT int name(int v, int fd, ST *b) { \
        if (!fd_id(fd) || !ON) return REALV(name, "GLIBC_2.2.5")(v, fd, b); \
        ENTER; uint64_t t0 = now_ns(); int r = REALV(name, "GLIBC_2.2.5")(v, fd, b); uint64_t t1 = now_ns(); int e = errno; \
        stat_fd(fd, r, t0, t1); errno = e; LEAVE; return r; }
DEF_FXSTAT(__fxstat, struct stat)
DEF_FXSTAT(__fxstat64, struct stat64)

#define DEF_FXSTATAT(name, ST) \
    static int (*real_##name)(int, int, const char *, ST *, int); \
    EXPORT int name(int v, int d, const char *p, ST *b, int fl) { \
        if (!ON) return REALV(name, "GLIBC_2.4")(v, d, p, b, fl); \
        ENTER; uint64_t t0 = now_ns(); int r = REALV(name, "GLIBC_2.4")(v, d, p, b, fl); uint64_t t1 = now_ns(); int e = errno; \
        stat_path(d, p, r, t0, t1); errno = e; LEAVE; return r; }
DEF_FXSTATAT(__fxstatat, struct stat)
DEF_FXSTATAT(__fxstatat64, struct stat64)

/* ---- namespace operations ---------------------------------------------- */
static void path_op(int opc, int dirfd, const char *p, int r, uint64_t t0, uint64_t t1) {
    if (!g_cfg_done) load_config();
    uint64_t id = path_id(dirfd, p);
    if (id) emit(opc, MOD_POSIX, r < 0 ? RF_FAILED : 0, id, -1, 0, t0, t1);
}

static int (*real_mkdir)(const char *, mode_t);
EXPORT int mkdir(const char *p, mode_t m) {
    if (!ON) return REAL(mkdir)(p, m);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(mkdir)(p, m); uint64_t t1 = now_ns(); int e = errno;
    path_op(OPC_MKDIR, AT_FDCWD, p, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_mkdirat)(int, const char *, mode_t);
EXPORT int mkdirat(int d, const char *p, mode_t m) {
    if (!ON) return REAL(mkdirat)(d, p, m);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(mkdirat)(d, p, m); uint64_t t1 = now_ns(); int e = errno;
    path_op(OPC_MKDIR, d, p, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_rmdir)(const char *);
EXPORT int rmdir(const char *p) {
    if (!ON) return REAL(rmdir)(p);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(rmdir)(p); uint64_t t1 = now_ns(); int e = errno;
    path_op(OPC_RMDIR, AT_FDCWD, p, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_unlink)(const char *);
EXPORT int unlink(const char *p) {
    if (!ON) return REAL(unlink)(p);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(unlink)(p); uint64_t t1 = now_ns(); int e = errno;
    path_op(OPC_UNLINK, AT_FDCWD, p, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_unlinkat)(int, const char *, int);
EXPORT int unlinkat(int d, const char *p, int fl) {
    if (!ON) return REAL(unlinkat)(d, p, fl);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(unlinkat)(d, p, fl); uint64_t t1 = now_ns(); int e = errno;
    path_op((fl & AT_REMOVEDIR) ? OPC_RMDIR : OPC_UNLINK, d, p, r, t0, t1); errno = e; LEAVE; return r;
}

static void rename_op(int od, const char *o, int nd, const char *n, int r, uint64_t t0, uint64_t t1) {
    if (!g_cfg_done) load_config();
    uint64_t sid = path_id(od, o), tid = path_id(nd, n);
    if (sid || tid) emit(OPC_RENAME, MOD_POSIX, r < 0 ? RF_FAILED : 0, sid ? sid : tid, (int64_t)tid, 0, t0, t1);
}
static int (*real_rename)(const char *, const char *);
EXPORT int rename(const char *o, const char *n) {
    if (!ON) return REAL(rename)(o, n);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(rename)(o, n); uint64_t t1 = now_ns(); int e = errno;
    rename_op(AT_FDCWD, o, AT_FDCWD, n, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_renameat)(int, const char *, int, const char *);
EXPORT int renameat(int od, const char *o, int nd, const char *n) {
    if (!ON) return REAL(renameat)(od, o, nd, n);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(renameat)(od, o, nd, n); uint64_t t1 = now_ns(); int e = errno;
    rename_op(od, o, nd, n, r, t0, t1); errno = e; LEAVE; return r;
}
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
EXPORT int renameat2(int od, const char *o, int nd, const char *n, unsigned int fl) {
    if (!ON) return REAL(renameat2)(od, o, nd, n, fl);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(renameat2)(od, o, nd, n, fl); uint64_t t1 = now_ns(); int e = errno;
    rename_op(od, o, nd, n, r, t0, t1); errno = e; LEAVE; return r;
}

static int (*real_chdir)(const char *);
EXPORT int chdir(const char *p) {
    int r = REAL(chdir)(p);
    if (r == 0 && raw_getpid() == g_pid) { int e = errno; refresh_cwd(); errno = e; }
    return r;
}
static int (*real_fchdir)(int);
EXPORT int fchdir(int fd) {
    int r = REAL(fchdir)(fd);
    if (r == 0 && raw_getpid() == g_pid) { int e = errno; refresh_cwd(); errno = e; }
    return r;
}

/* ---- directories: one readdir record per listing ----------------------- */
static void dir_opened(DIR *d, uint64_t id) {
    if (d && id) map_put(g_dirs, d, id, 0);
}
static DIR *(*real_opendir)(const char *);
EXPORT DIR *opendir(const char *p) {
    if (!ON) return REAL(opendir)(p);
    ENTER; uint64_t t0 = now_ns(); DIR *d = REAL(opendir)(p); uint64_t t1 = now_ns(); int e = errno;
    if (!g_cfg_done) load_config();
    if (d) {
        uint64_t id = path_id(AT_FDCWD, p);
        if (id) { emit(OPC_OPENDIR, MOD_POSIX, RF_DIR, id, O_RDONLY | O_DIRECTORY, dirfd(d), t0, t1); dir_opened(d, id); }
    } else {
        uint64_t id = path_id(AT_FDCWD, p);
        if (id) emit(OPC_OPENDIR, MOD_POSIX, RF_DIR | RF_FAILED, id, O_RDONLY | O_DIRECTORY, -1, t0, t1);
    }
    errno = e; LEAVE; return d;
}
static DIR *(*real_fdopendir)(int);
EXPORT DIR *fdopendir(int fd) {
    if (!ON) return REAL(fdopendir)(fd);
    ENTER; uint64_t t0 = now_ns(); DIR *d = REAL(fdopendir)(fd); uint64_t t1 = now_ns(); int e = errno;
    uint64_t id = fd_id(fd); /* the open itself was seen on fd */
    if (d && id) { dir_opened(d, id); emit(OPC_FDOPENDIR, MOD_POSIX, RF_DIR, id, -1, fd, t0, t1); }
    errno = e; LEAVE; return d;
}
static void dir_step(DIR *d, int got) {
    ptrent_t *e = map_find(g_dirs, d);
    if (!e) return;
    uint64_t t = now_ns();
    if (e->t0 == 0) e->t0 = t;
    if (got) { e->n++; return; }
    if (e->t0 != 1) emit(OPC_READDIR, MOD_POSIX, 0, e->id, -1, e->n, e->t0, t);
    e->t0 = 1; /* listing reported; a rewinddir would start over */
    e->n = 0;
}
static struct dirent *(*real_readdir)(DIR *);
EXPORT struct dirent *readdir(DIR *d) {
    if (!ON) return REAL(readdir)(d);
    ENTER; struct dirent *r = REAL(readdir)(d); int e = errno;
    dir_step(d, r != NULL); errno = e; LEAVE; return r;
}
static struct dirent64 *(*real_readdir64)(DIR *);
EXPORT struct dirent64 *readdir64(DIR *d) {
    if (!ON) return REAL(readdir64)(d);
    ENTER; struct dirent64 *r = REAL(readdir64)(d); int e = errno;
    dir_step(d, r != NULL); errno = e; LEAVE; return r;
}
static void (*real_rewinddir)(DIR *);
EXPORT void rewinddir(DIR *d) {
    REAL(rewinddir)(d);
    ptrent_t *e = map_find(g_dirs, d);
    if (e) { e->t0 = 0; e->n = 0; }
}
static int (*real_closedir)(DIR *);
EXPORT int closedir(DIR *d) {
    if (!ON) return REAL(closedir)(d);
    ENTER;
    ptrent_t *ent = map_find(g_dirs, d);
    uint64_t id = ent ? ent->id : 0;
    if (ent && ent->t0 > 1) emit(OPC_READDIR, MOD_POSIX, 0, id, -1, ent->n, ent->t0, now_ns()); /* abandoned listing */
    int fd = dirfd(d);
    uint64_t t0 = now_ns(); int r = REAL(closedir)(d); uint64_t t1 = now_ns(); int e = errno;
    if (ent) { map_del(ent); emit(OPC_CLOSEDIR, MOD_POSIX, RF_DIR | (r < 0 ? RF_FAILED : 0), id, -1, 0, t0, t1); }
    if (fd >= 0) track_fd(fd, 0, 0);
    errno = e; LEAVE; return r;
}

/* ---- exec and exit ----------------------------------------------------- */
static int (*real_execve)(const char *, char *const[], char *const[]);
EXPORT int execve(const char *p, char *const a[], char *const e[]) { mark_end(HF_EXEC, -1); return REAL(execve)(p, a, e); }
static int (*real_execv)(const char *, char *const[]);
EXPORT int execv(const char *p, char *const a[]) { mark_end(HF_EXEC, -1); return REAL(execv)(p, a); }
static int (*real_execvp)(const char *, char *const[]);
EXPORT int execvp(const char *p, char *const a[]) { mark_end(HF_EXEC, -1); return REAL(execvp)(p, a); }
static int (*real_execvpe)(const char *, char *const[], char *const[]);
EXPORT int execvpe(const char *p, char *const a[], char *const e[]) { mark_end(HF_EXEC, -1); return REAL(execvpe)(p, a, e); }
static int (*real_fexecve)(int, char *const[], char *const[]);
EXPORT int fexecve(int fd, char *const a[], char *const e[]) { mark_end(HF_EXEC, -1); return REAL(fexecve)(fd, a, e); }

static void (*real_exit)(int);
EXPORT void exit(int s) { mark_end(HF_EXITED, s); REAL(exit)(s); __builtin_unreachable(); }
static void (*real__exit)(int);
EXPORT void _exit(int s) { mark_end(HF_EXITED, s); REAL(_exit)(s); __builtin_unreachable(); }
static void (*real__Exit)(int);
EXPORT void _Exit(int s) { mark_end(HF_EXITED, s); REAL(_Exit)(s); __builtin_unreachable(); }

/* ---- STDIO ------------------------------------------------------------- */
static FILE *after_fopen(FILE *f, const char *path, const char *mode, uint64_t t0, uint64_t t1, int opc) {
    if (!g_cfg_done) load_config();
    if (!f) {
        uint64_t fid = path_id(AT_FDCWD, path);
        if (fid) emit(opc, MOD_STDIO, RF_FAILED, fid, -1, -1, t0, t1);
        return f;
    }
    uint64_t id = path_id(AT_FDCWD, path);
    if (!id) { ptrent_t *old = map_find(g_streams, f); if (old) map_del(old); return f; }
    int append = mode && strchr(mode, 'a') != NULL;
    map_put(g_streams, f, id, append ? -1 : 0);
    /* the program may also call fsync/fstat/lseek on fileno(f): those are POSIX calls on this file
     * (glibc's own buffer I/O on the fd is internal and never reaches us); its offset is glibc's */
    track_fd(fileno(f), id, -1);
    emit(opc, MOD_STDIO, 0, id, -1, fileno(f), t0, t1); /* length holds the stream's fd */
    return f;
}
#define DEF_FOPEN(name) \
    static FILE *(*real_##name)(const char *, const char *); \
    EXPORT FILE *name(const char *p, const char *m) { \
        if (!ON) return REAL(name)(p, m); \
        ENTER; uint64_t t0 = now_ns(); FILE *f = REAL(name)(p, m); uint64_t t1 = now_ns(); int e = errno; \
        after_fopen(f, p, m, t0, t1, OPC_OPEN); errno = e; LEAVE; return f; }
DEF_FOPEN(fopen)
DEF_FOPEN(fopen64)

#define DEF_FREOPEN(name) \
    static FILE *(*real_##name)(const char *, const char *, FILE *); \
    EXPORT FILE *name(const char *p, const char *m, FILE *s) { \
        if (!ON) return REAL(name)(p, m, s); \
        ENTER; uint64_t t0 = now_ns(); FILE *f = REAL(name)(p, m, s); uint64_t t1 = now_ns(); int e = errno; \
        if (p) { after_fopen(f, p, m, t0, t1, OPC_OPEN); } errno = e; LEAVE; return f; }
DEF_FREOPEN(freopen)
DEF_FREOPEN(freopen64)

static FILE *(*real_fdopen)(int, const char *);
EXPORT FILE *fdopen(int fd, const char *m) {
    if (!ON) return REAL(fdopen)(fd, m);
    ENTER; uint64_t t0 = now_ns(); FILE *f = REAL(fdopen)(fd, m); uint64_t t1 = now_ns(); int e = errno;
    if (!g_cfg_done) load_config();
    if (f) {
        uint64_t id = fd_id_resolve(fd);
        if (id) {
            map_put(g_streams, f, id, fd_off(fd));
            emit(OPC_FDOPEN, MOD_STDIO, 0, id, -1, fd, t0, t1);
        }
    }
    errno = e; LEAVE; return f;
}

static int (*real_fclose)(FILE *);
EXPORT int fclose(FILE *f) {
    ptrent_t *ent = ON ? map_find(g_streams, f) : NULL;
    if (!ent) return REAL(fclose)(f);
    ENTER;
    uint64_t id = ent->id;
    int fd = fileno(f);
    map_del(ent);
    uint64_t t0 = now_ns(); int r = REAL(fclose)(f); uint64_t t1 = now_ns(); int e = errno;
    if (fd >= 0) track_fd(fd, 0, 0);
    emit(OPC_CLOSE, MOD_STDIO, r != 0 ? RF_FAILED : 0, id, -1, 0, t0, t1);
    errno = e; LEAVE; return r;
}

static int (*real_fflush)(FILE *);
EXPORT int fflush(FILE *f) {
    ptrent_t *ent = (f && ON) ? map_find(g_streams, f) : NULL;
    if (!ent) return REAL(fflush)(f);
    ENTER; uint64_t t0 = now_ns(); int r = REAL(fflush)(f); uint64_t t1 = now_ns(); int e = errno;
    emit(OPC_FLUSH, MOD_STDIO, r != 0 ? RF_FAILED : 0, ent->id, -1, 0, t0, t1);
    errno = e; LEAVE; return r;
}

static void stdio_rw(ptrent_t *ent, int opc, int64_t n, uint64_t t0, uint64_t t1, int failed) {
    int64_t off = __atomic_load_n(&ent->off, __ATOMIC_RELAXED);
    int fl = failed ? RF_FAILED : 0;
    if (off >= 0 && n > 0) off = __atomic_fetch_add(&ent->off, n, __ATOMIC_RELAXED);
    if (off < 0) fl |= RF_OFFSET_UNKNOWN;
    emit(opc, MOD_STDIO, fl, ent->id, off, n > 0 ? n : 0, t0, t1);
}

#define STDIO_BODY(F, RT, CALL, OPC, NBYTES, FAILED) \
    ptrent_t *ent = ON ? map_find(g_streams, F) : NULL; \
    if (!ent) { return CALL; } \
    ENTER; uint64_t t0 = now_ns(); RT r = CALL; uint64_t t1 = now_ns(); int e = errno; \
    stdio_rw(ent, OPC, (int64_t)(NBYTES), t0, t1, FAILED); errno = e; LEAVE; return r;

static size_t (*real_fread)(void *, size_t, size_t, FILE *);
EXPORT size_t fread(void *b, size_t s, size_t n, FILE *f) { STDIO_BODY(f, size_t, REAL(fread)(b, s, n, f), OPC_READ, r * s, 0) }
static size_t (*real_fwrite)(const void *, size_t, size_t, FILE *);
EXPORT size_t fwrite(const void *b, size_t s, size_t n, FILE *f) { STDIO_BODY(f, size_t, REAL(fwrite)(b, s, n, f), OPC_WRITE, r * s, r < n) }
static size_t (*real___fread_chk)(void *, size_t, size_t, size_t, FILE *);
EXPORT size_t __fread_chk(void *b, size_t bl, size_t s, size_t n, FILE *f) { STDIO_BODY(f, size_t, REAL(__fread_chk)(b, bl, s, n, f), OPC_READ, r * s, 0) }
static int (*real_fputs)(const char *, FILE *);
EXPORT int fputs(const char *s, FILE *f) { STDIO_BODY(f, int, REAL(fputs)(s, f), OPC_WRITE, (r >= 0 ? strlen(s) : 0), r < 0) }
static int (*real_fputc)(int, FILE *);
EXPORT int fputc(int c, FILE *f) { STDIO_BODY(f, int, REAL(fputc)(c, f), OPC_WRITE, (r != EOF ? 1 : 0), r == EOF) }
static int (*real_putc)(int, FILE *);
EXPORT int putc(int c, FILE *f) { STDIO_BODY(f, int, REAL(putc)(c, f), OPC_WRITE, (r != EOF ? 1 : 0), r == EOF) }
static int (*real_fgetc)(FILE *);
EXPORT int fgetc(FILE *f) { STDIO_BODY(f, int, REAL(fgetc)(f), OPC_READ, (r != EOF ? 1 : 0), 0) }
static int (*real_getc)(FILE *);
EXPORT int getc(FILE *f) { STDIO_BODY(f, int, REAL(getc)(f), OPC_READ, (r != EOF ? 1 : 0), 0) }
static char *(*real_fgets)(char *, int, FILE *);
EXPORT char *fgets(char *s, int n, FILE *f) { STDIO_BODY(f, char *, REAL(fgets)(s, n, f), OPC_READ, (r ? strlen(r) : 0), 0) }
static char *(*real___fgets_chk)(char *, size_t, int, FILE *);
EXPORT char *__fgets_chk(char *s, size_t sl, int n, FILE *f) { STDIO_BODY(f, char *, REAL(__fgets_chk)(s, sl, n, f), OPC_READ, (r ? strlen(r) : 0), 0) }
static int (*real_vfprintf)(FILE *, const char *, va_list);
EXPORT int vfprintf(FILE *f, const char *fmt, va_list ap) { STDIO_BODY(f, int, REAL(vfprintf)(f, fmt, ap), OPC_WRITE, (r > 0 ? r : 0), r < 0) }
static int (*real___vfprintf_chk)(FILE *, int, const char *, va_list);
EXPORT int __vfprintf_chk(FILE *f, int fl, const char *fmt, va_list ap) { STDIO_BODY(f, int, REAL(__vfprintf_chk)(f, fl, fmt, ap), OPC_WRITE, (r > 0 ? r : 0), r < 0) }
EXPORT int fprintf(FILE *f, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    ptrent_t *ent = ON ? map_find(g_streams, f) : NULL;
    if (!ent) { int r = REAL(vfprintf)(f, fmt, ap); va_end(ap); return r; }
    ENTER; uint64_t t0 = now_ns(); int r = REAL(vfprintf)(f, fmt, ap); uint64_t t1 = now_ns(); int e = errno; va_end(ap);
    stdio_rw(ent, OPC_WRITE, r > 0 ? r : 0, t0, t1, r < 0); errno = e; LEAVE; return r;
}
EXPORT int __fprintf_chk(FILE *f, int fl, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    ptrent_t *ent = ON ? map_find(g_streams, f) : NULL;
    if (!ent) { int r = REAL(__vfprintf_chk)(f, fl, fmt, ap); va_end(ap); return r; }
    ENTER; uint64_t t0 = now_ns(); int r = REAL(__vfprintf_chk)(f, fl, fmt, ap); uint64_t t1 = now_ns(); int e = errno; va_end(ap);
    stdio_rw(ent, OPC_WRITE, r > 0 ? r : 0, t0, t1, r < 0); errno = e; LEAVE; return r;
}
/* fscanf: bytes consumed are not known without an extra ftell; length 0 */
static int (*real___isoc99_vfscanf)(FILE *, const char *, va_list);
EXPORT int __isoc99_fscanf(FILE *f, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    ptrent_t *ent = ON ? map_find(g_streams, f) : NULL;
    if (!ent) { int r = REAL(__isoc99_vfscanf)(f, fmt, ap); va_end(ap); return r; }
    ENTER; uint64_t t0 = now_ns(); int r = REAL(__isoc99_vfscanf)(f, fmt, ap); uint64_t t1 = now_ns(); int e = errno; va_end(ap);
    emit(OPC_READ, MOD_STDIO, RF_OFFSET_UNKNOWN, ent->id, -1, 0, t0, t1); errno = e; LEAVE; return r;
}

static void stdio_seek(ptrent_t *ent, int r, int64_t o, int wh, uint64_t t0, uint64_t t1) {
    int64_t cur = __atomic_load_n(&ent->off, __ATOMIC_RELAXED);
    int64_t nw = -1;
    if (r == 0) {
        if (wh == SEEK_SET) nw = o;
        else if (wh == SEEK_CUR && cur >= 0) nw = cur + o;
        __atomic_store_n(&ent->off, nw, __ATOMIC_RELAXED);
    }
    emit(OPC_SEEK, MOD_STDIO, (r != 0 ? RF_FAILED : 0) | (nw < 0 ? RF_OFFSET_UNKNOWN : 0), ent->id, nw, 0, t0, t1);
}
#define DEF_FSEEK(name, T) \
    static int (*real_##name)(FILE *, T, int); \
    EXPORT int name(FILE *f, T o, int wh) { \
        ptrent_t *ent = ON ? map_find(g_streams, f) : NULL; \
        if (!ent) return REAL(name)(f, o, wh); \
        ENTER; uint64_t t0 = now_ns(); int r = REAL(name)(f, o, wh); uint64_t t1 = now_ns(); int e = errno; \
        stdio_seek(ent, r, (int64_t)o, wh, t0, t1); errno = e; LEAVE; return r; }
DEF_FSEEK(fseek, long)
DEF_FSEEK(fseeko, off_t)
DEF_FSEEK(fseeko64, off64_t)

static void (*real_rewind)(FILE *);
EXPORT void rewind(FILE *f) {
    ptrent_t *ent = ON ? map_find(g_streams, f) : NULL;
    if (!ent) { REAL(rewind)(f); return; }
    ENTER; uint64_t t0 = now_ns(); REAL(rewind)(f); uint64_t t1 = now_ns(); int e = errno;
    stdio_seek(ent, 0, 0, SEEK_SET, t0, t1); errno = e; LEAVE;
}
