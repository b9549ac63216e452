/*
 * The loop clock and the wakeup counters, shared by every implementation.
 *
 * clock_gettime() is defined here, so the libraries' calls resolve to it
 * (the executable is searched first). It always makes the real call, so a
 * clock read costs what it costs on this machine (a vDSO call), then, with
 * the virtual clock on, replaces the monotonic answer with bench_vclock_ns.
 * That gives libuv, libevent, the adapters and the core one shared,
 * deterministic "now" that the reset scenario moves as a busy server's
 * clock moves, without sleeping.
 *
 * epoll_wait() and epoll_pwait() are wrapped the same way to count loop
 * wakeups in the spread scenario: every return from the loop's poll is a
 * wakeup, and a wakeup after which no timer callback ran is an empty one.
 */
#include "bench.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/epoll.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

uint64_t bench_vclock_ns;
uint64_t bench_fired;

static int vclock_enabled;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

/* dlsym returns an object pointer; copy it into a function pointer. */
static void resolve(void *fn_ptr, size_t size, const char *name) {
  void *sym = dlsym(RTLD_NEXT, name);
  if (!sym) {
    fprintf(stderr, "twbench: cannot find %s: %s\n", name, dlerror());
    exit(2);
  }
  memcpy(fn_ptr, &sym, size);
}

static int is_monotonic(clockid_t id) {
#if defined(CLOCK_MONOTONIC_COARSE)
  if (id == CLOCK_MONOTONIC_COARSE)
    return 1;
#endif
  return id == CLOCK_MONOTONIC;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int r;
  if (!real_clock_gettime)
    resolve(&real_clock_gettime, sizeof real_clock_gettime, "clock_gettime");
  r = real_clock_gettime(id, ts);
  if (r == 0 && vclock_enabled && is_monotonic(id)) {
    ts->tv_sec = (time_t)(bench_vclock_ns / BENCH_NS_PER_S);
    ts->tv_nsec = (long)(bench_vclock_ns % BENCH_NS_PER_S);
  }
  return r;
}

