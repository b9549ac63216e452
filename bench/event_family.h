/*
 * Per-connection libevent timers (struct event, embedded, evtimer_assign),
 * shared by the heap row (impl_ev.c) and the common-timeout row
 * (impl_evc.c), which set EV_COMMON before including this file.
 *
 * Best configuration, as a server runs it: the default base (epoll,
 * CLOCK_MONOTONIC_COARSE), and every timer call made from inside a callback
 * of the running loop, so event_add() reads the base's cached time instead
 * of the clock; each iteration refreshes that cache with
 * event_base_update_cache_time(). No timer is due while the workloads run,
 * so the loop is entered once per timed region, not once per iteration.
 *
 * Common timeouts: one duration per purpose in reset and start+stop
 * (30 s idle, 5 s request; the idle jitter is dropped, as a server using
 * them would). In burst every timer has the same 30 s duration anyway. In
 * spread the 1 s window is covered by 250 durations, the timeout rounded
 * down to a multiple of 4 ms (libevent allows 256 per base).
 */
#include <stdio.h>
#include <sys/time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "bench.h"

#define MAX_COMMON 256

struct run;

struct impl {
  struct event_base *base;
  struct event *idle, *req;
  struct event drive; /* runs the batches from inside the loop */
  struct run *run;
  uint64_t ticks;
  void (*batch)(struct impl *x, struct run *r);
  const struct timeval *common[MAX_COMMON]; /* by timeout / 4 ms, lazily */
  const struct timeval *common_idle, *common_req;
  int steps; /* common timeouts in 4 ms steps (spread) */
  int track;
};

static struct impl *self;

#include "scenarios.h"
#include "event_loop.h"

static void on_fire(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  bench_fired_one();
  if (self->track)
    bench_track_fire((uint32_t)((struct event *)arg - self->idle));
}

static void on_drive(evutil_socket_t fd, short what, void *arg) {
  struct impl *x = arg;
  (void)fd;
  (void)what;
  run_ticks(x, x->run, x->ticks, x->batch);
}

static const struct timeval *common_for(struct impl *x, uint32_t ms) {
  struct timeval tv = timeval_of_ms(ms);
  return event_base_init_common_timeout(x->base, &tv);
}

static int h_open(struct impl *x, const struct bench_params *p) {
  self = x;
  x->track = bench_is_spread(p);
  x->steps = x->track;
  x->base = event_base_new();
  if (!x->base)
    return 1;
  event_assign(&x->drive, x->base, -1, 0, on_drive, x);
  if (EV_COMMON) {
    x->common_idle = common_for(x, BENCH_IDLE_MS);
    x->common_req = common_for(x, BENCH_REQUEST_MS);
    if (!x->common_idle || !x->common_req)
      return 1;
  }
  return 0;
}

static void assign_all(struct impl *x, struct event *ev, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    evtimer_assign(&ev[i], x->base, on_fire, &ev[i]);
}

static void h_alloc(struct impl *x, uint32_t n, int requests) {
  x->idle = bench_alloc(n, sizeof *x->idle);
  assign_all(x, x->idle, n);
  if (requests) {
    x->req = bench_alloc(n, sizeof *x->req);
    assign_all(x, x->req, n);
  }
}

static uint32_t h_start(struct impl *x, uint32_t i, uint32_t timeout_ms) {
  if (EV_COMMON) {
    const struct timeval *tv = x->common_idle;
    if (x->steps) {
      uint32_t step = timeout_ms / BENCH_COMMON_STEP_MS % MAX_COMMON;
      timeout_ms = timeout_ms / BENCH_COMMON_STEP_MS * BENCH_COMMON_STEP_MS;
      if (!x->common[step])
        x->common[step] = common_for(x, timeout_ms);
      tv = x->common[step];
    } else {
      timeout_ms = BENCH_IDLE_MS;
    }
    event_add(&x->idle[i], tv);
  } else {
    struct timeval tv = timeval_of_ms(timeout_ms);
    event_add(&x->idle[i], &tv);
  }
  return timeout_ms;
}

static void h_req_start(struct impl *x, uint32_t i) {
  if (EV_COMMON) {
    event_add(&x->req[i], x->common_req);
  } else {
    struct timeval tv = timeval_of_ms(BENCH_REQUEST_MS);
    event_add(&x->req[i], &tv);
  }
}

static void h_req_stop(struct impl *x, uint32_t i) { event_del(&x->req[i]); }

static void h_tick(struct impl *x) { event_base_update_cache_time(x->base); }

static void h_tick_end(struct impl *x) { (void)x; }

static void h_drive(struct impl *x, struct run *r, uint64_t ticks,
                    batch_fn batch) {
  x->run = r;
  x->ticks = ticks;
  x->batch = batch;
  event_active(&x->drive, EV_TIMEOUT, 0);
  event_base_loop(x->base, EVLOOP_NONBLOCK);
}

static void h_stats(struct impl *x) { (void)x; }

static size_t h_timer_size(void) { return sizeof(struct event); }

static size_t h_loop_size(void) { return 0; /* event_base_new allocates it */ }
