/*
 * twheel-event: drives one wheel (in ms) from one libevent timer event.
 *
 * INVARIANT (outside on_wakeup): the timer event is added for `armed`, and
 * armed <= tw_next_expiry(wheel); it is not added (armed == TW_NEVER) only
 * when the wheel is empty. An add earlier than `armed` moves the event; an
 * add at or after it, or a delete, leaves it alone: the wakeup at `armed`
 * then finds nothing due (counted) and re-arms for the true next expiry.
 */
#define _POSIX_C_SOURCE 200809L
#include "twheel-event.h"

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

/* tw__period: the EV_PERSIST flag of the assign, then the period in ms. */
#define TW_EV__PERSIST ((uint64_t)1 << 63)
#define PERIOD_MS(t) ((t)->tw__period & ~TW_EV__PERSIST)

struct tw_ev {
  struct event_base *base;
  struct event *ev; /* the one timer event */
  tw_wheel *wheel;
  uint64_t armed; /* ms the event is added for; TW_NEVER: not added */
  int entered;    /* inside on_wakeup: it re-arms when the advance returns */
  int closed;     /* tw_ev_free was called inside on_wakeup */
  tw_stats stats;
};

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

/* The duration a timeval (or common-timeout token) stands for, in ns;
 * 0 when zero or negative, saturated at NS_MAX. */
static uint64_t duration_ns(const struct timeval *tv) {
  int64_t sec = (int64_t)tv->tv_sec;
  int64_t usec = (int64_t)tv->tv_usec;

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
  return (uint64_t)sec * NS_PER_S + (uint64_t)usec * NS_PER_US;
}

static void on_wakeup(evutil_socket_t fd, short what, void *arg);

tw_ev *tw_ev_new(struct event_base *base) {
  tw_ev *d;
  if (!base || !(d = calloc(1, sizeof *d)))
    return NULL;
  d->base = base;
  d->armed = TW_NEVER;
  d->wheel = tw_wheel_new(clock_ns(CLOCK_MONOTONIC) / NS_PER_MS);
  d->ev = event_new(base, -1, 0, on_wakeup, d);
  if (!d->wheel || !d->ev) {
    tw_wheel_free(d->wheel);
    if (d->ev)
      event_free(d->ev);
    free(d);
    return NULL;
  }
  return d;
}

void tw_ev_free(tw_ev *d) {
  if (!d || d->closed)
    return;
  tw_wheel_free(d->wheel); /* every timer inactive now, never called */
  if (d->entered) {        /* on_wakeup frees the rest when it returns */
    d->closed = 1;
    event_del(d->ev);
    return;
  }
  event_free(d->ev);
  free(d);
}

tw_wheel *tw_ev_wheel(tw_ev *d) {
  return d && !d->closed ? d->wheel : NULL;
}

int tw_ev_stats(const tw_ev *d, tw_stats *out) {
  if (!d || !out || d->closed)
    return -1;
  *out = d->stats;
  return 0;
}

/*
 * Adds the event for `deadline` (ms of CLOCK_MONOTONIC). libevent counts the
 * wait from its own clock, CLOCK_MONOTONIC_COARSE by default, which lags the
 * precise one by up to a tick: measuring the wait from that clock keeps it
 * from waking before the deadline (a base with EVENT_BASE_FLAG_PRECISE_TIMER
 * wakes up to a tick later instead). A deadline already reached waits 0.
 */
static int arm(tw_ev *d, uint64_t deadline) {
  uint64_t target =
      deadline >= NS_MAX / NS_PER_MS ? NS_MAX : deadline * NS_PER_MS;
  uint64_t from = clock_ns(LOOP_CLOCK);
  uint64_t wait = 0;
  struct timeval tv;

  if (target > from && target > clock_ns(CLOCK_MONOTONIC))
    wait = target - from; /* not due yet */

  wait = (wait + NS_PER_US - 1) / NS_PER_US; /* us, rounded up */
  tv.tv_sec = (time_t)(wait / US_PER_S);
  tv.tv_usec = (suseconds_t)(wait % US_PER_S);
  d->stats.rearms++;
  if (event_add(d->ev, &tv) != 0) {
    d->armed = TW_NEVER;
    return -1;
  }
  d->armed = deadline;
  return 0;
}

static void disarm(tw_ev *d) {
  if (d->armed == TW_NEVER)
    return;
  d->stats.rearms++;
  event_del(d->ev);
  d->armed = TW_NEVER;
}