static uint64_t read_clock(clockid_t id) {
  struct timespec ts;
  if (!real_clock_gettime)
    resolve(&real_clock_gettime, sizeof real_clock_gettime, "clock_gettime");
  real_clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * BENCH_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t bench_real_ns(void) {
  return read_clock(CLOCK_MONOTONIC);
}

uint64_t bench_cpu_ns(void) {
  return read_clock(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t bench_thread_cpu_ns(void) {
  return read_clock(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t bench_loop_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * BENCH_NS_PER_S + (uint64_t)ts.tv_nsec;
}

void bench_vclock_on(void) {
  bench_vclock_ns = bench_real_ns();
  vclock_enabled = 1;
}

void bench_vclock_off(void) {
  vclock_enabled = 0;
}

/* ---- wakeups and lateness (spread) ---- */

/* Lateness histogram: 10 us buckets from -10 ms (earlier ones count there)
 * to +990 ms (later ones count in the last). */
#define LATE_BUCKET_NS 10000
#define LATE_MIN_NS (-10000000LL)
#define LATE_BUCKETS 100000

static struct {
  int on;
  const uint64_t *due_ns;
  uint64_t wake_ns; /* when the loop last returned from its poll */
  int woke;         /* a poll returned and the loop has not polled again */
  uint64_t fired_at_wake;
  uint64_t polls, wakeups, empty;
  uint64_t early, early_max_ns, late_max_ns;
  uint64_t *late_hist;
} track;

void bench_track_start(const uint64_t *due_ns) {
  memset(&track, 0, sizeof track);
  track.late_hist = bench_alloc(LATE_BUCKETS, sizeof *track.late_hist);
  track.due_ns = due_ns;
  track.wake_ns = bench_real_ns();
  track.on = 1;
}

static void close_wakeup(void) {
  if (track.woke) {
    track.wakeups++;
    track.empty += bench_fired == track.fired_at_wake;
    track.woke = 0;
  }
}

void bench_track_stop(void) {
  close_wakeup();
  track.on = 0;
}

void bench_poll_enter(void) {
  if (!track.on)
    return;
  close_wakeup();
  track.polls++;
}

void bench_poll_exit(void) {
  if (!track.on)
    return;
  track.wake_ns = bench_real_ns();
  track.woke = 1;
  track.fired_at_wake = bench_fired;
}

/*
 * A callback's time is the loop's last wakeup (one clock read per wakeup, not
 * per callback). A callback that seems early is checked against the clock
 * itself: the loop may have read its own clock after waking up.
 */
void bench_track_fire(uint32_t index) {
  uint64_t due = track.due_ns[index], at = track.wake_ns;
  long long late, bucket;
  if (at < due)
    at = bench_real_ns();
  late = (long long)(at - due); /* two's complement */
  if (at < due) {
    track.early++;
    if (due - at > track.early_max_ns)
      track.early_max_ns = due - at;
  } else if (at - due > track.late_max_ns) {
    track.late_max_ns = at - due;
  }
  bucket = (late - LATE_MIN_NS) / LATE_BUCKET_NS;
  if (late < LATE_MIN_NS)
    bucket = 0;
  if (bucket >= LATE_BUCKETS)
    bucket = LATE_BUCKETS - 1;
  track.late_hist[bucket]++;
}

/* Signed lateness (ms) at quantile q: the middle of its bucket. */
static double late_quantile_ms(double q) {
  uint64_t total = 0, seen = 0;
  for (uint32_t b = 0; b < LATE_BUCKETS; b++)
    total += track.late_hist[b];
  if (!total)
    return 0;
  for (uint32_t b = 0; b < LATE_BUCKETS; b++) {
    seen += track.late_hist[b];
    if ((double)seen >= q * (double)total)
      return ((double)LATE_MIN_NS + ((double)b + 0.5) * LATE_BUCKET_NS) / 1e6;
  }
  return (double)track.late_max_ns / 1e6;
}

void bench_track_report(uint64_t n) {
  bench_kv("fired", (double)bench_fired);
  bench_kv("polls", (double)track.polls);
  bench_kv("wakeups", (double)track.wakeups);
  bench_kv("empty_wakeups", (double)track.empty);
  bench_kv("empty_pct",
           track.wakeups ? 100.0 * (double)track.empty / (double)track.wakeups
                         : 0);
  bench_kv("late_p50_ms", late_quantile_ms(0.50));
  bench_kv("late_p99_ms", late_quantile_ms(0.99));
  bench_kv("late_max_ms", (double)track.late_max_ns / 1e6);
  bench_kv("early", (double)track.early);
  bench_kv("early_max_ms", (double)track.early_max_ns / 1e6);
  if (bench_fired != n)
    fprintf(stderr, "twbench: %llu of %llu timers fired\n",
            (unsigned long long)bench_fired, (unsigned long long)n);
  free(track.late_hist);
  track.late_hist = NULL;
}

#if defined(__linux__)
static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static int (*real_epoll_pwait)(int, struct epoll_event *, int, int,
                               const sigset_t *);

int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
               int timeout) {
  int r;
  if (!real_epoll_wait)
    resolve(&real_epoll_wait, sizeof real_epoll_wait, "epoll_wait");
  bench_poll_enter();
  r = real_epoll_wait(epfd, events, maxevents, timeout);
  bench_poll_exit();
  return r;
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
                int timeout, const sigset_t *sigmask) {
  int r;
  if (!real_epoll_pwait)
    resolve(&real_epoll_pwait, sizeof real_epoll_pwait, "epoll_pwait");
  bench_poll_enter();
  r = real_epoll_pwait(epfd, events, maxevents, timeout, sigmask);
  bench_poll_exit();
  return r;
}
#endif

/* ---- memory ---- */

uint64_t bench_rss_bytes(void) {
  unsigned long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  if (fscanf(f, "%lu %lu", &size, &resident) != 2)
    resident = 0;
  fclose(f);
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t bench_heap_bytes(void) {
#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#else
  return 0;
#endif
}

void *bench_alloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "twbench: out of memory (%zu x %zu bytes)\n", count, size);
    exit(2);
  }
  return p;
}

void *bench_timers(void *x, uint32_t n, size_t size, bench_init_fn init) {
  unsigned char *t = bench_alloc(n, size);
  for (uint32_t i = 0; init && i < n; i++)
    init(x, t + (size_t)i * size);
  return t;
}

uint32_t *bench_permutation(struct bench_rng *r, uint32_t n) {
  uint32_t *perm = bench_alloc(n, sizeof *perm);
  for (uint32_t i = 0; i < n; i++)
    perm[i] = i;
  for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
    uint32_t j = (uint32_t)(((bench_rng_next(r) >> 32) * i) >> 32);
    uint32_t tmp = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = tmp;
  }
  return perm;
}
