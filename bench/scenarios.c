/*
 * The scenarios, written once against struct bench_impl (bench.h). Every
 * row thus runs the same loop, the same random sequence and the same clock
 * around its own timer calls.
 *
 * The server model. A loop iteration ("tick") first does what the loop does
 * for its timers (updates its clock, runs what is due), then handles
 * `batch` connections, each of which resets its idle timeout (reset) or
 * starts and cancels a request timeout (start+stop). In the reset scenario
 * the virtual clock moves `tick_ns` per iteration, chosen so that each
 * connection is reset every BENCH_RESET_EVERY_MS on average: deadlines
 * mostly move later, as on an idle-connection path, and timers that were
 * moved later come due in the wheel's slots while the clock runs (that
 * deferred work is inside the timed region, and a warmup runs first so
 * the timed part sees it in steady state). In start+stop the clock stands
 * still: the N idle timeouts are just there.
 *
 * The timed regions are functions named timed_*, never inlined:
 * `valgrind --tool=callgrind --toggle-collect='timed_*'` counts exactly
 * what runs inside them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* ---- timer callbacks ---- */

int bench_fire_more;

static struct {
  const struct bench_impl *impl;
  void *x;
  int track;           /* spread: take each callback's lateness */
  uint32_t restart_ms; /* stall: restart the fired timer, this far ahead */
} fire;

void bench_fire_slow(uint32_t index) {
  if (fire.track)
    bench_track_fire(index);
  if (fire.restart_ms)
    fire.impl->start(fire.x, index, fire.restart_ms);
}

/* ---- the loop ---- */

static struct bench_run run_init(const struct bench_impl *impl,
                                 const struct bench_params *p) {
  struct bench_run r;
  r.rng.s = p->seed ? p->seed : 1;
  r.n = p->n;
  r.batch = p->batch ? p->batch : 1;
  r.tick_ns = 0;
  r.impl = impl;
  return r;
}

void bench_run_ticks(void *x, struct bench_run *r, uint64_t ticks,
                     bench_batch_fn batch) {
  const struct bench_impl *impl = r->impl;
  for (uint64_t t = 0; t < ticks; t++) {
    bench_vclock_ns += r->tick_ns;
    impl->tick(x);
    batch(x, r);
    if (impl->tick_end)
      impl->tick_end(x);
  }
}

static void drive(void *x, struct bench_run *r, uint64_t ticks,
                  bench_batch_fn batch) {
  if (r->impl->drive)
    r->impl->drive(x, r, ticks, batch);
  else
    bench_run_ticks(x, r, ticks, batch);
}

static void stats(const struct bench_impl *impl, void *x) {
  if (impl->stats)
    impl->stats(x);
}

static void refresh(const struct bench_impl *impl, void *x) {
  if (impl->refresh)
    impl->refresh(x);
}

/* N idle timers, in index order, with the random jitter (not timed). */
static void start_idle_timers(void *x, struct bench_run *r) {
  for (uint32_t i = 0; i < r->n; i++)
    r->impl->start(x, i, BENCH_IDLE_MS + bench_draw(&r->rng, r->n).jitter_ms);
}

/* Reset and start+stop, before the timed part: the loop on the virtual
 * clock with its N idle timers started (and N request timers allocated,
 * if `requests`). The row's state, or NULL on failure. */
static void *open_with_idle_timers(struct bench_run *r,
                                   const struct bench_params *p, int requests) {
  void *x;
  bench_vclock_on();
  x = r->impl->open(p);
  if (!x)
    return NULL;
  r->impl->alloc(x, p->n, requests);
  start_idle_timers(x, r);
  return x;
}

/* ---- reset, start+stop ---- */

BENCH_NOINLINE static void timed_reset(void *x, struct bench_run *r,
                                       uint64_t ticks) {
  drive(x, r, ticks, r->impl->batch_reset);
}

BENCH_NOINLINE static void timed_startstop(void *x, struct bench_run *r,
                                           uint64_t ticks) {
  drive(x, r, ticks, r->impl->batch_startstop);
}

static int scenario_reset(const struct bench_impl *impl,
                          const struct bench_params *p, struct bench_out *o) {
  struct bench_run r = run_init(impl, p);
  uint64_t t0, t1;
  void *x = open_with_idle_timers(&r, p, 0);

  if (!x)
    return 1;
  r.tick_ns = p->tick_ns;
  drive(x, &r, p->warmup / r.batch, impl->batch_reset);
  t0 = bench_real_ns();
  timed_reset(x, &r, p->m / r.batch);
  t1 = bench_real_ns();
  o->ns = (double)(t1 - t0);
  o->ops = p->m / r.batch * r.batch;
  /* idle timeouts that expired anyway */
  bench_kv("fired", (double)bench_fired);
  stats(impl, x);
  return 0;
}

