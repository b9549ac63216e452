/*
 * twheel core in a loop of its own, time in ms of CLOCK_MONOTONIC, driven
 * in one of two ways:
 *
 *  - CORE_POLL 0 (row "tw"): the way the adapters drive it, with a
 *    tw_driver whose loop timer is `armed`: the loop runs the driver's
 *    slice of the wheel only when the clock reaches it; starts and stops
 *    tell the driver (a start earlier than `armed` lowers it, a stop or a
 *    later reset leaves it). Starts are absolute (tw_timer_start_at from
 *    the loop's clock), since tw_now() only moves at wakeups.
 *  - CORE_POLL 1 (row "twpoll", impl_corepoll.c): examples/poll-loop.c,
 *    every iteration calls tw_advance() and tw_next_expiry(), and starts
 *    are relative (tw_timer_start).
 */
#include <poll.h>
#include <stdio.h>

#include <twheel.h>

#include "bench.h"

#ifndef CORE_POLL
#define CORE_POLL 0
#endif

struct impl {
  tw_wheel *w;
  tw_timer *idle, *req;
  uint64_t now;            /* the loop's clock (ms) at this iteration */
  tw_driver driver;        /* row "tw": its `armed` is the loop's timer */
  uint64_t armed;          /* row "twpoll": when the loop would wake next */
  uint64_t wakeups, empty; /* row "twpoll": iterations at or past `armed`,
                              and the ones that fired nothing */
  int track;
};

static struct impl *self;

#if CORE_POLL
#define BENCH_NO_TIMERS /* burst, spread, memory: the same as row "tw" */
#endif
#include "scenarios.h"

static uint64_t now_ms(void) {
  return bench_loop_ns() / BENCH_NS_PER_MS;
}

static void on_fire(tw_timer *t) {
  bench_fired_one();
  if (self->track)
    bench_track_fire((uint32_t)(t - self->idle));
}

/* The driver's `arm`: this loop's timer is the time it compares with. */
static int arm(tw_driver *d, uint64_t at, int from_expiry) {
  (void)d;
  (void)at;
  (void)from_expiry;
  return 0; /* the loop reads d->armed */
}

static int h_open(struct impl *x, const struct bench_params *p) {
  self = x;
  x->now = now_ms();
  x->w = tw_wheel_new(x->now);
  x->armed = TW_NEVER;
  x->track = bench_is_spread(p);
  return x->w ? tw_driver_init(&x->driver, x->w, arm) != 0 : 1;
}

static void init_all(tw_timer *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    tw_timer_init(&t[i]);
}

static void h_alloc(struct impl *x, uint32_t n, int requests) {
  x->idle = bench_alloc(n, sizeof *x->idle);
  init_all(x->idle, n);
  if (requests) {
    x->req = bench_alloc(n, sizeof *x->req);
    init_all(x->req, n);
  }
}

static inline void start(struct impl *x, tw_timer *t, uint32_t timeout_ms) {
#if CORE_POLL
  tw_timer_start(x->w, t, on_fire, timeout_ms, 0);
#else
  uint64_t deadline = x->now + timeout_ms;
  tw_timer_start_at(x->w, t, on_fire, deadline, 0);
  tw_driver_started(&x->driver, deadline);
#endif
}

static uint32_t h_start(struct impl *x, uint32_t i, uint32_t timeout_ms) {
  start(x, &x->idle[i], timeout_ms);
  return timeout_ms;
}

static void h_req_start(struct impl *x, uint32_t i) {
  start(x, &x->req[i], BENCH_REQUEST_MS);
}

static void h_req_stop(struct impl *x, uint32_t i) {
  tw_timer_stop(x->w, &x->req[i]);
#if !CORE_POLL
  tw_driver_stopped(&x->driver);
#endif
}

static void h_tick(struct impl *x) {
  x->now = now_ms();
#if CORE_POLL
  size_t ran = tw_advance(x->w, x->now, TW_ALL);
  if (x->now >= x->armed) { /* a loop sleeping until `armed` wakes here */
    x->wakeups++;
    x->empty += ran == 0;
  }
#else
  if (x->now >= x->driver.armed) /* the loop timer fires: one slice */
    tw_driver_expired(&x->driver, x->now);
#endif
}

static void h_tick_end(struct impl *x) {
#if CORE_POLL
  x->armed = tw_next_expiry(x->w);
#else
  (void)x;
#endif
}

static void h_drive(struct impl *x, struct run *r, uint64_t ticks,
                    batch_fn batch) {
  x->wakeups = x->empty = 0;
#if !CORE_POLL
  x->driver.stats.wakeups = x->driver.stats.empty_wakeups = 0;
#endif
  run_ticks(x, r, ticks, batch);
}

static void h_stats(struct impl *x) {
#if CORE_POLL
  bench_kv("adapter_wakeups", (double)x->wakeups);
  bench_kv("adapter_empty", (double)x->empty);
#else
  bench_kv("adapter_wakeups", (double)x->driver.stats.wakeups);
  bench_kv("adapter_empty", (double)x->driver.stats.empty_wakeups);
#endif
}

#if !CORE_POLL
/* Setup of burst and spread: starts are due at the next ms or later, so a
 * timer never fires before the time it was started plus its timeout. */
static void h_refresh(struct impl *x) {
  x->now = (bench_loop_ns() + BENCH_NS_PER_MS - 1) / BENCH_NS_PER_MS;
}

/* One loop iteration after another (a slice each) until nothing is due. */
static void h_expire(struct impl *x) {
  x->now = now_ms();
  while (x->now >= x->driver.armed)
    tw_driver_expired(&x->driver, x->now);
}

static void h_run(struct impl *x) {
  while (tw_count(x->w) > 0) {
    uint64_t now = now_ms(), next = x->driver.armed;
    int wait = next <= now ? 0 : next - now > 60000 ? 60000 : (int)(next - now);
    bench_poll_enter();
    poll(NULL, 0, wait); /* a server's sockets would go here */
    bench_poll_exit();
    x->now = now_ms();
    if (x->now >= x->driver.armed)
      tw_driver_expired(&x->driver, x->now);
  }
}

static size_t h_timer_size(void) {
  return sizeof(tw_timer);
}

static size_t h_loop_size(void) {
  return 0; /* tw_wheel_new allocates it */
}

BENCH_IMPL_DEFINE(bench_impl_core, "tw", "twheel core");
#else
BENCH_IMPL_DEFINE(bench_impl_corepoll, "twpoll",
                  "twheel core, advance + next_expiry every iteration");
#endif
