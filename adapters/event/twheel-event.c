/*
 * twheel-event: one wheel (in ms) behind one libevent timer event, kept
 * armed by a tw_driver (twheel.h), which holds the arming rule; this file is
 * the glue to libevent: its clocks, timevals and callbacks.
 *
 * Each timer keeps its expiry as libevent does, to the nanosecond of
 * CLOCK_MONOTONIC (`tw__expiry`: the add time + the timeval), which
 * tw_ev_timer_pending reports; the wheel holds it rounded up to the ms, the
 * time it runs at. EV_PERSIST is the wheel timer's fixed rate (the core
 * re-arms it before the callback at its deadline + the period, or now + the
 * period when that has passed, as libevent does); the period is whole ms,
 * a sub-millisecond part rounded up.
 */
#define _POSIX_C_SOURCE 200809L
#include "twheel-event.h"

#include <event2/event_struct.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#define NS_PER_MS 1000000u
#define NS_PER_US 1000u
#define US_PER_S 1000000
#define NS_PER_S 1000000000u
#define NS_MAX (UINT64_MAX / 2) /* saturated durations: ~292 years */

/* A common-timeout token carries this in the top bits of tv_usec, an index
 * in the bits below, and the real microseconds in the low 20 bits. */
#define COMMON_TIMEOUT_MAGIC 0x50000000L
#define COMMON_TIMEOUT_MAGIC_MASK 0xf0000000L
#define COMMON_TIMEOUT_USEC_MASK 0x000fffffL

struct tw_ev {
  struct event_base *base;
  struct event *ev; /* the one timer event */
  tw_driver driver; /* closed once tw_ev_free was called */
};

static tw_ev *adapter_of(tw_driver *driver) {
  return (tw_ev *)(void *)((char *)driver - offsetof(tw_ev, driver));
}

/* libevent's default clock; it is never ahead of CLOCK_MONOTONIC. */
#ifdef CLOCK_MONOTONIC_COARSE
#define LOOP_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define LOOP_CLOCK CLOCK_MONOTONIC
#endif

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t saturating_add(uint64_t a, uint64_t b) {
  return b > NS_MAX - a ? NS_MAX : a + b; /* a <= NS_MAX */
}

static uint64_t ceil_ms(uint64_t ns) {
  return ns / NS_PER_MS + (ns % NS_PER_MS != 0);
}

/* The ns of a timeval normalised and in range: 0 <= usec < 1e6, 0 <= sec
 * < NS_MAX / NS_PER_S. */
static uint64_t normalised_ns(int64_t sec, int64_t usec) {
  return (uint64_t)sec * NS_PER_S + (uint64_t)usec * NS_PER_US;
}

/* The duration a timeval (or common-timeout token) stands for, in ns;
 * 0 when zero or negative, saturated at NS_MAX. */
static uint64_t duration_ns(const struct timeval *tv) {
  int64_t sec = (int64_t)tv->tv_sec;
  int64_t usec = (int64_t)tv->tv_usec;

  /* The common case, as evtimer_add() is mostly given: no token, no carry,
   * nothing to saturate (both tests are on the values as unsigned). */
  if ((uint64_t)usec < US_PER_S && (uint64_t)sec < NS_MAX / NS_PER_S)
    return normalised_ns(sec, usec);
  if (usec >= 0 && (usec & COMMON_TIMEOUT_MAGIC_MASK) == COMMON_TIMEOUT_MAGIC)
    usec &= COMMON_TIMEOUT_USEC_MASK;
  int64_t carry = usec / US_PER_S; /* tv_usec outside [0, 1e6) */
  usec %= US_PER_S;
  if (usec < 0) {
    usec += US_PER_S;
    carry--;
  }
  if (sec < 0 && carry <= 0)
    return 0;
  if (sec > 0 && carry > 0 && carry > INT64_MAX - sec)
    return NS_MAX;
  sec += carry; /* cannot overflow now */
  if (sec < 0)
    return 0;
  if ((uint64_t)sec >= NS_MAX / NS_PER_S)
    return NS_MAX;
  return normalised_ns(sec, usec);
}

