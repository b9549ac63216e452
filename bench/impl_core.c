/*
 * twheel core in a loop of its own, time in ms of the loop clock, in two
 * rows that share the wheel and its timers:
 *
 *  - "tw": the way the adapters drive it, with a tw_driver whose loop timer
 *    is `armed`: the loop runs the driver's slice of the wheel only when
 *    the clock reaches it; starts and stops tell the driver (a start
 *    earlier than `armed` lowers it, a stop or a later reset leaves it).
 *    Starts are absolute (tw_timer_start_at from the loop's clock), since
 *    tw_now() only moves at wakeups.
 *  - "twpoll": the simplest loop, every iteration calls tw_advance()
 *    (no budget) and tw_next_expiry(), and starts are relative
 *    (tw_timer_start). Reset, start+stop and stall only: burst, spread and
 *    memory would be row "tw"'s.
 */
#include <poll.h>
#include <stdio.h>

#include <twheel.h>

#include "bench.h"

struct core {
  tw_wheel *w;
  tw_timer *idle, *req;
  uint64_t now;            /* the loop's clock (ms) at this iteration */
  tw_driver driver;        /* row "tw": its `armed` is the loop's timer */
  uint64_t armed;          /* row "twpoll": when the loop would wake next */
  uint64_t wakeups, empty; /* row "twpoll": iterations at or past `armed`,
                              and the ones that fired nothing */
};

static struct core core;

static uint64_t now_ms(void) {
  return bench_loop_ns() / BENCH_NS_PER_MS;
}

static void on_fire(tw_timer *t) {
  bench_fire((uint32_t)(t - core.idle));
}

/* The driver's `arm`: this loop's timer is the time it compares with. */
static int arm(tw_driver *d, uint64_t at, int from_expiry) {
  (void)d;
  (void)at;
  (void)from_expiry;
  return 0; /* the loop reads d->armed */
}

static void *core_open(const struct bench_params *p) {
  struct core *x = &core;
  (void)p;
  x->now = now_ms();
  x->w = tw_wheel_new(x->now);
  x->armed = TW_NEVER;
  if (!x->w || tw_driver_init(&x->driver, x->w, arm) != 0)
    return NULL;
  return x;
}

static void core_init(void *x, void *t) {
  (void)x;
  tw_timer_init(t);
}

static void core_alloc(void *p, uint32_t n, int requests) {
  struct core *x = p;
  x->idle = bench_timers(x, n, sizeof *x->idle, core_init);
  if (requests)
    x->req = bench_timers(x, n, sizeof *x->req, core_init);
}

static uint64_t core_moves(void *p) {
  struct core *x = p;
  return tw_moves(x->w);
}

/* ---- row "tw": a tw_driver ---- */

static inline void drv_start_timer(struct core *x, tw_timer *t,
                                   uint32_t timeout_ms) {
  uint64_t deadline = x->now + timeout_ms;
  tw_timer_start_at(x->w, t, on_fire, deadline, 0);
  tw_driver_started(&x->driver, deadline);
}

static uint32_t drv_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct core *x = p;
  drv_start_timer(x, &x->idle[i], timeout_ms);
  return timeout_ms;
}

static void drv_req_start(void *p, uint32_t i) {
  struct core *x = p;
  drv_start_timer(x, &x->req[i], BENCH_REQUEST_MS);
}

static void drv_req_stop(void *p, uint32_t i) {
  struct core *x = p;
  tw_timer_stop(x->w, &x->req[i]);
  tw_driver_stopped(&x->driver);
}

static void drv_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, drv_start);
}

static void drv_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, drv_req_start, drv_req_stop);
}

/* A loop iteration: when the clock reaches the loop timer, one slice. */
static void drv_tick(void *p) {
  struct core *x = p;
  x->now = now_ms();
  if (x->now >= x->driver.armed)
    tw_driver_expired(&x->driver, x->now);
}

static void drv_drive(void *p, struct bench_run *r, uint64_t ticks,
                      bench_batch_fn batch) {
  struct core *x = p;
  x->driver.stats.wakeups = x->driver.stats.empty_wakeups = 0;
  x->driver.stats.maintenance = 0;
  bench_run_ticks(x, r, ticks, batch);
}