static int scenario_startstop(const struct bench_impl *impl,
                              const struct bench_params *p,
                              struct bench_out *o) {
  struct bench_run r = run_init(impl, p);
  uint64_t t0, t1;
  void *x = open_with_idle_timers(&r, p, 1);

  if (!x)
    return 1;
  t0 = bench_real_ns();
  timed_startstop(x, &r, p->m / r.batch);
  t1 = bench_real_ns();
  o->ns = (double)(t1 - t0);
  o->ops = p->m / r.batch * r.batch;
  stats(impl, x);
  return 0;
}

/* ---- burst ---- */

/* Loop iterations until all n fired (or a million without): how many, and
 * the longest one (real time) in *longest_ns. */
BENCH_NOINLINE static uint64_t timed_burst(const struct bench_impl *impl,
                                           void *x, uint32_t n,
                                           uint64_t *longest_ns) {
  uint64_t iterations = 0, longest = 0;
  while (bench_fired < n && iterations < 1000000) {
    uint64_t t0 = bench_real_ns(), t1;
    impl->expire(x);
    t1 = bench_real_ns();
    if (t1 - t0 > longest)
      longest = t1 - t0;
    iterations++;
  }
  *longest_ns = longest;
  return iterations;
}

/*
 * Burst: the N timers are started with one duration (BENCH_IDLE_MS) while
 * the virtual clock crosses BENCH_WINDOW_MS, in a random order, so their
 * deadlines cover the window in an order unrelated to their addresses.
 * Then the loop sleeps past all of them and runs iterations until every
 * timer has fired: one for a loop that runs everything due, one per slice
 * for the twheel rows.
 */
static int scenario_burst(const struct bench_impl *impl,
                          const struct bench_params *p, struct bench_out *o) {
  struct bench_run r = run_init(impl, p);
  uint64_t t0, t1, iterations, longest, start_ns;
  uint32_t *order;
  void *x;

  bench_vclock_on();
  start_ns = bench_vclock_ns;
  x = impl->open(p);
  if (!x)
    return 1;
  impl->alloc(x, p->n, 0);
  order = bench_permutation(&r.rng, p->n);
  for (uint32_t k = 0; k < p->n; k++) {
    bench_vclock_ns =
        start_ns + (uint64_t)k * BENCH_WINDOW_MS * BENCH_NS_PER_MS / p->n;
    refresh(impl, x);
    impl->start(x, order[k], BENCH_IDLE_MS);
  }
  free(order);
  bench_vclock_ns =
      start_ns +
      (uint64_t)(BENCH_WINDOW_MS + BENCH_IDLE_MS + 1000) * BENCH_NS_PER_MS;
  bench_fired = 0;
  t0 = bench_real_ns();
  iterations = timed_burst(impl, x, p->n, &longest);
  t1 = bench_real_ns();
  o->ns = (double)(t1 - t0);
  o->ops = bench_fired;
  bench_kv("fired", (double)bench_fired);
  bench_kv("iterations", (double)iterations);
  bench_kv("iter_max_us", (double)longest / 1e3);
  stats(impl, x);
  if (bench_fired != p->n) {
    fprintf(stderr, "twbench: burst fired %llu of %u\n",
            (unsigned long long)bench_fired, p->n);
    return 1;
  }
  return 0;
}

/* ---- spread ---- */

/*
 * Spread: real time, real loop. Timer i is due lead_ms + jitter_i after
 * its start (jitter uniform in [0, 1 s)); the loop runs until all fired.
 * Lateness is taken from the time the start was called plus the timeout,
 * against the time the loop woke up for the callback (bench_track_fire).
 */
static int scenario_spread(const struct bench_impl *impl,
                           const struct bench_params *p, struct bench_out *o) {
  struct bench_run r = run_init(impl, p);
  uint64_t *due = bench_alloc(p->n, sizeof *due);
  uint64_t cpu0, cpu1, wall0, wall1, setup0 = bench_real_ns();
  void *x;

  bench_vclock_off();
  x = impl->open(p);
  if (!x)
    return 1;
  impl->alloc(x, p->n, 0);
  for (uint32_t i = 0; i < p->n; i++) {
    uint32_t timeout =
        (uint32_t)p->lead_ms + bench_draw(&r.rng, p->n).jitter_ms;
    /* Read before the loop's clock: a preemption in between makes the
     * lateness larger, never a false early. */
    uint64_t now = bench_real_ns();
    refresh(impl, x);
    due[i] = now + (uint64_t)impl->start(x, i, timeout) * BENCH_NS_PER_MS;
  }
  bench_fired = 0;
  bench_track_start(due);
  fire.track = 1;
  bench_fire_more = 1;
  wall0 = bench_real_ns();
  bench_kv("setup_ms", (double)(wall0 - setup0) / 1e6);
  if (wall0 - setup0 > p->lead_ms * BENCH_NS_PER_MS)
    fprintf(stderr,
            "twbench: setup took longer than --lead-ms %llu: the "
            "first timers are late before the loop runs\n",
            (unsigned long long)p->lead_ms);
  cpu0 = bench_cpu_ns();
  impl->run(x);
  cpu1 = bench_cpu_ns();
  wall1 = bench_real_ns();
  bench_fire_more = 0;
  bench_track_stop();
  o->ns = (double)(cpu1 - cpu0);
  o->ops = bench_fired;
  bench_track_report(p->n);
  bench_kv("wall_ms", (double)(wall1 - wall0) / 1e6);
  stats(impl, x);
  free(due);
  return bench_fired == p->n ? 0 : 1;
}