static void on_wakeup(evutil_socket_t fd, short what, void *arg);
static int arm(tw_driver *driver, uint64_t at, int from_expiry);

tw_ev *tw_ev_new(struct event_base *base) {
  tw_ev *d;
  tw_wheel *wheel;
  if (!base || !(d = calloc(1, sizeof *d)))
    return NULL;
  d->base = base;
  wheel = tw_wheel_new(clock_ns(CLOCK_MONOTONIC) / NS_PER_MS);
  d->ev = event_new(base, -1, 0, on_wakeup, d);
  if (!wheel || !d->ev) {
    tw_wheel_free(wheel);
    if (d->ev)
      event_free(d->ev);
    free(d);
    return NULL;
  }
  tw_driver_init(&d->driver, wheel, arm);
  return d;
}

void tw_ev_free(tw_ev *d) {
  if (!d || d->driver.closed)
    return;
  tw_driver_close(&d->driver);
  tw_wheel_free(d->driver.wheel); /* every timer inactive now, never called */
  if (d->driver.dispatching) {    /* on_wakeup frees the rest on return */
    event_del(d->ev);
    return;
  }
  event_free(d->ev);
  free(d);
}

tw_wheel *tw_ev_wheel(tw_ev *d) {
  return d && !d->driver.closed ? d->driver.wheel : NULL;
}

int tw_ev_stats(const tw_ev *d, tw_stats *out) {
  if (!d || !out || d->driver.closed)
    return -1;
  *out = d->driver.stats;
  return 0;
}

/*
 * Whether libevent has activated the adapter's event and not yet run it:
 * its callback then runs later in this loop iteration (or in a later one,
 * after event_base_loopbreak, or behind events of a higher priority, a
 * dispatch limit or event_base_loopcontinue). libevent has no function that
 * tells (event_pending says EV_TIMEOUT both before and after the
 * activation), so this reads the event's flags, in the layout that
 * event2/event_struct.h gives for libevent 2.1 (fixed by its ABI,
 * libevent-2.1.so.7; the header warns that the layout may change with a
 * later ABI).
 */
static int wakeup_queued(const tw_ev *d) {
  return (d->ev->ev_evcallback.evcb_flags & EVLIST_ACTIVE) != 0;
}

/*
 * The driver's `arm`: adds the event for `at` (ms of CLOCK_MONOTONIC), or
 * deletes it for TW_NEVER. libevent counts the wait from its own clock,
 * CLOCK_MONOTONIC_COARSE by default, which lags the precise one by up to a
 * tick: measuring the wait from that clock keeps it from waking before the
 * deadline (a base with EVENT_BASE_FLAG_PRECISE_TIMER wakes up to a tick
 * later instead). Inside a callback libevent counts from the time it cached
 * when the iteration began, so that cache is brought up to date first. A
 * time already reached waits 0, with two cases apart, where an event
 * activated already comes before what the next dispatch polls, as
 * libevent's own activated events do: when the event is activated and not
 * yet run, it is left so (re-adding would cancel the activation); and when
 * a callback of this wakeup called event_base_loopbreak, the event is
 * activated again rather than added (added, the timers the break left ran
 * after the I/O callbacks of the next dispatch).
 */
static int arm(tw_driver *driver, uint64_t at, int from_expiry) {
  tw_ev *d = adapter_of(driver);
  uint64_t target = at >= NS_MAX / NS_PER_MS ? NS_MAX : at * NS_PER_MS;
  uint64_t from = clock_ns(LOOP_CLOCK);
  uint64_t wait = 0;
  struct timeval tv;

  if (at == TW_NEVER)
    return event_del(d->ev) == 0 ? 0 : -1;
  if (target > from && target > clock_ns(CLOCK_MONOTONIC))
    wait = target - from; /* not due yet */
  if (wait == 0 && wakeup_queued(d))
    return 0;
  if (wait == 0 && from_expiry && event_base_got_break(d->base)) {
    event_active(d->ev, EV_TIMEOUT, 1);
    return 0;
  }
  wait = (wait + NS_PER_US - 1) / NS_PER_US; /* us, rounded up */
  tv.tv_sec = (time_t)(wait / US_PER_S);
  tv.tv_usec = (suseconds_t)(wait % US_PER_S);
  event_base_update_cache_time(d->base);
  return event_add(d->ev, &tv) == 0 ? 0 : -1;
}

