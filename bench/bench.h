/*
 * twbench: one benchmark cell (one implementation, one scenario, one N) per
 * process. bench/run starts the cells, interleaves the repetitions and
 * writes the tables; see bench/README.md for what each number means.
 *
 * The interface: every row (impl_*.c) fills in a struct bench_impl, a table
 * of functions on an opaque state of its own (its loop and its timers), and
 * scenarios.c writes the workloads once against it, so every row runs the
 * same loop, the same random sequence and the same clock around its own
 * timer calls.
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
#define BENCH_IDLE_MS 30000u   /* idle timeout ... */
#define BENCH_JITTER_MS 1000u  /* ... + uniform jitter in [0, 1000) ms */
#define BENCH_REQUEST_MS 5000u /* request timeout (start+stop) */
/* mean time between two resets of one connection (reset) */
#define BENCH_RESET_EVERY_MS 2000u
#define BENCH_WINDOW_MS 1000u   /* expiry: deadlines spread over this */
#define BENCH_COMMON_STEP_MS 4u /* spread: libevent common timeouts */

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
  const char *scenario; /* reset, startstop, burst, spread, memory, stall */
  uint32_t n;           /* live timers */
  uint64_t m;           /* timed operations (a multiple of batch) */
  uint64_t warmup;      /* reset: untimed operations before the timed ones */
  uint32_t batch;       /* operations per loop iteration */
  uint64_t tick_ns;     /* virtual time per loop iteration (reset) */
  uint64_t seed;
  uint64_t lead_ms;      /* spread: the window starts this long after setup */
  uint64_t stall_edge;   /* stall: the tick (ms) the timed window centres on */
  uint32_t stall_warmup; /* stall: untimed ticks first */
  uint32_t stall_ticks;  /* stall: timed advances */
  uint32_t stall_period; /* stall: ms between two resets of one connection */
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
 * adapter_wakeups, adapter_empty, adapter_rearms and adapter_maintenance
 * (tw_stats). */
void bench_kv_adapter(const tw_stats *before, const tw_stats *after);

/* ---- the interface between the scenarios and the rows ---- */

struct bench_impl;

/*
 * A scenario's running state, handed to the row's batches. The server
 * model: a loop iteration ("tick") first does the loop's timer work
 * (impl->tick), then handles `batch` connections (a batch function), then
 * impl->tick_end; the virtual clock moves `tick_ns` per iteration.
 */
struct bench_run {
  struct bench_rng rng;
  uint32_t n;
  uint32_t batch;
  uint64_t tick_ns;
  const struct bench_impl *impl;
};

/* One loop iteration's `batch` connections. */
typedef void (*bench_batch_fn)(void *x, struct bench_run *r);
typedef uint32_t (*bench_start_fn)(void *x, uint32_t i, uint32_t timeout_ms);
typedef void (*bench_req_fn)(void *x, uint32_t i);

/* Scenario bits of bench_impl.scenarios. */
#define BENCH_RESET 0x01u
#define BENCH_STARTSTOP 0x02u
#define BENCH_BURST 0x04u
#define BENCH_SPREAD 0x08u
#define BENCH_MEMORY 0x10u
#define BENCH_STALL 0x20u

/*
 * One row. `x` is the row's state, what open() returned. A hook that none
 * of the row's scenarios uses may be NULL; so may tick_end, drive, stats
 * and refresh (nothing to do).
 */
struct bench_impl {
  const char *name;   /* short id used on the command line and in the CSV */
  const char *label;  /* what the tables say */
  unsigned scenarios; /* BENCH_* bits: the scenarios it runs */

  /* Creates the loop (its clock is the loop clock now): the row's state,
   * NULL on failure. Called once per process. */
  void *(*open)(const struct bench_params *p);
  /* Allocates and initialises n idle timers and, if `requests`, n request
   * timers. Not timed. */
  void (*alloc)(void *x, uint32_t n, int requests);
  /* (Re)starts idle timer i, `timeout_ms` from the loop's now; returns the
   * timeout it really asked for (libevent common timeouts round it). */
  bench_start_fn start;
  /* reset and start+stop: one iteration's connections, written with
   * bench_batch_reset() and bench_batch_startstop() below. */
  bench_batch_fn batch_reset, batch_startstop;
  /* A loop iteration's timer work before its batch, and after it. */
  void (*tick)(void *x);
  void (*tick_end)(void *x);
  /* Runs `ticks` iterations: bench_run_ticks(), or bench_run_ticks() from
   * inside the loop's own dispatch (libevent: its time cache is valid
   * there); resets the row's counters first. NULL: bench_run_ticks(). */
  void (*drive)(void *x, struct bench_run *r, uint64_t ticks,
                bench_batch_fn batch);
  /* Prints the row's own counters, if any. */
  void (*stats)(void *x);

