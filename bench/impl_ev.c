/*
 * The three rows on a libevent base (the default base: epoll,
 * CLOCK_MONOTONIC_COARSE):
 *
 *  - "ev": per-connection libevent timers (struct event, embedded,
 *    evtimer_assign), event_add() into the base's min-heap;
 *  - "evc": the same events added with a token from
 *    event_base_init_common_timeout(): one FIFO per duration, only its
 *    head in the heap;
 *  - "twev": twheel through its libevent drop-in API (adapters/event),
 *    tw_ev_timer_* on one tw_ev per base.
 *
 * ev and evc, best configuration, as a server runs them: every timer call
 * is made from inside a callback of the running loop, so event_add() reads
 * the base's cached time instead of the clock; each iteration refreshes
 * that cache with event_base_update_cache_time(). No timer is due while
 * the workloads run, so the loop is entered once per timed region, not
 * once per iteration. Common timeouts: one duration per purpose in reset
 * and start+stop (30 s idle, 5 s request; the idle jitter is dropped, as a
 * server using them would). In burst every timer has the same 30 s
 * duration anyway. In spread the 1 s window is covered by 250 durations,
 * the timeout rounded down to a multiple of 4 ms (libevent allows 256 per
 * base). Not in stall: its first deadlines take 30000 durations.
 *
 * twev: the adapter reads CLOCK_MONOTONIC itself at every add (it never
 * trusts libevent's cached clock), so its calls are made outside the loop;
 * the loop is run when the adapter's one timer event is due. That moment
 * is followed from outside: after each loop run, and whenever the adapter
 * re-armed its event, it is the wheel's next expiry (the adapter arms
 * exactly that), so the timed region includes every wakeup the adapter
 * takes, empty ones included, and the wheel work they do.
 */
#include <stdio.h>
#include <sys/time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#if defined(BENCH_HAVE_TWEV)
#include <twheel-event.h>
#endif

#include "bench.h"

#define MAX_COMMON 256

struct evrow {
  struct event_base *base;
  /* rows "ev" and "evc" */
  struct event *idle, *req;
  struct event drive; /* runs the batches from inside the loop */
  struct bench_run *run;
  uint64_t ticks;
  bench_batch_fn batch;
  const struct timeval *common[MAX_COMMON]; /* by timeout / 4 ms, lazily */
  const struct timeval *common_idle, *common_req;
  int steps; /* common timeouts in 4 ms steps (spread) */
#if defined(BENCH_HAVE_TWEV)
  /* row "twev" */
  tw_ev *d;
  tw_ev_timer *tidle, *treq;
  uint64_t armed;  /* ms: when the adapter's event is due (see above) */
  uint64_t rearms; /* the adapter's rearm counter when `armed` was read */
  tw_stats before; /* the adapter's counters when the timed part began */
#endif
};

static struct evrow evrow;

/* ---- the base, the same for the three rows ---- */

static struct timeval timeval_of_ms(uint32_t ms) {
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000);
  tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
  return tv;
}

/* Burst and stall: one loop iteration (EVLOOP_ONCE: without it, a
 * non-blocking loop goes on while events are active, and a twheel row's
 * next slice is one). It includes the base's epoll_wait(..., 0). */
