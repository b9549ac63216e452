/*
 * What the two rows on a libevent base share: per-connection libevent
 * timers (event_family.h) and tw_ev_timer_* (impl_twev.c). Both add
 * timeouts as a struct timeval, and burst and spread run the base itself.
 *
 * Included after scenarios.h by a file whose `struct impl` has a
 * `struct event_base *base`.
 */
#ifndef TW_BENCH_EVENT_LOOP_H
#define TW_BENCH_EVENT_LOOP_H

#include <sys/time.h>

#include <event2/event.h>

static struct timeval timeval_of_ms(uint32_t ms) {
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000);
  tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
  return tv;
}

/* Setup of burst and spread: an add outside the loop reads the clock. */
static void h_refresh(struct impl *x) { (void)x; }

static void h_expire(struct impl *x) { event_base_loop(x->base, EVLOOP_NONBLOCK); }

static void h_run(struct impl *x) { event_base_dispatch(x->base); }

#endif /* TW_BENCH_EVENT_LOOP_H */