static void on_wakeup(evutil_socket_t fd, short what, void *arg) {
  tw_ev *d = arg;
  (void)fd;
  (void)what;
  tw_driver_expired(&d->driver, clock_ns(CLOCK_MONOTONIC) / NS_PER_MS);
  if (d->driver.closed) { /* tw_ev_free ran in a callback */
    event_free(d->ev);
    free(d);
  }
}

/* The ms at which a timer due at `expiry` (ns) runs: never before it. */
static uint64_t deadline_of(uint64_t expiry) {
  return ceil_ms(expiry);
}

/*
 * The wheel's callback for every tw_ev_timer. An EV_PERSIST one has been
 * re-armed already, as libevent does before the callback (the wheel's fixed
 * rate): its expiry moves on by the period, or to the wheel's new deadline
 * when periods were missed. `t` may be freed by the callback: not touched
 * after. A callback that called event_base_loopbreak() ends the
 * wakeup: the timers still due run first at the next dispatch, as the
 * events libevent had activated would.
 */
static void on_timer(tw_timer *timer) {
  tw_ev_timer *t =
      (tw_ev_timer *)(void *)((char *)timer - offsetof(tw_ev_timer, tw__timer));
  tw_ev *d = timer->data;

  if (tw__is_active(timer)) { /* EV_PERSIST, re-armed by the wheel */
    uint64_t next =
        saturating_add(t->tw__expiry, tw_timer_get_repeat(timer) * NS_PER_MS);
    if (deadline_of(next) != tw_timer_deadline(timer)) /* periods missed */
      next = tw_timer_deadline(timer) * NS_PER_MS;
    t->tw__expiry = next;
  }
  t->tw__cb(-1, EV_TIMEOUT, t->tw__arg);
  if (!d->driver.closed && event_base_got_break(d->base))
    tw_break(d->driver.wheel);
}

int tw_ev_timer_assign(tw_ev_timer *t, tw_ev *d, short flags,
                       event_callback_fn cb, void *arg) {
  if (!t || !d || !cb || d->driver.closed ||
      (flags & ~(EV_TIMEOUT | EV_PERSIST)))
    return -1;
  tw_timer_init(&t->tw__timer);
  t->tw__timer.data = d;
  tw_timer_set_fixed_rate(&t->tw__timer, (flags & EV_PERSIST) != 0);
  t->tw__cb = cb;
  t->tw__arg = arg;
  return 0;
}

tw_ev_timer *tw_ev_timer_new(tw_ev *d, short flags, event_callback_fn cb,
                             void *arg) {
  tw_ev_timer *t = malloc(sizeof *t);
  if (t && tw_ev_timer_assign(t, d, flags, cb, arg) != 0) {
    free(t);
    t = NULL;
  }
  return t;
}

void tw_ev_timer_free(tw_ev_timer *t) {
  if (!t)
    return;
  tw_ev_timer_del(t);
  free(t);
}