static void base_expire(void *p) {
  struct evrow *x = p;
  event_base_loop(x->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static void base_run(void *p) {
  struct evrow *x = p;
  event_base_dispatch(x->base);
}

/* ---- rows "ev" and "evc" ---- */

static void ev_on_fire(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  bench_fire((uint32_t)((struct event *)arg - evrow.idle));
}

static void on_drive(evutil_socket_t fd, short what, void *arg) {
  struct evrow *x = arg;
  (void)fd;
  (void)what;
  bench_run_ticks(x, x->run, x->ticks, x->batch);
}

static const struct timeval *common_for(struct evrow *x, uint32_t ms) {
  struct timeval tv = timeval_of_ms(ms);
  return event_base_init_common_timeout(x->base, &tv);
}

static struct evrow *ev_open_base(const struct bench_params *p) {
  struct evrow *x = &evrow;
  x->steps = bench_is_spread(p);
  x->base = event_base_new();
  if (!x->base)
    return NULL;
  event_assign(&x->drive, x->base, -1, 0, on_drive, x);
  return x;
}

static void *ev_open(const struct bench_params *p) {
  return ev_open_base(p);
}

static void *evc_open(const struct bench_params *p) {
  struct evrow *x = ev_open_base(p);
  if (!x)
    return NULL;
  x->common_idle = common_for(x, BENCH_IDLE_MS);
  x->common_req = common_for(x, BENCH_REQUEST_MS);
  return x->common_idle && x->common_req ? x : NULL;
}

static void ev_init(void *p, void *ev) {
  struct evrow *x = p;
  evtimer_assign((struct event *)ev, x->base, ev_on_fire, ev);
}

static void ev_alloc(void *p, uint32_t n, int requests) {
  struct evrow *x = p;
  x->idle = bench_timers(x, n, sizeof *x->idle, ev_init);
  if (requests)
    x->req = bench_timers(x, n, sizeof *x->req, ev_init);
}

static uint32_t ev_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct evrow *x = p;
  struct timeval tv = timeval_of_ms(timeout_ms);
  event_add(&x->idle[i], &tv);
  return timeout_ms;
}

static void ev_req_start(void *p, uint32_t i) {
  struct evrow *x = p;
  struct timeval tv = timeval_of_ms(BENCH_REQUEST_MS);
  event_add(&x->req[i], &tv);
}

static uint32_t evc_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct evrow *x = p;
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
  return timeout_ms;
}

static void evc_req_start(void *p, uint32_t i) {
  struct evrow *x = p;
  event_add(&x->req[i], x->common_req);
}

static void ev_req_stop(void *p, uint32_t i) {
  struct evrow *x = p;
  event_del(&x->req[i]);
}

static void ev_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, ev_start);
}

static void ev_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, ev_req_start, ev_req_stop);
}

static void evc_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, evc_start);
}

static void evc_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, evc_req_start, ev_req_stop);
}

static void ev_tick(void *p) {
  struct evrow *x = p;
  event_base_update_cache_time(x->base);
}

static void ev_drive(void *p, struct bench_run *r, uint64_t ticks,
                     bench_batch_fn batch) {
  struct evrow *x = p;
  x->run = r;
  x->ticks = ticks;
  x->batch = batch;
  event_active(&x->drive, EV_TIMEOUT, 0);
  event_base_loop(x->base, EVLOOP_NONBLOCK);
}

/* What the two rows' tables share: the same events on the same base, only
 * the adds differ. event_base_new allocates the loop (loop_size 0). */
#define EV_SHARED                                                              \
  .alloc = ev_alloc, .tick = ev_tick, .drive = ev_drive,                       \
  .expire = base_expire, .run = base_run, .timer_size = sizeof(struct event),  \
  .loop_size = 0

const struct bench_impl bench_impl_ev = {
    .name = "ev",
    .label = "per-connection libevent event_add (heap)",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_BURST | BENCH_SPREAD |
                 BENCH_MEMORY | BENCH_STALL,
    .open = ev_open,
    .start = ev_start,
    .batch_reset = ev_batch_reset,
    .batch_startstop = ev_batch_startstop,
    EV_SHARED,
};

const struct bench_impl bench_impl_evc = {
    .name = "evc",
    .label = "libevent common timeouts",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_BURST | BENCH_SPREAD |
                 BENCH_MEMORY,
    .open = evc_open,
    .start = evc_start,
    .batch_reset = evc_batch_reset,
    .batch_startstop = evc_batch_startstop,
    EV_SHARED,
};

/* ---- row "twev": tw_ev_timer_* ---- */

#if defined(BENCH_HAVE_TWEV)
static void twev_on_fire(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  bench_fire((uint32_t)((tw_ev_timer *)arg - evrow.tidle));
}