static void drv_stats(void *p) {
  struct core *x = p;
  bench_kv("adapter_wakeups", (double)x->driver.stats.wakeups);
  bench_kv("adapter_empty", (double)x->driver.stats.empty_wakeups);
  bench_kv("adapter_maintenance", (double)x->driver.stats.maintenance);
}

/* Setup of burst and spread: starts are due at the next ms or later, so a
 * timer never fires before the time it was started plus its timeout. */
static void drv_refresh(void *p) {
  struct core *x = p;
  x->now = (bench_loop_ns() + BENCH_NS_PER_MS - 1) / BENCH_NS_PER_MS;
}

static void drv_run(void *p) {
  struct core *x = p;
  while (tw_count(x->w) > 0) {
    uint64_t now = now_ms(), next = x->driver.armed;
    int wait = next <= now ? 0 : next - now > 60000 ? 60000 : (int)(next - now);
    bench_poll_enter();
    poll(NULL, 0, wait); /* a server's sockets would go here */
    bench_poll_exit();
    drv_tick(x);
  }
}

const struct bench_impl bench_impl_core = {
    .name = "tw",
    .label = "twheel core",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_BURST | BENCH_SPREAD |
                 BENCH_MEMORY | BENCH_STALL,
    .open = core_open,
    .alloc = core_alloc,
    .start = drv_start,
    .batch_reset = drv_batch_reset,
    .batch_startstop = drv_batch_startstop,
    .tick = drv_tick,
    .drive = drv_drive,
    .stats = drv_stats,
    .refresh = drv_refresh,
    .expire = drv_tick,
    .run = drv_run,
    .moves = core_moves,
    .timer_size = sizeof(tw_timer),
    .loop_size = 0, /* tw_wheel_new allocates it */
};

/* ---- row "twpoll": advance and ask every iteration ---- */

static uint32_t poll_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct core *x = p;
  tw_timer_start(x->w, &x->idle[i], on_fire, timeout_ms, 0);
  return timeout_ms;
}

static void poll_req_start(void *p, uint32_t i) {
  struct core *x = p;
  tw_timer_start(x->w, &x->req[i], on_fire, BENCH_REQUEST_MS, 0);
}

static void poll_req_stop(void *p, uint32_t i) {
  struct core *x = p;
  tw_timer_stop(x->w, &x->req[i]);
}

static void poll_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, poll_start);
}

static void poll_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, poll_req_start, poll_req_stop);
}

static void poll_tick(void *p) {
  struct core *x = p;
  size_t ran;
  x->now = now_ms();
  ran = tw_advance(x->w, x->now, TW_ALL);
  if (x->now >= x->armed) { /* a loop sleeping until `armed` wakes here */
    x->wakeups++;
    x->empty += ran == 0;
  }
}

static void poll_tick_end(void *p) {
  struct core *x = p;
  x->armed = tw_next_expiry(x->w);
}

static void poll_drive(void *p, struct bench_run *r, uint64_t ticks,
                       bench_batch_fn batch) {
  struct core *x = p;
  x->wakeups = x->empty = 0;
  bench_run_ticks(x, r, ticks, batch);
}

static void poll_stats(void *p) {
  struct core *x = p;
  bench_kv("adapter_wakeups", (double)x->wakeups);
  bench_kv("adapter_empty", (double)x->empty);
}

/* Stall: one tw_advance, no budget. */
static void poll_expire(void *p) {
  struct core *x = p;
  x->now = now_ms();
  tw_advance(x->w, x->now, TW_ALL);
}

const struct bench_impl bench_impl_corepoll = {
    .name = "twpoll",
    .label = "twheel core, advance + next_expiry every iteration",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_STALL,
    .open = core_open,
    .alloc = core_alloc,
    .start = poll_start,
    .batch_reset = poll_batch_reset,
    .batch_startstop = poll_batch_startstop,
    .tick = poll_tick,
    .tick_end = poll_tick_end,
    .drive = poll_drive,
    .stats = poll_stats,
    .expire = poll_expire,
    .moves = core_moves,
};