static void on_wakeup(evutil_socket_t fd, short what, void *arg) {
  tw_ev *d = arg;
  size_t ran;
  uint64_t next;
  (void)fd;
  (void)what;

  d->armed = TW_NEVER; /* a one-shot event: no longer added */
  d->stats.wakeups++;
  d->entered = 1;
  ran = tw_advance(d->wheel, clock_ns(CLOCK_MONOTONIC) / NS_PER_MS, TW_ALL);
  d->entered = 0;
  if (d->closed) { /* tw_ev_free ran in a callback; the wheel is gone */
    event_free(d->ev);
    free(d);
    return;
  }
  d->stats.fired += ran;
  d->stats.empty_wakeups += ran == 0;
  next = tw_next_expiry(d->wheel);
  if (next != TW_NEVER)
    arm(d, next); /* on failure the next add retries */
}

/* The wheel's callback for every tw_ev_timer: libevent's persist rule,
 * then the user's callback. `t` may be freed by it: not touched after. */
static void on_timer(tw_timer *timer) {
  tw_ev_timer *t =
      (tw_ev_timer *)(void *)((char *)timer - offsetof(tw_ev_timer, tw__timer));
  event_callback_fn cb = t->tw__cb;
  void *arg = timer->data;
  uint64_t period = PERIOD_MS(t);

  if (period) {
    tw_wheel *w = t->tw__d->wheel;
    uint64_t next = t->tw__deadline + period;
    if (next < tw_now(w))
      next = tw_now(w) + period;
    t->tw__deadline = next;
    tw_timer_start_at(w, timer, on_timer, next, 0);
  }
  cb(-1, EV_TIMEOUT, arg);
}

int tw_ev_timer_assign(tw_ev_timer *t, tw_ev *d, short flags,
                       event_callback_fn cb, void *arg) {
  if (!t || !d || !cb || d->closed || (flags & ~(EV_TIMEOUT | EV_PERSIST)))
    return -1;
  tw_timer_init(&t->tw__timer);
  t->tw__timer.data = arg;
  t->tw__d = d;
  t->tw__cb = cb;
  t->tw__deadline = TW_NEVER;
  t->tw__period = (flags & EV_PERSIST) ? TW_EV__PERSIST : 0;
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
  uint64_t now, span, deadline;

  if (!t || !(d = t->tw__d) || d->closed)
    return -1;
  if (!tv)
    return 0; /* keeps a pending deadline; a timer not pending stays so */
  now = clock_ns(CLOCK_MONOTONIC);
  span = duration_ns(tv);
  /* Never early: the first ms whose start is at or after now + span. A
   * zero span is due at once (any later wakeup is after the add). */
  deadline = span ? ceil_ms(saturating_add(now, span)) : now / NS_PER_MS;
  if (tw_timer_start_at(d->wheel, &t->tw__timer, on_timer, deadline, 0) != 0)
    return -1;
  t->tw__deadline = deadline;
  if (t->tw__period & TW_EV__PERSIST)
    t->tw__period = TW_EV__PERSIST | ceil_ms(span);
  if (d->entered)
    return 0; /* on_wakeup re-arms after the advance */
  /*
   * Earlier than armed: move the event. Due by the next ms: re-add it even
   * if it is armed earlier, because it may already be activated in this
   * loop iteration, and re-adding cancels that activation, so a zero
   * timeout added from an I/O callback runs in the next iteration, never
   * in this one.
   */
  if (deadline < d->armed || deadline <= now / NS_PER_MS + 1) {
    if (arm(d, deadline < d->armed ? deadline : d->armed) != 0) {
      tw_timer_stop(d->wheel, &t->tw__timer);
      if (tw_count(d->wheel) == 0)
        disarm(d);
      return -1;
    }
  }
  return 0;
}

int tw_ev_timer_del(tw_ev_timer *t) {
  tw_ev *d;
  if (!t)
    return -1;
  if (!tw_timer_is_active(&t->tw__timer))
    return 0; /* never touches the adapter: safe after tw_ev_free */
  d = t->tw__d;
  tw_timer_stop(d->wheel, &t->tw__timer);
  if (!d->entered && tw_count(d->wheel) == 0)
    disarm(d); /* an empty wheel must not keep the loop alive */
  return 0;
}

int tw_ev_timer_pending(const tw_ev_timer *t, struct timeval *tv) {
  if (!t || !tw_timer_is_active(&t->tw__timer))
    return 0;
  if (tv) {
    int64_t mono_us = (int64_t)(clock_ns(CLOCK_MONOTONIC) / NS_PER_US);
    int64_t wall_us = (int64_t)(clock_ns(CLOCK_REALTIME) / NS_PER_US);
    int64_t at_us = (int64_t)(t->tw__deadline * 1000) - mono_us + wall_us;
    int64_t usec = at_us % US_PER_S;
    tv->tv_sec = (time_t)(at_us / US_PER_S - (usec < 0));
    tv->tv_usec = (suseconds_t)(usec < 0 ? usec + US_PER_S : usec);
  }
  return EV_TIMEOUT;
}