static void follow_armed(struct evrow *x) {
  tw_stats s;
  tw_ev_stats(x->d, &s);
  x->rearms = s.rearms;
  x->armed = tw_next_expiry(tw_ev_wheel(x->d));
}

static void *twev_open(const struct bench_params *p) {
  struct evrow *x = &evrow;
  (void)p;
  x->base = event_base_new();
  if (!x->base)
    return NULL;
  x->d = tw_ev_new(x->base);
  x->armed = TW_NEVER;
  return x->d ? x : NULL;
}

static void twev_init(void *p, void *t) {
  struct evrow *x = p;
  tw_ev_timer_assign(t, x->d, 0, twev_on_fire, t);
}

static void twev_alloc(void *p, uint32_t n, int requests) {
  struct evrow *x = p;
  x->tidle = bench_timers(x, n, sizeof *x->tidle, twev_init);
  if (requests)
    x->treq = bench_timers(x, n, sizeof *x->treq, twev_init);
}

static uint32_t twev_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct evrow *x = p;
  struct timeval tv = timeval_of_ms(timeout_ms);
  tw_ev_timer_add(&x->tidle[i], &tv);
  return timeout_ms;
}

static void twev_req_start(void *p, uint32_t i) {
  struct evrow *x = p;
  struct timeval tv = timeval_of_ms(BENCH_REQUEST_MS);
  tw_ev_timer_add(&x->treq[i], &tv);
}

static void twev_req_stop(void *p, uint32_t i) {
  struct evrow *x = p;
  tw_ev_timer_del(&x->treq[i]);
}

static void twev_batch_reset(void *x, struct bench_run *r) {
  bench_batch_reset(x, r, twev_start);
}

static void twev_batch_startstop(void *x, struct bench_run *r) {
  bench_batch_startstop(x, r, twev_req_start, twev_req_stop);
}

static void twev_tick(void *p) {
  struct evrow *x = p;
  if (bench_vclock_ns / BENCH_NS_PER_MS >= x->armed) {
    event_base_loop(x->base, EVLOOP_NONBLOCK);
    follow_armed(x);
  }
}

static void twev_tick_end(void *p) {
  struct evrow *x = p;
  tw_stats s;
  tw_ev_stats(x->d, &s);
  if (s.rearms != x->rearms) { /* an add moved the event earlier */
    uint64_t armed = x->armed;
    follow_armed(x);
    if (armed < x->armed)
      x->armed = armed;
  }
}

static void twev_drive(void *p, struct bench_run *r, uint64_t ticks,
                       bench_batch_fn batch) {
  struct evrow *x = p;
  follow_armed(x);
  tw_ev_stats(x->d, &x->before);
  bench_run_ticks(x, r, ticks, batch);
}

static void twev_stats(void *p) {
  struct evrow *x = p;
  tw_stats s;
  if (tw_ev_stats(x->d, &s) == 0)
    bench_kv_adapter(&x->before, &s);
}

static uint64_t twev_moves(void *p) {
  struct evrow *x = p;
  return tw_moves(tw_ev_wheel(x->d));
}

const struct bench_impl bench_impl_twev = {
    .name = "twev",
    .label = "twheel through tw_ev_timer_*",
    .scenarios = BENCH_RESET | BENCH_STARTSTOP | BENCH_BURST | BENCH_SPREAD |
                 BENCH_MEMORY | BENCH_STALL,
    .open = twev_open,
    .alloc = twev_alloc,
    .start = twev_start,
    .batch_reset = twev_batch_reset,
    .batch_startstop = twev_batch_startstop,
    .tick = twev_tick,
    .tick_end = twev_tick_end,
    .drive = twev_drive,
    .stats = twev_stats,
    .expire = base_expire,
    .run = base_run,
    .moves = twev_moves,
    .timer_size = sizeof(tw_ev_timer),
    .loop_size = 0, /* event_base_new, tw_ev_new allocate */
};
#endif
