/*
 * The scenarios, written once. An implementation file defines `struct impl`
 * (its loop and its timer arrays), includes this file, then defines the
 * hooks declared below. Every implementation thus runs the same loop, the
 * same random sequence and the same clock around its own timer calls.
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
 * Define BENCH_NO_TIMERS before including to get reset and start+stop only
 * (the floor row).
 */
#ifndef TW_BENCH_SCENARIOS_H
#define TW_BENCH_SCENARIOS_H

#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct run {
  struct bench_rng rng;
  uint32_t n;
  uint32_t batch;
  uint64_t tick_ns;
};

typedef void (*batch_fn)(struct impl *x, struct run *r);

/* ---- hooks: every implementation defines these ---- */

/* Creates the loop (its clock is the loop clock now); 0 or failure. */
static int h_open(struct impl *x, const struct bench_params *p);
/* Allocates and initialises n idle timers and, if `requests`, n request
 * timers. Not timed. */
static void h_alloc(struct impl *x, uint32_t n, int requests);
/* (Re)starts idle timer i, `timeout_ms` from the loop's now; returns the
 * timeout it really asked for (libevent common timeouts round it). */
static uint32_t h_start(struct impl *x, uint32_t i, uint32_t timeout_ms);
/* Starts request timer i for BENCH_REQUEST_MS, then stops it. */
static void h_req_start(struct impl *x, uint32_t i);
static void h_req_stop(struct impl *x, uint32_t i);
/* A loop iteration's timer work before its batch, and after it. */
static void h_tick(struct impl *x);
static void h_tick_end(struct impl *x);
/* Runs `ticks` iterations: run_ticks(), or run_ticks() from inside the
 * loop's own dispatch (libevent: its time cache is valid there). */
static void h_drive(struct impl *x, struct run *r, uint64_t ticks, batch_fn batch);
/* Prints the implementation's own counters, if any. */
static void h_stats(struct impl *x);

#ifndef BENCH_NO_TIMERS
/* Makes the loop see the loop clock's current time (setup only). */
static void h_refresh(struct impl *x);
/* Burst: one loop iteration, which runs what is due. */
static void h_expire(struct impl *x);
/* Spread: runs the real loop until no timer is pending. */
static void h_run(struct impl *x);
/* Memory: bytes of one timer, and of the loop objects the caller owns. */
static size_t h_timer_size(void);
static size_t h_loop_size(void);
#endif

/* ---- the workloads ---- */

static struct run run_init(const struct bench_params *p) {
  struct run r;
  r.rng.s = p->seed ? p->seed : 1;
  r.n = p->n;
  r.batch = p->batch ? p->batch : 1;
  r.tick_ns = 0;
  return r;
}

static void batch_reset(struct impl *x, struct run *r) {
  for (uint32_t k = 0; k < r->batch; k++) {
    struct bench_draw d = bench_draw(&r->rng, r->n);
    h_start(x, d.idx, BENCH_IDLE_MS + d.jitter_ms);
  }
}

static void batch_startstop(struct impl *x, struct run *r) {
  for (uint32_t k = 0; k < r->batch; k++) {
    struct bench_draw d = bench_draw(&r->rng, r->n);
    h_req_start(x, d.idx);
    h_req_stop(x, d.idx);
  }
}

static void run_ticks(struct impl *x, struct run *r, uint64_t ticks,
                      batch_fn batch) {
  for (uint64_t t = 0; t < ticks; t++) {
    bench_vclock_ns += r->tick_ns;
    h_tick(x);
    batch(x, r);
    h_tick_end(x);
  }
}

/* The timed regions. Not inlined: `valgrind --tool=callgrind
 * --toggle-collect='timed_*'` counts exactly what runs inside them. */
BENCH_NOINLINE static void timed_reset(struct impl *x, struct run *r,
                                       uint64_t ticks) {
  h_drive(x, r, ticks, batch_reset);
}