  /* Makes the loop see the loop clock's current time (setup only). */
  void (*refresh)(void *x);
  /* Burst and stall: one loop iteration, which runs what is due at the
   * loop clock's time (a twheel row: at most one slice). */
  void (*expire)(void *x);
  /* Spread: runs the real loop until no timer is pending. */
  void (*run)(void *x);
  /* Stall: the twheel rows' tw_moves() (timers moved between slots). */
  uint64_t (*moves)(void *x);
  /* Memory: bytes of one timer, and of the loop objects the caller owns. */
  size_t timer_size, loop_size;
};

/*
 * The batches, written once. A row defines its batch_reset and
 * batch_startstop as calls of these with its own functions: they are
 * inlined there, so its timer calls are plain calls, as in a server.
 */
static inline void bench_batch_reset(void *x, struct bench_run *r,
                                     bench_start_fn start) {
  for (uint32_t k = 0; k < r->batch; k++) {
    struct bench_draw d = bench_draw(&r->rng, r->n);
    start(x, d.idx, BENCH_IDLE_MS + d.jitter_ms);
  }
}

/* Starts request timer i for BENCH_REQUEST_MS, then stops it. */
static inline void bench_batch_startstop(void *x, struct bench_run *r,
                                         bench_req_fn req_start,
                                         bench_req_fn req_stop) {
  for (uint32_t k = 0; k < r->batch; k++) {
    struct bench_draw d = bench_draw(&r->rng, r->n);
    req_start(x, d.idx);
    req_stop(x, d.idx);
  }
}

/* ---- scenarios.c ---- */

/* `ticks` loop iterations of r->impl: the loop clock moves r->tick_ns,
 * then tick, batch, tick_end. */
void bench_run_ticks(void *x, struct bench_run *r, uint64_t ticks,
                     bench_batch_fn batch);

/* The BENCH_* bit of a scenario's name, 0 for none; and the reverse. */
unsigned bench_scenario_bit(const char *name);
const char *bench_scenario_name(unsigned bit);

/* Runs p->scenario on `impl`; 0, or 1 on failure. */
int bench_scenario_run(const struct bench_impl *impl,
                       const struct bench_params *p, struct bench_out *o);

/* The spread scenario: the one whose callbacks take their lateness. */
static inline int bench_is_spread(const struct bench_params *p) {
  return strcmp(p->scenario, "spread") == 0;
}

/*
 * Every timer callback calls bench_fire(index of its idle timer). It
 * counts; while a scenario needs more (spread: the callback's lateness;
 * stall: the timer restarts), bench_fire_more is set and
 * bench_fire_slow() does it.
 */
extern uint64_t bench_fired;
extern int bench_fire_more;
void bench_fire_slow(uint32_t index);

static inline void bench_fire(uint32_t index) {
  bench_fired++;
  if (bench_fire_more)
    bench_fire_slow(index);
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
/* Starts at the real time, then only moves when set. */
void bench_vclock_on(void);
void bench_vclock_off(void);
uint64_t bench_loop_ns(void); /* CLOCK_MONOTONIC as a loop reads it */

uint64_t bench_real_ns(void);       /* the real CLOCK_MONOTONIC, always */
uint64_t bench_cpu_ns(void);        /* CPU time of this process */
uint64_t bench_thread_cpu_ns(void); /* CPU time of this thread */

/*
 * With tracking on (spread), the lateness of each callback is taken
 * against `due_ns[index]`, at the time the loop last returned from its
 * poll (clock.c wraps epoll_wait and epoll_pwait; the core's poll() loop
 * calls bench_poll_enter/exit itself).
 */
void bench_track_start(const uint64_t *due_ns);
void bench_track_stop(void);
void bench_track_fire(uint32_t index);
void bench_poll_enter(void);
void bench_poll_exit(void);
void bench_track_report(uint64_t n); /* prints wakeups, empty, lateness */

/* ---- memory ---- */
uint64_t bench_rss_bytes(void);  /* resident set size */
uint64_t bench_heap_bytes(void); /* bytes malloc has handed out */

/* ---- allocation ---- */
void *bench_alloc(size_t count, size_t size); /* zeroed; exits on failure */
/* A row's n timers of `size` bytes: zeroed, then init(x, timer) on each
 * (init NULL: zeroed is enough). */
typedef void (*bench_init_fn)(void *x, void *timer);
void *bench_timers(void *x, uint32_t n, size_t size, bench_init_fn init);
uint32_t *bench_permutation(struct bench_rng *r, uint32_t n);

#endif /* TW_BENCH_H */
