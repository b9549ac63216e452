/*
 * twbench: one benchmark cell (one implementation, one scenario, one N) per
 * process. bench/run starts the cells, interleaves the repetitions and
 * writes the tables; see bench/README.md for what each number means.
 *
 * Every implementation file (impl_*.c) defines the hooks listed in
 * scenarios.h and includes it; scenarios.h writes the workloads once, so
 * every implementation runs the same loop around its own timer calls.
 */
#ifndef TW_BENCH_H
#define TW_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <twheel.h>

#if defined(__GNUC__)
#define BENCH_NOINLINE __attribute__((noinline))
#else
#define BENCH_NOINLINE
#endif

#define BENCH_NS_PER_MS 1000000ull
#define BENCH_NS_PER_S 1000000000ull

/* The workload (issue 5). */
#define BENCH_IDLE_MS 30000u     /* idle timeout ... */
#define BENCH_JITTER_MS 1000u    /* ... + uniform jitter in [0, 1000) ms */
#define BENCH_REQUEST_MS 5000u   /* request timeout (start+stop) */
#define BENCH_RESET_EVERY_MS 2000u /* mean time between two resets of one connection */
#define BENCH_WINDOW_MS 1000u    /* expiry: deadlines spread over this window */
#define BENCH_COMMON_STEP_MS 4u  /* spread: libevent common timeouts, 250 durations */

/* xorshift64*: the one random sequence every implementation replays. */
struct bench_rng {
  uint64_t s;
};

static inline uint64_t bench_rng_next(struct bench_rng *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* One draw: which connection (uniform in [0, n)) and its jitter in ms. */
struct bench_draw {
  uint32_t idx;
  uint32_t jitter_ms;
};

static inline struct bench_draw bench_draw(struct bench_rng *r, uint32_t n) {
  uint64_t x = bench_rng_next(r);
  struct bench_draw d;
  d.idx = (uint32_t)(((x >> 32) * n) >> 32);
  d.jitter_ms = (uint32_t)(((x & 0xffffffffu) * BENCH_JITTER_MS) >> 32);
  return d;
}

/* What one cell runs; every field is printed with the result. */
struct bench_params {
  const char *scenario; /* reset, startstop, burst, spread, memory */
  uint32_t n;           /* live timers */
  uint64_t m;           /* timed operations (a multiple of batch) */
  uint64_t warmup;      /* reset: untimed operations before the timed ones */
  uint32_t batch;       /* operations per loop iteration */
  uint64_t tick_ns;     /* virtual time per loop iteration (reset) */
  uint64_t seed;
  uint64_t lead_ms;     /* spread: the window starts this long after setup */
};

/*
 * The result: `ns` over `ops` is the figure of the cell; the scenario adds
 * its other figures with bench_kv(). main() prints one line of key=value.
 */
struct bench_out {
  double ns;
  uint64_t ops;
};

void bench_kv(const char *key, double value);
void bench_kv_str(const char *key, const char *value);
/* The twheel adapter rows: their counters over the timed part, as
 * adapter_wakeups, adapter_empty and adapter_rearms. */
void bench_kv_adapter(const tw_stats *before, const tw_stats *after);

/* One implementation: NULL scenarios do not apply to it. */
typedef int (*bench_fn)(const struct bench_params *p, struct bench_out *o);
struct bench_impl {
  const char *name;  /* short id used on the command line and in the CSV */
  const char *label; /* what the tables say */
  bench_fn reset, startstop, burst, spread, memory;
};

/* The spread scenario: the one whose callbacks take their lateness. */
static inline int bench_is_spread(const struct bench_params *p) {
  return strcmp(p->scenario, "spread") == 0;
}

/* ---- clock.c: the loop clock, real time, wakeup accounting ---- */

/*
 * The loop clock. clock.c defines clock_gettime(), so libuv, libevent, the
 * adapters and this program all read CLOCK_MONOTONIC(_COARSE) through it.
 * With the virtual clock on, that clock says bench_vclock_ns (after paying
 * for the real read, so a clock read costs what it costs); off, it is the
 * real clock. The scenarios move bench_vclock_ns themselves.
 */
extern uint64_t bench_vclock_ns;
void bench_vclock_on(void);  /* starts at the real time, then only moves when set */
void bench_vclock_off(void);
uint64_t bench_loop_ns(void); /* clock_gettime(CLOCK_MONOTONIC) as a loop reads it */

uint64_t bench_real_ns(void); /* the real CLOCK_MONOTONIC, always */
uint64_t bench_cpu_ns(void);  /* CPU time of this process */

/*
 * Timer callbacks call bench_fired_one(). With tracking on (spread), the
 * lateness of each callback is taken against `due_ns[index]`, at the time
 * the loop last returned from its poll (clock.c wraps epoll_wait and
 * epoll_pwait; the core's poll() loop calls bench_poll_enter/exit itself).
 */
extern uint64_t bench_fired;
void bench_track_start(const uint64_t *due_ns);
void bench_track_stop(void);
void bench_track_fire(uint32_t index);
void bench_poll_enter(void);
void bench_poll_exit(void);
void bench_track_report(uint64_t n); /* prints wakeups, empty, lateness */

static inline void bench_fired_one(void) { bench_fired++; }

/* ---- memory ---- */
uint64_t bench_rss_bytes(void);  /* resident set size */
uint64_t bench_heap_bytes(void); /* bytes malloc has handed out */

/* ---- allocation ---- */
void *bench_alloc(size_t count, size_t size); /* zeroed; exits on failure */
uint32_t *bench_permutation(struct bench_rng *r, uint32_t n);

#endif /* TW_BENCH_H */