BENCH_NOINLINE static void timed_startstop(struct impl *x, struct run *r,
                                           uint64_t ticks) {
  h_drive(x, r, ticks, batch_startstop);
}

/* N idle timers, in index order, with the random jitter (not timed). */
static void start_idle_timers(struct impl *x, struct run *r) {
  for (uint32_t i = 0; i < r->n; i++)
    h_start(x, i, BENCH_IDLE_MS + bench_draw(&r->rng, r->n).jitter_ms);
}

/* Reset and start+stop, before the timed part: the loop on the virtual
 * clock with its N idle timers started (and N request timers allocated,
 * if `requests`). 0 or failure. */
static int open_with_idle_timers(struct impl *x, struct run *r,
                                 const struct bench_params *p, int requests) {
  bench_vclock_on();
  if (h_open(x, p) != 0)
    return 1;
  h_alloc(x, p->n, requests);
  start_idle_timers(x, r);
  return 0;
}

static int scenario_reset(const struct bench_params *p, struct bench_out *o) {
  static struct impl x;
  struct run r = run_init(p);
  uint64_t t0, t1;

  if (open_with_idle_timers(&x, &r, p, 0) != 0)
    return 1;
  r.tick_ns = p->tick_ns;
  h_drive(&x, &r, p->warmup / r.batch, batch_reset);
  t0 = bench_real_ns();
  timed_reset(&x, &r, p->m / r.batch);
  t1 = bench_real_ns();
  o->ns = (double)(t1 - t0);
  o->ops = p->m / r.batch * r.batch;
  bench_kv("fired", (double)bench_fired); /* idle timeouts that expired anyway */
  h_stats(&x);
  return 0;
}

static int scenario_startstop(const struct bench_params *p,
                              struct bench_out *o) {
  static struct impl x;
  struct run r = run_init(p);
  uint64_t t0, t1;

  if (open_with_idle_timers(&x, &r, p, 1) != 0)
    return 1;
  t0 = bench_real_ns();
  timed_startstop(&x, &r, p->m / r.batch);
  t1 = bench_real_ns();
  o->ns = (double)(t1 - t0);
  o->ops = p->m / r.batch * r.batch;
  h_stats(&x);
  return 0;
}

#ifndef BENCH_NO_TIMERS
BENCH_NOINLINE static uint64_t timed_burst(struct impl *x, uint32_t n) {
  uint64_t iterations = 0;
  while (bench_fired < n && iterations < 1000000) {
    h_expire(x);
    iterations++;
  }
  return iterations;
}

/*
 * Burst: the N timers are started with one duration (BENCH_IDLE_MS) while
 * the virtual clock crosses BENCH_WINDOW_MS, in a random order, so their
 * deadlines cover the window in an order unrelated to their addresses.
 * Then the loop sleeps past all of them and one iteration runs them all.
 */
static int scenario_burst(const struct bench_params *p, struct bench_out *o) {
  static struct impl x;
  struct run r = run_init(p);
  uint64_t t0, t1, iterations, start_ns;
  uint32_t *order;

  bench_vclock_on();
  start_ns = bench_vclock_ns;
  if (h_open(&x, p) != 0)
    return 1;
  h_alloc(&x, p->n, 0);
  order = bench_permutation(&r.rng, p->n);
  for (uint32_t k = 0; k < p->n; k++) {
    bench_vclock_ns = start_ns + (uint64_t)k * BENCH_WINDOW_MS * BENCH_NS_PER_MS / p->n;
    h_refresh(&x);
    h_start(&x, order[k], BENCH_IDLE_MS);
  }
  free(order);
  bench_vclock_ns = start_ns + (uint64_t)(BENCH_WINDOW_MS + BENCH_IDLE_MS + 1000) * BENCH_NS_PER_MS;
  bench_fired = 0;
  t0 = bench_real_ns();
  iterations = timed_burst(&x, p->n);
  t1 = bench_real_ns();
  o->ns = (double)(t1 - t0);
  o->ops = bench_fired;
  bench_kv("fired", (double)bench_fired);
  bench_kv("iterations", (double)iterations);
  h_stats(&x);
  if (bench_fired != p->n) {
    fprintf(stderr, "twbench: burst fired %llu of %u\n",
            (unsigned long long)bench_fired, p->n);
    return 1;
  }
  return 0;
}