/* ---- memory ---- */

/* Memory: the timers' own bytes, and what the resident set grows by. */
static int scenario_memory(const struct bench_impl *impl,
                           const struct bench_params *p, struct bench_out *o) {
  struct bench_run r = run_init(impl, p);
  uint64_t heap0, heap1, rss1, rss2;
  void *x;

  bench_vclock_on();
  heap0 = bench_heap_bytes();
  x = impl->open(p);
  if (!x)
    return 1;
  heap1 = bench_heap_bytes();
  rss1 = bench_rss_bytes();
  impl->alloc(x, p->n, 0);
  start_idle_timers(x, &r);
  rss2 = bench_rss_bytes();
  o->ns = (double)impl->timer_size;
  o->ops = 1;
  bench_kv("timer_bytes", (double)impl->timer_size);
  bench_kv("rss_per_timer", (double)(rss2 - rss1) / p->n);
  bench_kv("loop_bytes", (double)(impl->loop_size + (heap1 - heap0)));
  return 0;
}

/* ---- stall ---- */

BENCH_NOINLINE static void timed_stall_advance(const struct bench_impl *impl,
                                               void *x) {
  impl->expire(x);
}

static int compare_u64(const void *a, const void *b) {
  uint64_t u = *(const uint64_t *)a, v = *(const uint64_t *)b;
  return (u > v) - (u < v);
}

/* The q-quantile (q in thousandths) of `sorted`: its ceil(q/1000 * count)th
 * smallest value. */
static uint64_t quantile(const uint64_t *sorted, uint32_t count, uint32_t q) {
  uint64_t rank = ((uint64_t)count * q + 999) / 1000;
  return sorted[rank ? rank - 1 : 0];
}

/* What one read pair of the thread CPU clock costs: the median of 101. */
static uint64_t cpu_clock_overhead_ns(void) {
  uint64_t pair[101];
  for (int i = 0; i < 101; i++) {
    uint64_t a = bench_thread_cpu_ns();
    pair[i] = bench_thread_cpu_ns() - a;
  }
  qsort(pair, 101, sizeof pair[0], compare_u64);
  return pair[50];
}

/*
 * Stall: N idle timeouts of BENCH_IDLE_MS in steady state, 1 tick = 1 ms of
 * virtual time, one loop iteration (impl->expire) per tick. The deadlines
 * start uniform in [1, BENCH_IDLE_MS] (as if the last activity were
 * uniform over the past 30 s); every tick N / stall_period random
 * connections reset theirs to now + BENCH_IDLE_MS, and a fired timer
 * restarts from its callback for as long. stall_warmup untimed ticks, then
 * stall_ticks timed ones, each advance timed alone in thread CPU time; the
 * loop clock starts so that the timed window is centred on tick
 * stall_edge (2^18: a wheel that files by absolute digits sees every
 * deadline's upper digits change there).
 */