int tw_ev_timer_add(tw_ev_timer *t, const struct timeval *tv) {
  tw_ev *d;
  uint64_t now, span, expiry, deadline, period;
  int queued, after_break, rearm;

  if (!t || !(d = t->tw__timer.data) || d->driver.closed)
    return -1;
  if (!tv)
    return 0; /* keeps a pending deadline; a timer not pending stays so */
  now = clock_ns(CLOCK_MONOTONIC);
  span = duration_ns(tv);
  expiry = saturating_add(now, span);
  /* Never early: the first ms whose start is at or after the expiry. A
   * zero span is due at once (any later wakeup is after the add). */
  deadline = span ? deadline_of(expiry) : now / NS_PER_MS;
  period = tw__is_fixed_rate(&t->tw__timer) ? ceil_ms(span) : 0;
  /*
   * With the adapter's event activated in this loop iteration, this timer
   * must not run in its wakeup (a zero timeout runs at the next iteration,
   * never in this one). Re-adding the event would cancel that activation,
   * and a program adding such timers at every iteration would hold back
   * every timer due for ever: the fence keeps this one out instead. After
   * event_base_loopbreak the activation waits for the next dispatch, where
   * libevent's own timers added now run too: with no fence, this one runs
   * in that wakeup, which is armed for no later than it; and the re-arm
   * ends a fence an add took before the break (tw_driver_rearm; the
   * activation stays, arm), which would hold this timer back with the
   * earlier one for one more dispatch
   * (a_loopbreak_ends_the_fence_of_a_zero_timeout_added_before_it).
   */
  queued = wakeup_queued(d);
  after_break = queued && event_base_got_break(d->base);
  if (queued && !after_break)
    tw_driver_fence(&d->driver);
  /* Not queued, a zero timeout re-arms: the event may be armed for an
   * earlier deadline that CLOCK_MONOTONIC has passed and libevent's coarse
   * clock, up to a tick behind, has not, and would wake that much after
   * the next iteration. */
  rearm = after_break || (!queued && span == 0);
  if (tw_timer_start_at(d->driver.wheel, &t->tw__timer, on_timer, deadline,
                        period) != 0)
    return -1;
  t->tw__expiry = expiry;
  if ((rearm ? tw_driver_rearm(&d->driver, deadline)
             : tw_driver_started(&d->driver, deadline)) != 0) {
    tw_timer_stop(d->driver.wheel, &t->tw__timer);
    tw_driver_stopped(&d->driver);
    return -1;
  }
  return 0;
}

int tw_ev_timer_del(tw_ev_timer *t) {
  tw_ev *d;
  if (!t)
    return -1;
  if (!tw__is_active(&t->tw__timer))
    return 0; /* never touches the adapter: safe after tw_ev_free */
  d = t->tw__timer.data;
  if (tw_timer_stop(d->driver.wheel, &t->tw__timer) != 0)
    return -1; /* garbage that looked active: nothing changed */
  tw_driver_stopped(&d->driver); /* an empty wheel keeps no loop alive */
  return 0;
}

/*
 * CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns: the wall clock read between
 * two monotonic reads, against their midpoint. A thread preempted between
 * the reads would skew it by the time it lost, so the tightest of a few
 * tries counts (a try within 2 us ends the search).
 */
static int64_t wall_minus_mono(void) {
  int64_t best = 0;
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 4 && best_gap > 2 * NS_PER_US; i++) {
    uint64_t m0 = clock_ns(CLOCK_MONOTONIC);
    uint64_t w = clock_ns(CLOCK_REALTIME);
    uint64_t m1 = clock_ns(CLOCK_MONOTONIC);
    if (m1 - m0 < best_gap) {
      best_gap = m1 - m0;
      best = (int64_t)w - (int64_t)(m0 + best_gap / 2);
    }
  }
  return best;
}

/* Floor division by 1000: ns to us, negative values included. */
static int64_t floor_us(int64_t ns) {
  const int64_t k = NS_PER_US;
  return ns / k - (ns % k < 0);
}

/* libevent's event_pending adds its clocks' difference to the monotonic
 * expiry; so does this, with the difference read now. */
int tw_ev_timer_pending(const tw_ev_timer *t, struct timeval *tv) {
  if (!t || !tw_timer_is_active(&t->tw__timer))
    return 0;
  if (tv) {
    int64_t at_us = (int64_t)(t->tw__expiry / NS_PER_US) +
                    floor_us(wall_minus_mono()); /* expiry <= NS_MAX */
    int64_t usec = at_us % US_PER_S;
    tv->tv_sec = (time_t)(at_us / US_PER_S - (usec < 0));
    tv->tv_usec = (suseconds_t)(usec < 0 ? usec + US_PER_S : usec);
  }
  return EV_TIMEOUT;
}
