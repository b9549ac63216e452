/*
 * The floor: the same random choice of a connection and one read-modify-
 * write of its "deadline" word, with no timer call. Its records are as
 * large as a tw_timer, so the random access costs what it costs the core.
 * It also counts how many resets move a deadline later.
 */
#include <stdlib.h>

#include <twheel.h>

#include "bench.h"

struct floor_record {
  uint64_t deadline;
  unsigned char pad[sizeof(tw_timer) - sizeof(uint64_t)];
};

struct impl {
  struct floor_record *idle, *req;
  uint64_t now_ms;
  uint64_t later, resets;
};

#define BENCH_NO_TIMERS
#include "scenarios.h"

static int h_open(struct impl *x, const struct bench_params *p) {
  (void)p;
  x->now_ms = bench_loop_ns() / BENCH_NS_PER_MS;
  return 0;
}

static void h_alloc(struct impl *x, uint32_t n, int requests) {
  x->idle = bench_alloc(n, sizeof *x->idle);
  if (requests)
    x->req = bench_alloc(n, sizeof *x->req);
}

static uint32_t h_start(struct impl *x, uint32_t i, uint32_t timeout_ms) {
  struct floor_record *f = &x->idle[i];
  uint64_t deadline = x->now_ms + timeout_ms;
  x->later += deadline > f->deadline;
  x->resets++;
  f->deadline = deadline;
  return timeout_ms;
}

static void h_req_start(struct impl *x, uint32_t i) {
  x->req[i].deadline = x->now_ms + BENCH_REQUEST_MS;
}

static void h_req_stop(struct impl *x, uint32_t i) { x->req[i].deadline = 0; }

static void h_tick(struct impl *x) {
  x->now_ms = bench_loop_ns() / BENCH_NS_PER_MS;
}

static void h_tick_end(struct impl *x) { (void)x; }

static void h_drive(struct impl *x, struct run *r, uint64_t ticks,
                    batch_fn batch) {
  x->later = x->resets = 0;
  run_ticks(x, r, ticks, batch);
}

static void h_stats(struct impl *x) {
  if (x->resets)
    bench_kv("later_pct", 100.0 * (double)x->later / (double)x->resets);
}

BENCH_IMPL_DEFINE(bench_impl_floor, "floor", "floor (random access, no timer)");
