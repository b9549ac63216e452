/*
 * twheel through its libevent drop-in API (adapters/event): tw_ev_timer_*
 * on one tw_ev per base. The adapter reads CLOCK_MONOTONIC itself at every
 * add (it never trusts libevent's cached clock), so its calls are made
 * outside the loop; the loop is run when the adapter's one timer event is
 * due. That moment is followed from outside: after each loop run, and
 * whenever the adapter re-armed its event, it is the wheel's next expiry
 * (the adapter arms exactly that), so the timed region includes every
 * wakeup the adapter takes, empty ones included, and the wheel work they do.
 */
#include <stdio.h>
#include <sys/time.h>

#include <twheel-event.h>

#include "bench.h"

struct impl {
  struct event_base *base;
  tw_ev *d;
  tw_ev_timer *idle, *req;
  uint64_t armed;  /* ms: when the adapter's event is due (see above) */
  uint64_t rearms; /* the adapter's rearm counter when `armed` was read */
  tw_stats before; /* the adapter's counters when the timed part began */
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
    bench_track_fire((uint32_t)((tw_ev_timer *)arg - self->idle));
}

static void follow_armed(struct impl *x) {
  tw_stats s;
  tw_ev_stats(x->d, &s);
  x->rearms = s.rearms;
  x->armed = tw_next_expiry(tw_ev_wheel(x->d));
}

static int h_open(struct impl *x, const struct bench_params *p) {
  self = x;
  x->track = bench_is_spread(p);
  x->base = event_base_new();
  if (!x->base)
    return 1;
  x->d = tw_ev_new(x->base);
  x->armed = TW_NEVER;
  return x->d == NULL;
}

static void assign_all(struct impl *x, tw_ev_timer *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    tw_ev_timer_assign(&t[i], x->d, 0, on_fire, &t[i]);
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
  struct timeval tv = timeval_of_ms(timeout_ms);
  tw_ev_timer_add(&x->idle[i], &tv);
  return timeout_ms;
}

static void h_req_start(struct impl *x, uint32_t i) {
  struct timeval tv = timeval_of_ms(BENCH_REQUEST_MS);
  tw_ev_timer_add(&x->req[i], &tv);
}

static void h_req_stop(struct impl *x, uint32_t i) {
  tw_ev_timer_del(&x->req[i]);
}

static void h_tick(struct impl *x) {
  if (bench_vclock_ns / BENCH_NS_PER_MS >= x->armed) {
    event_base_loop(x->base, EVLOOP_NONBLOCK);
    follow_armed(x);
  }
}

static void h_tick_end(struct impl *x) {
  tw_stats s;
  tw_ev_stats(x->d, &s);
  if (s.rearms != x->rearms) { /* an add moved the event earlier */
    uint64_t armed = x->armed;
    follow_armed(x);
    if (armed < x->armed)
      x->armed = armed;
  }
}

static void h_drive(struct impl *x, struct run *r, uint64_t ticks,
                    batch_fn batch) {
  follow_armed(x);
  tw_ev_stats(x->d, &x->before);
  run_ticks(x, r, ticks, batch);
}

static void h_stats(struct impl *x) {
  tw_stats s;
  if (tw_ev_stats(x->d, &s) == 0)
    bench_kv_adapter(&x->before, &s);
}

static size_t h_timer_size(void) { return sizeof(tw_ev_timer); }

static size_t h_loop_size(void) { return 0; /* event_base_new, tw_ev_new allocate */ }

BENCH_IMPL_DEFINE(bench_impl_twev, "twev", "twheel through tw_ev_timer_*");
