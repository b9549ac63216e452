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

struct floor {
  struct floor_record *idle, *req;
  uint64_t now_ms;
  uint64_t later, resets;
};

static struct floor floor_state;

static void *floor_open(const struct bench_params *p) {
  (void)p;
  floor_state.now_ms = bench_loop_ns() / BENCH_NS_PER_MS;
  return &floor_state;
}

static void floor_alloc(void *p, uint32_t n, int requests) {
  struct floor *x = p;
  x->idle = bench_timers(x, n, sizeof *x->idle, NULL);
  if (requests)
    x->req = bench_timers(x, n, sizeof *x->req, NULL);
}

static uint32_t floor_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct floor *x = p;
  struct floor_record *f = &x->idle[i];
  uint64_t deadline = x->now_ms + timeout_ms;
  x->later += deadline > f->deadline;
  x->resets++;
  f->deadline = deadline;
  return timeout_ms;
}

static void floor_req_start(void *p, uint32_t i) {
  struct floor *x = p;
  x->req[i].deadline = x->now_ms + BENCH_REQUEST_MS;
}

static void floor_req_stop(void *p, uint32_t i) {
  struct floor *x = p;
  x->req[i].deadline = 0;
}

static void floor_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, floor_start);
}

static void floor_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, floor_req_start, floor_req_stop);
}

static void floor_tick(void *p) {
  struct floor *x = p;
  x->now_ms = bench_loop_ns() / BENCH_NS_PER_MS;
}

static void floor_drive(void *p, struct bench_run *r, uint64_t ticks,
                        bench_batch_fn batch) {
  struct floor *x = p;
  x->later = x->resets = 0;
  bench_run_ticks(x, r, ticks, batch);
}

static void floor_stats(void *p) {
  struct floor *x = p;
  if (x->resets)
    bench_kv("later_pct", 100.0 * (double)x->later / (double)x->resets);
}

const struct bench_impl bench_impl_floor = {
    .name = "floor",
    .label = "floor (random access, no timer)",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP,
    .open = floor_open,
    .alloc = floor_alloc,
    .start = floor_start,
    .batch_reset = floor_batch_reset,
    .batch_startstop = floor_batch_startstop,
    .tick = floor_tick,
    .drive = floor_drive,
    .stats = floor_stats,
};
