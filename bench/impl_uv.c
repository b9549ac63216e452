/*
 * Per-connection uv_timer_t: libuv's own timers, one binary heap in the
 * loop, driven as uv_loop.h says (the loop runs only when a timer is due).
 */
#include <stdio.h>

#include <uv.h>

#include "bench.h"

struct impl {
  uv_loop_t loop;
  uv_timer_t *idle, *req;
  int track;
};

static struct impl *self;

#include "scenarios.h"
#include "uv_loop.h"

static void on_fire(uv_timer_t *t) {
  bench_fired_one();
  if (self->track)
    bench_track_fire((uint32_t)(t - self->idle));
}

static int h_open(struct impl *x, const struct bench_params *p) {
  self = x;
  x->track = bench_is_spread(p);
  return open_loop(x);
}

static void init_all(struct impl *x, uv_timer_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    uv_timer_init(&x->loop, &t[i]);
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
  uv_timer_start(&x->idle[i], on_fire, timeout_ms, 0);
  return timeout_ms;
}

static void h_req_start(struct impl *x, uint32_t i) {
  uv_timer_start(&x->req[i], on_fire, BENCH_REQUEST_MS, 0);
}

static void h_req_stop(struct impl *x, uint32_t i) { uv_timer_stop(&x->req[i]); }

static void h_drive(struct impl *x, struct run *r, uint64_t ticks,
                    batch_fn batch) {
  run_ticks(x, r, ticks, batch);
}

static void h_stats(struct impl *x) { (void)x; }

static size_t h_timer_size(void) { return sizeof(uv_timer_t); }

BENCH_IMPL_DEFINE(bench_impl_uv, "uv", "per-connection uv_timer_t");
