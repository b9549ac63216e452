/*
 * The two rows on a libuv loop, driven the same way so that they differ
 * only in their timer calls:
 *
 *  - "uv": per-connection uv_timer_t, libuv's own timers (one binary heap
 *    in the loop);
 *  - "twuv": twheel through its libuv drop-in API (adapters/uv),
 *    tw_uv_timer_* on one tw_uv per loop, so the wakeups of the adapter's
 *    one uv_timer_t (and the wheel work they do) are timed.
 *
 * Each iteration updates the loop time (uv_update_time, what uv_run does
 * at the top of every iteration) and runs the loop only when a timer is
 * due (uv_backend_timeout() == 0): the figure is the timers' cost, not
 * epoll_wait's, and timer calls see the cached loop time, as in callbacks.
 */
#include <stdio.h>

#include <uv.h>

#if defined(BENCH_HAVE_TWUV)
#include <twheel-uv.h>
#endif

#include "bench.h"

struct uvrow {
  uv_loop_t loop;
  uv_timer_t *idle, *req; /* row "uv" */
#if defined(BENCH_HAVE_TWUV)
  tw_uv *d; /* row "twuv" */
  tw_uv_timer_t *tidle, *treq;
  tw_stats before; /* the adapter's counters when the timed part began */
#endif
};

static struct uvrow uvrow;

/* ---- the loop, the same for both rows ---- */

/* The loop, its time read once; NULL on failure. */
static struct uvrow *open_loop(void) {
  if (uv_loop_init(&uvrow.loop) != 0)
    return NULL;
  uv_update_time(&uvrow.loop);
  return &uvrow;
}

static void loop_tick(void *p) {
  struct uvrow *x = p;
  uv_update_time(&x->loop);
  if (uv_backend_timeout(&x->loop) == 0)
    uv_run(&x->loop, UV_RUN_NOWAIT);
}

static void loop_refresh(void *p) {
  struct uvrow *x = p;
  uv_update_time(&x->loop);
}

/* One loop iteration: uv_run() updates the loop time, then runs what is
 * due (its epoll_wait is skipped: the loop watches no descriptor). */
static void loop_expire(void *p) {
  struct uvrow *x = p;
  uv_run(&x->loop, UV_RUN_NOWAIT);
}

static void loop_run(void *p) {
  struct uvrow *x = p;
  uv_run(&x->loop, UV_RUN_DEFAULT);
}

/* ---- row "uv": per-connection uv_timer_t ---- */

static void uvt_on_fire(uv_timer_t *t) {
  bench_fire((uint32_t)(t - uvrow.idle));
}

static void *uvt_open(const struct bench_params *p) {
  (void)p;
  return open_loop();
}

static void uvt_init(void *p, void *t) {
  struct uvrow *x = p;
  uv_timer_init(&x->loop, t);
}

static void uvt_alloc(void *p, uint32_t n, int requests) {
  struct uvrow *x = p;
  x->idle = bench_timers(x, n, sizeof *x->idle, uvt_init);
  if (requests)
    x->req = bench_timers(x, n, sizeof *x->req, uvt_init);
}

static uint32_t uvt_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct uvrow *x = p;
  uv_timer_start(&x->idle[i], uvt_on_fire, timeout_ms, 0);
  return timeout_ms;
}

static void uvt_req_start(void *p, uint32_t i) {
  struct uvrow *x = p;
  uv_timer_start(&x->req[i], uvt_on_fire, BENCH_REQUEST_MS, 0);
}

static void uvt_req_stop(void *p, uint32_t i) {
  struct uvrow *x = p;
  uv_timer_stop(&x->req[i]);
}

static void uvt_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, uvt_start);
}

static void uvt_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, uvt_req_start, uvt_req_stop);
}

const struct bench_impl bench_impl_uv = {
    .name = "uv",
    .label = "per-connection uv_timer_t",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_BURST | BENCH_SPREAD |
                 BENCH_MEMORY | BENCH_STALL,
    .open = uvt_open,
    .alloc = uvt_alloc,
    .start = uvt_start,
    .batch_reset = uvt_batch_reset,
    .batch_startstop = uvt_batch_startstop,
    .tick = loop_tick,
    .refresh = loop_refresh,
    .expire = loop_expire,
    .run = loop_run,
    .timer_size = sizeof(uv_timer_t),
    .loop_size = sizeof(uv_loop_t),
};

/* ---- row "twuv": tw_uv_timer_* ---- */

#if defined(BENCH_HAVE_TWUV)
static void twuv_on_fire(tw_uv_timer_t *t) {
  bench_fire((uint32_t)(t - uvrow.tidle));
}

static void *twuv_open(const struct bench_params *p) {
  struct uvrow *x = open_loop();
  (void)p;
  if (!x || tw_uv_init(&x->loop, &x->d) != 0)
    return NULL;
  return x;
}

static void twuv_init(void *p, void *t) {
  struct uvrow *x = p;
  tw_uv_timer_init(x->d, t);
}

static void twuv_alloc(void *p, uint32_t n, int requests) {
  struct uvrow *x = p;
  x->tidle = bench_timers(x, n, sizeof *x->tidle, twuv_init);
  if (requests)
    x->treq = bench_timers(x, n, sizeof *x->treq, twuv_init);
}

static uint32_t twuv_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct uvrow *x = p;
  tw_uv_timer_start(&x->tidle[i], twuv_on_fire, timeout_ms, 0);
  return timeout_ms;
}

static void twuv_req_start(void *p, uint32_t i) {
  struct uvrow *x = p;
  tw_uv_timer_start(&x->treq[i], twuv_on_fire, BENCH_REQUEST_MS, 0);
}

static void twuv_req_stop(void *p, uint32_t i) {
  struct uvrow *x = p;
  tw_uv_timer_stop(&x->treq[i]);
}

static void twuv_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, twuv_start);
}

static void twuv_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, twuv_req_start, twuv_req_stop);
}

static void twuv_drive(void *p, struct bench_run *r, uint64_t ticks,
                       bench_batch_fn batch) {
  struct uvrow *x = p;
  tw_uv_stats(x->d, &x->before);
  bench_run_ticks(x, r, ticks, batch);
}

static void twuv_stats(void *p) {
  struct uvrow *x = p;
  tw_stats s;
  if (tw_uv_stats(x->d, &s) == 0)
    bench_kv_adapter(&x->before, &s);
}

static uint64_t twuv_moves(void *p) {
  struct uvrow *x = p;
  return tw_moves(tw_uv_wheel(x->d));
}

const struct bench_impl bench_impl_twuv = {
    .name = "twuv",
    .label = "twheel through tw_uv_timer_*",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_BURST | BENCH_SPREAD |
                 BENCH_MEMORY | BENCH_STALL,
    .open = twuv_open,
    .alloc = twuv_alloc,
    .start = twuv_start,
    .batch_reset = twuv_batch_reset,
    .batch_startstop = twuv_batch_startstop,
    .tick = loop_tick,
    .drive = twuv_drive,
    .stats = twuv_stats,
    .refresh = loop_refresh,
    .expire = loop_expire,
    .run = loop_run,
    .moves = twuv_moves,
    .timer_size = sizeof(tw_uv_timer_t),
    .loop_size = sizeof(uv_loop_t),
};
#endif