/*
 * Spread: real time, real loop. Timer i is due lead_ms + jitter_i after
 * its start (jitter uniform in [0, 1 s)); the loop runs until all fired.
 * Lateness is taken from the time the start was called plus the timeout,
 * against the time the loop woke up for the callback (bench_track_fire).
 */
static int scenario_spread(const struct bench_params *p, struct bench_out *o) {
  static struct impl x;
  struct run r = run_init(p);
  uint64_t *due = bench_alloc(p->n, sizeof *due);
  uint64_t cpu0, cpu1, wall0, wall1, setup0 = bench_real_ns();

  bench_vclock_off();
  if (h_open(&x, p) != 0)
    return 1;
  h_alloc(&x, p->n, 0);
  for (uint32_t i = 0; i < p->n; i++) {
    uint32_t timeout = (uint32_t)p->lead_ms + bench_draw(&r.rng, p->n).jitter_ms;
    /* Read before the loop's clock: a preemption in between makes the
     * lateness larger, never a false early. */
    uint64_t now = bench_real_ns();
    h_refresh(&x);
    due[i] = now + (uint64_t)h_start(&x, i, timeout) * BENCH_NS_PER_MS;
  }
  bench_fired = 0;
  bench_track_start(due);
  wall0 = bench_real_ns();
  bench_kv("setup_ms", (double)(wall0 - setup0) / 1e6);
  if (wall0 - setup0 > p->lead_ms * BENCH_NS_PER_MS)
    fprintf(stderr, "twbench: setup took longer than --lead-ms %llu: the "
            "first timers are late before the loop runs\n",
            (unsigned long long)p->lead_ms);
  cpu0 = bench_cpu_ns();
  h_run(&x);
  cpu1 = bench_cpu_ns();
  wall1 = bench_real_ns();
  bench_track_stop();
  o->ns = (double)(cpu1 - cpu0);
  o->ops = bench_fired;
  bench_track_report(p->n);
  bench_kv("wall_ms", (double)(wall1 - wall0) / 1e6);
  h_stats(&x);
  free(due);
  return bench_fired == p->n ? 0 : 1;
}

/* Memory: the timers' own bytes, and what the resident set grows by. */
static int scenario_memory(const struct bench_params *p, struct bench_out *o) {
  static struct impl x;
  struct run r = run_init(p);
  uint64_t heap0, heap1, rss1, rss2;

  bench_vclock_on();
  heap0 = bench_heap_bytes();
  if (h_open(&x, p) != 0)
    return 1;
  heap1 = bench_heap_bytes();
  rss1 = bench_rss_bytes();
  h_alloc(&x, p->n, 0);
  start_idle_timers(&x, &r);
  rss2 = bench_rss_bytes();
  o->ns = (double)h_timer_size();
  o->ops = 1;
  bench_kv("timer_bytes", (double)h_timer_size());
  bench_kv("rss_per_timer", (double)(rss2 - rss1) / p->n);
  bench_kv("loop_bytes", (double)(h_loop_size() + (heap1 - heap0)));
  return 0;
}

#define BENCH_IMPL_DEFINE(var, name, label)                                  \
  const struct bench_impl var = {name,           label,                      \
                                 scenario_reset, scenario_startstop,         \
                                 scenario_burst, scenario_spread,            \
                                 scenario_memory}
#else
#define BENCH_IMPL_DEFINE(var, name, label)                                  \
  const struct bench_impl var = {name, label, scenario_reset,                \
                                 scenario_startstop, NULL, NULL, NULL}
#endif

#endif /* TW_BENCH_SCENARIOS_H */