static int scenario_stall(const struct bench_impl *impl,
                          const struct bench_params *p, struct bench_out *o) {
  struct bench_run r = run_init(impl, p);
  const uint64_t w = p->stall_warmup, t_n = p->stall_ticks;
  const uint64_t half = t_n / 2;
  uint64_t t0, sum = 0, resets = 0, fired0 = 0, worst = 0;
  uint64_t moves_max = 0, moves_sum = 0, overhead;
  uint64_t *sample;
  uint32_t *order;
  void *x;

  if (p->stall_edge < w + half || t_n == 0 || p->stall_period == 0) {
    fprintf(stderr, "twbench: stall needs --stall-edge >= warmup + ticks/2 "
                    "and non-zero ticks and period\n");
    return 1;
  }
  t0 = p->stall_edge - w - half;
  overhead = cpu_clock_overhead_ns();
  bench_vclock_on();
  bench_vclock_ns = t0 * BENCH_NS_PER_MS;
  x = impl->open(p);
  if (!x)
    return 1;
  sample = bench_alloc(t_n, sizeof *sample);
  impl->alloc(x, p->n, 0);
  refresh(impl, x);
  order = bench_permutation(&r.rng, p->n);
  for (uint32_t k = 0; k < p->n; k++) {
    uint64_t v = bench_rng_next(&r.rng) & 0xffffffffu;
    impl->start(x, order[k], 1 + (uint32_t)((v * BENCH_IDLE_MS) >> 32));
  }
  free(order);
  fire.impl = impl;
  fire.x = x;
  fire.restart_ms = BENCH_IDLE_MS;
  bench_fire_more = 1;
  bench_fired = 0;

  for (uint64_t t = 1; t <= w + t_n; t++) {
    uint64_t k = t * p->n / p->stall_period - (t - 1) * p->n / p->stall_period;
    bench_vclock_ns = (t0 + t) * BENCH_NS_PER_MS;
    if (t > w) {
      uint64_t m0 = impl->moves ? impl->moves(x) : 0, c0, c1, i = t - w - 1;
      c0 = bench_thread_cpu_ns();
      timed_stall_advance(impl, x);
      c1 = bench_thread_cpu_ns();
      sample[i] = c1 - c0;
      sum += sample[i];
      if (sample[i] > sample[worst])
        worst = i;
      if (impl->moves) {
        uint64_t moved = impl->moves(x) - m0;
        moves_sum += moved;
        if (moved > moves_max)
          moves_max = moved;
      }
    } else {
      impl->expire(x);
      if (t == w)
        fired0 = bench_fired;
    }
    for (uint64_t j = 0; j < k; j++)
      impl->start(x, bench_draw(&r.rng, p->n).idx, BENCH_IDLE_MS);
    resets += k;
  }
  bench_fire_more = 0;

  bench_kv("worst_tick_from_edge",
           (double)(t0 + w + 1 + worst) - (double)p->stall_edge);
  qsort(sample, t_n, sizeof *sample, compare_u64);
  o->ns = (double)sample[t_n - 1]; /* ns_per_op: the longest advance */
  o->ops = 1;
  bench_kv("advances", (double)t_n);
  bench_kv("max_us", (double)sample[t_n - 1] / 1e3);
  bench_kv("p999_us", (double)quantile(sample, (uint32_t)t_n, 999) / 1e3);
  bench_kv("p99_us", (double)quantile(sample, (uint32_t)t_n, 990) / 1e3);
  bench_kv("p50_us", (double)quantile(sample, (uint32_t)t_n, 500) / 1e3);
  bench_kv("mean_us", (double)sum / (double)t_n / 1e3);
  if (impl->moves) {
    bench_kv("moves_max", (double)moves_max);
    bench_kv("moves_mean", (double)moves_sum / (double)t_n);
  }
  bench_kv("t0_ms", (double)t0);
  bench_kv("edge_ms", (double)p->stall_edge);
  bench_kv("clock_overhead_us", (double)overhead / 1e3);
  bench_kv("resets", (double)resets);
  bench_kv("fired_timed", (double)(bench_fired - fired0));
  free(sample);
  return 0;
}

/* ---- by name ---- */

typedef int (*scenario_fn)(const struct bench_impl *impl,
                           const struct bench_params *p, struct bench_out *o);

static const struct {
  const char *name;
  unsigned bit;
  scenario_fn fn;
} scenarios[] = {
    {"reset", BENCH_RESET, scenario_reset},
    {"startstop", BENCH_STARTSTOP, scenario_startstop},
    {"burst", BENCH_BURST, scenario_burst},
    {"spread", BENCH_SPREAD, scenario_spread},
    {"memory", BENCH_MEMORY, scenario_memory},
    {"stall", BENCH_STALL, scenario_stall},
};
#define N_SCENARIOS (sizeof scenarios / sizeof scenarios[0])

unsigned bench_scenario_bit(const char *name) {
  for (size_t i = 0; i < N_SCENARIOS; i++)
    if (!strcmp(scenarios[i].name, name))
      return scenarios[i].bit;
  return 0;
}

const char *bench_scenario_name(unsigned bit) {
  for (size_t i = 0; i < N_SCENARIOS; i++)
    if (scenarios[i].bit == bit)
      return scenarios[i].name;
  return NULL;
}

int bench_scenario_run(const struct bench_impl *impl,
                       const struct bench_params *p, struct bench_out *o) {
  for (size_t i = 0; i < N_SCENARIOS; i++)
    if (!strcmp(scenarios[i].name, p->scenario) &&
        (impl->scenarios & scenarios[i].bit))
      return scenarios[i].fn(impl, p, o);
  return 1;
}
