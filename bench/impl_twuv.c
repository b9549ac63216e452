/*
 * twheel through its libuv drop-in API (adapters/uv): tw_uv_timer_* on one
 * tw_uv per loop, driven exactly like the uv_timer_t row (uv_loop.h): the
 * loop time is updated every iteration and uv_run() is called when the
 * adapter's one uv_timer_t is due, so its wakeups (and the wheel work they
 * do) are timed.
 */
#include <stdio.h>

#include <twheel-uv.h>

#include "bench.h"

struct impl {
  uv_loop_t loop;
  tw_uv *d;
  tw_uv_timer_t *idle, *req;
  tw_stats before; /* the adapter's counters when the timed part began */
  int track;
};

static struct impl *self;

#include "scenarios.h"
#include "uv_loop.h"

static void on_fire(tw_uv_timer_t *t) {
  bench_fired_one();
  if (self->track)
    bench_track_fire((uint32_t)(t - self->idle));
}

static int h_open(struct impl *x, const struct bench_params *p) {
  self = x;
  x->track = bench_is_spread(p);
  if (open_loop(x) != 0)
    return 1;
  return tw_uv_init(&x->loop, &x->d) != 0;
}

static void init_all(struct impl *x, tw_uv_timer_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    tw_uv_timer_init(x->d, &t[i]);
}

static void h_alloc(struct impl *x, uint32_t n, int requests) {
  x->idle = bench_alloc(n, sizeof *x->idle);
  init_all(x, x->idle, n);
  if (requests) {
    x->req = bench_alloc(n, sizeof *x->req);
    init_all(x, x->req, n);
  }
}

static uint32_t h_start(struct impl *x, uint32_t i, uint32_t timeout_ms) {
  tw_uv_timer_start(&x->idle[i], on_fire, timeout_ms, 0);
  return timeout_ms;
}

static void h_req_start(struct impl *x, uint32_t i) {
  tw_uv_timer_start(&x->req[i], on_fire, BENCH_REQUEST_MS, 0);
}

static void h_req_stop(struct impl *x, uint32_t i) {
  tw_uv_timer_stop(&x->req[i]);
}

static void h_drive(struct impl *x, struct run *r, uint64_t ticks,
                    batch_fn batch) {
  tw_uv_stats(x->d, &x->before);
  run_ticks(x, r, ticks, batch);
}

static void h_stats(struct impl *x) {
  tw_stats s;
  if (tw_uv_stats(x->d, &s) == 0)
    bench_kv_adapter(&x->before, &s);
}

static size_t h_timer_size(void) { return sizeof(tw_uv_timer_t); }

BENCH_IMPL_DEFINE(bench_impl_twuv, "twuv", "twheel through tw_uv_timer_*");
