/*
 * The libuv adapter: one wheel and one uv_timer_t per loop, kept armed by a
 * tw_driver (twheel.h), which holds the arming rule; this file is the glue
 * to libuv, and the liveness of the shared handles.
 *
 * `deferred`: the driver re-armed for a time already due from inside the
 * timer's own callback; the prepare handle starts the uv_timer_t before the
 * next poll instead, which keeps libuv 1.44 from rerunning it in the same
 * timer pass (I/O and check callbacks run between two calls).
 *
 * One timer pass per iteration (libuv < 1.45, `one_pass`). libuv 1.44's
 * uv_run(UV_RUN_ONCE) runs the timer phase before the poll and again after
 * it; libuv 1.45 and later run it once, after the poll. The adapter cannot
 * tell the modes apart (the phases of UV_RUN_ONCE are those of two
 * UV_RUN_DEFAULT iterations), so it follows one rule in every mode: the
 * wheel's callbacks run at most once in one iteration, counted from the
 * end of one poll to the end of the next. The check handle marks the end of
 * a poll: it records whether the loop timer was due then (`due_at_check`:
 * the next timer phase is the one after the poll) and whether callbacks ran
 * before that poll (`ran_before_poll`). A wakeup after the poll that follows
 * callbacks run before it leaves its callbacks to the prepare phase
 * (`run_at_prepare`): in UV_RUN_DEFAULT that is the same iteration, before
 * its poll; in UV_RUN_ONCE it is the next uv_run() call.
 */
#define _POSIX_C_SOURCE 200809L /* uv.h needs POSIX types under -std=c11 */
#define TW_UV__NO_INLINE /* this file defines tw_uv_timer_start and _stop */
#include "twheel-uv.h"

#include <stddef.h>
#include <stdlib.h>

/* The first libuv whose uv_run() runs timers once per iteration. */
#define ONE_TIMER_PHASE_VERSION 0x012d00u /* 1.45.0 */

struct tw_uv {
  struct tw_uv__head head; /* driver, loop, unrefd_active: the inline paths
                              read them (twheel-uv.h) */
  uv_timer_t timer;        /* the one loop timer */
  uv_prepare_t prepare;    /* work that must wait for the next prepare phase */
  uv_idle_t idle;          /* active with `prepare`: see sync_prepare */
  uv_check_t check;        /* libuv < 1.45: marks the end of each poll */
  void (*close_cb)(tw_uv *d);
  int open_handles;             /* shared handles libuv has not closed yet */
  unsigned char deferred;       /* the loop timer waits for the prepare phase */
  unsigned char run_at_prepare; /* so does a wakeup's advance */
  unsigned char in_prepare;     /* that advance is running */
  unsigned char one_pass;       /* libuv < 1.45: see the top of this file */
  unsigned char due_at_check;   /* the loop timer was due when the poll ended */
  unsigned char after_check;    /* the check phase ran, the timer phase not */
  unsigned char ran_since_check; /* callbacks ran since, before the next poll */
  unsigned char ran_before_poll; /* ... before the poll that ended last */
  uint64_t check_time;           /* uv_now() in the last check phase */
};

static tw_uv_timer_t *handle_of(tw_timer *t) {
  return (tw_uv_timer_t *)(void *)((char *)t -
                                   offsetof(tw_uv_timer_t, tw__timer));
}

static tw_uv *owner_of(const tw_uv_timer_t *h) {
  return h ? h->tw__timer.data : NULL;
}

static tw_uv *adapter_of(tw_driver *driver) {
  return (tw_uv *)(void *)((char *)driver - offsetof(tw_uv, head.driver));
}

/* The inline paths of twheel-uv.h require this layout by name. */
const unsigned char tw__uv_inline_abi_2 = 1;

static void set_ref(uv_handle_t *handle, int referenced) {
  (referenced ? uv_ref : uv_unref)(handle); /* both idempotent */
}

/* The prepare and idle handles also stay referenced while a wakeup is owed
 * to the prepare phase (on_timer): stopping or unreferencing the last
 * referenced timer then must not end the loop before it runs the
 * unreferenced ones that came due while the loop was alive. */
static void ref_prepare(tw_uv *d, int referenced) {
  set_ref((uv_handle_t *)&d->prepare, referenced || d->run_at_prepare);
  set_ref((uv_handle_t *)&d->idle, referenced || d->run_at_prepare);
}

/* Liveness (twheel-uv.h, tw__uv_referenced): the shared handles are
 * referenced iff an active timer is, but for ref_prepare's case. */
void tw__uv_recount(struct tw_uv__head *head) {
  tw_uv *d = (tw_uv *)(void *)head; /* its first member */
  int referenced = tw__uv_referenced(head) > 0;
  set_ref((uv_handle_t *)&d->timer, referenced);
  set_ref((uv_handle_t *)&d->check, referenced);
  ref_prepare(d, referenced);
  tw_driver_stopped(&head->driver);
}

static void on_timer(uv_timer_t *timer);
static void on_prepare(uv_prepare_t *prepare);
static void on_check(uv_check_t *check);

static void on_idle(uv_idle_t *idle) {
  (void)idle; /* being active is all it does */
}

/* The prepare handle runs while something waits for it, a wakeup that is
 * due. The idle handle is active meanwhile, for a program that polls
 * uv_backend_fd() itself between uv_run() calls: uv_backend_timeout()
 * counts no prepare handle, and would answer the next uv_timer_t's time,
 * or -1 (block) without one; an active idle handle makes it 0. (Inside
 * uv_run() the prepare phase runs the wakeup before the poll's timeout is
 * computed.) */
static void sync_prepare(tw_uv *d) {
  if (d->deferred || d->run_at_prepare) {
    uv_prepare_start(&d->prepare, on_prepare);
    uv_idle_start(&d->idle, on_idle);
  } else {
    uv_prepare_stop(&d->prepare);
    uv_idle_stop(&d->idle);
  }
  ref_prepare(d, tw__uv_referenced(&d->head) > 0);
}

/* The check handle follows the polls on libuv < 1.45 only; without it
 * nothing below ever defers a wakeup. */
static void follow_polls(tw_uv *d) {
  if (d->one_pass)
    uv_check_start(&d->check, on_check);
}

/* Advances the wheel for a wakeup; `before_poll`: this iteration's poll
 * has not run yet, so a second wakeup after it must wait. */
static void expire(tw_uv *d, int before_poll) {
  size_t ran = tw_driver_expired(&d->head.driver, uv_now(d->head.loop));
  if (ran > 0 && before_poll && !d->head.driver.closed) {
    d->ran_since_check = 1;
    follow_polls(d);
  }
}

/*
 * A wakeup after the poll that follows callbacks run before it waits for
 * the next prepare phase (top of this file; the header says what it does),
 * fenced: the timers started meanwhile (from idle or pending callbacks, or
 * between two calls) wait for a wakeup after it, not run in the iteration
 * that started them. It waits only when a referenced timer is active:
 * with unreferenced timers alone, holding the loop alive for it would
 * hold it for ever if each such wakeup left another (a repeating timer
 * slower than its period), so it runs at once.
 */
static void on_timer(uv_timer_t *timer) {
  tw_uv *d = timer->data;
  int after_poll = d->due_at_check;

  d->due_at_check = d->after_check = 0;
  if (after_poll && d->ran_before_poll && /* only with one_pass */
      tw__uv_referenced(&d->head) > 0) {
    d->run_at_prepare = 1; /* the next iteration's */
    tw_driver_fence(&d->head.driver);
    sync_prepare(d);
    return;
  }
  expire(d, !after_poll);
}

static void on_prepare(uv_prepare_t *prepare) {
  tw_uv *d = prepare->data;
  d->after_check = 0;
  if (d->run_at_prepare) {
    d->run_at_prepare = 0;
    d->in_prepare = 1;
    expire(d, 1);
    d->in_prepare = 0;
    if (d->head.driver.closed)
      return; /* tw_uv_close ran in a callback: the handles are closing */
  }
  if (d->deferred) {
    d->deferred = 0;
    uv_timer_start(&d->timer, on_timer, 0, 0);
  }
  sync_prepare(d);
}

/* The end of a poll (libuv < 1.45 only): see the top of this file. */
static void on_check(uv_check_t *check) {
  tw_uv *d = check->data;
  int armed = uv_is_active((uv_handle_t *)&d->timer);

  d->ran_before_poll = d->ran_since_check;
  d->ran_since_check = 0;
  d->due_at_check = armed && uv_timer_get_due_in(&d->timer) == 0;
  d->after_check = 1;
  d->check_time = uv_now(d->head.loop);
  /* `deferred` and `run_at_prepare` are never set here: a prepare phase
   * always comes between the timer phase that sets them and this one. */
  if (!armed && !d->ran_before_poll)
    uv_check_stop(check); /* nothing left to follow */
}

/* The driver's `arm`: sets the uv_timer_t for `at` in uv_now() ms. */
static int arm(tw_driver *driver, uint64_t at, int from_expiry) {
  tw_uv *d = adapter_of(driver);
  uint64_t now = uv_now(d->head.loop);

  d->deferred = 0;
  d->due_at_check = 0; /* whatever the check phase saw is out of date */
  if (at == TW_NEVER) {
    d->run_at_prepare = 0;
    uv_timer_stop(&d->timer);
  } else if (from_expiry && at <= now && !d->in_prepare) {
    uv_timer_stop(&d->timer); /* it would rerun at once */
    d->deferred = 1;
  } else {
    uv_timer_start(&d->timer, on_timer, at > now ? at - now : 0, 0);
    /* Due now from a check or close callback: the timer phase that follows
     * this poll runs it, as if the check phase had seen it due. Those
     * callbacks see the check phase's time; every timer phase updates it
     * first, so a later time means a start from a timer phase that did
     * not fire the loop timer (which clears after_check), or between two
     * calls: before a poll. Within the check's millisecond the two cannot
     * be told apart. */
    d->due_at_check = d->after_check && at <= now && now == d->check_time;
  }
  sync_prepare(d);
  if (at != TW_NEVER)
    follow_polls(d);
  return 0;
}

/* The wheel's callback for every timer: liveness, then the user's, which
 * every start of the handle sets (a wheel timer armed any other way, as
 * through tw_uv_wheel, would call a NULL one: do not). The wheel has
 * re-armed a repeating timer from the wakeup's time; libuv re-arms from
 * uv_now() at the timer's turn, which an earlier callback may have moved on
 * with uv_update_time(): then so does this, with uv_timer_again's twin (a
 * later deadline, a store). (A fixed-rate timer, which no tw_uv call
 * makes, keeps the wheel's rule.) */
static void fire(tw_timer *t) {
  tw_uv_timer_t *h = handle_of(t);
  tw_uv *d = t->data;
  if (!tw__is_active(t))
    tw__uv_deactivated(&d->head, h); /* a one-shot is inactive from here on */
  else if (uv_now(d->head.loop) > tw__head(d->head.driver.wheel)->now &&
           !tw__is_fixed_rate(t))
    tw_uv_timer_again(h);
  h->tw__cb(h); /* h may be freed from here on */
}

int tw_uv_init(uv_loop_t *loop, tw_uv **out) {
  tw_uv *d;
  tw_wheel *wheel;
  if (!loop || !out)
    return UV_EINVAL;
  d = calloc(1, sizeof *d);
  wheel = d ? tw_wheel_new(uv_now(loop)) : NULL;
  if (!wheel) {
    free(d);
    return UV_ENOMEM;
  }
  tw_driver_init(&d->head.driver, wheel, arm);
  /* None can fail on a live loop (libuv 1.44 to 1.48). */
  uv_timer_init(loop, &d->timer);
  uv_prepare_init(loop, &d->prepare);
  uv_idle_init(loop, &d->idle);
  uv_check_init(loop, &d->check);
  d->timer.data = d->prepare.data = d->idle.data = d->check.data = d;
  d->head.loop = loop;
  tw__uv_recount(&d->head); /* no referenced timer yet: unreferenced */
  d->open_handles = 4;
  d->one_pass = uv_version() < ONE_TIMER_PHASE_VERSION;
  *out = d;
  return 0;
}

static void on_handle_closed(uv_handle_t *handle) {
  tw_uv *d = handle->data;
  if (--d->open_handles > 0)
    return;
  if (d->close_cb)
    d->close_cb(d);
  free(d);
}

void tw_uv_close(tw_uv *d, void (*close_cb)(tw_uv *d)) {
  if (!d || d->head.driver.closed)
    return;
  tw_driver_close(&d->head.driver);
  d->close_cb = close_cb;
  /* Inside a callback the wheel is freed when tw_advance returns. */
  tw_wheel_free(d->head.driver.wheel);
  d->head.unrefd_active = 0;
  d->deferred = d->run_at_prepare = 0;
  uv_close((uv_handle_t *)&d->timer, on_handle_closed);
  uv_close((uv_handle_t *)&d->prepare, on_handle_closed);
  uv_close((uv_handle_t *)&d->idle, on_handle_closed);
  uv_close((uv_handle_t *)&d->check, on_handle_closed);
}

tw_wheel *tw_uv_wheel(tw_uv *d) {
  return d && !d->head.driver.closed ? d->head.driver.wheel : NULL;
}

uv_loop_t *tw_uv_loop(const tw_uv *d) {
  return d ? d->head.loop : NULL;
}

int tw_uv_stats(const tw_uv *d, tw_stats *out) {
  if (!d || !out)
    return UV_EINVAL;
  *out = d->head.driver.stats;
  return 0;
}

int tw_uv_timer_init(tw_uv *d, tw_uv_timer_t *handle) {
  if (!d || !handle || d->head.driver.closed)
    return UV_EINVAL;
  tw_timer_init(&handle->tw__timer);
  /* The wheel's callback is `fire` for every handle, from here on: so the
   * inline start (twheel-uv.h) takes a handle's first start too, and
   * "never started" is the user's callback, NULL until then. */
  handle->tw__timer.tw__cb = fire;
  handle->tw__timer.data = d;
  handle->tw__cb = NULL;
  handle->tw__flags = TW_UV__REF;
  return 0;
}

int tw__uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                       uint64_t timeout, uint64_t repeat) {
  tw_uv *d = owner_of(handle);
  uint64_t deadline;
  int was_active;

  if (!d || !cb || d->head.driver.closed)
    return UV_EINVAL;
  was_active = tw__is_active(&handle->tw__timer);
  deadline = tw__uv_deadline_after(d->head.loop, timeout);
  if (tw_timer_start_at(d->head.driver.wheel, &handle->tw__timer, fire,
                        deadline, repeat))
    return UV_EINVAL; /* not initialised */
  if (!was_active)
    tw__uv_activated(&d->head, handle);
  return tw__uv_started(&d->head, handle, cb, deadline);
}

int tw_uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                      uint64_t timeout, uint64_t repeat) {
  return tw__uv_timer_start(handle, cb, timeout, repeat);
}

int tw__uv_timer_stop(tw_uv_timer_t *handle) {
  tw_uv *d = owner_of(handle);

  if (!d)
    return UV_EINVAL;
  if (!tw__is_active(&handle->tw__timer))
    return 0; /* also every timer of a closing adapter */
  if (tw_timer_stop(d->head.driver.wheel, &handle->tw__timer) != 0)
    return UV_EINVAL; /* garbage that looked active: nothing changed */
  tw__uv_deactivated(&d->head, handle);
  return 0;
}

int tw_uv_timer_stop(tw_uv_timer_t *handle) {
  return tw__uv_timer_stop(handle);
}

int tw_uv_timer_again(tw_uv_timer_t *handle) {
  tw_uv *d = owner_of(handle);
  uint64_t repeat;

  if (!d || !handle->tw__cb || d->head.driver.closed)
    return UV_EINVAL;
  repeat = tw_timer_get_repeat(&handle->tw__timer);
  if (repeat == 0)
    return 0;
  return tw_uv_timer_start(handle, handle->tw__cb, repeat, repeat);
}

void tw_uv_timer_set_repeat(tw_uv_timer_t *handle, uint64_t repeat) {
  if (handle)
    tw_timer_set_repeat(&handle->tw__timer, repeat);
}

uint64_t tw_uv_timer_get_repeat(const tw_uv_timer_t *handle) {
  return handle ? tw_timer_get_repeat(&handle->tw__timer) : 0;
}

uint64_t tw_uv_timer_get_due_in(const tw_uv_timer_t *handle) {
  uint64_t deadline, now;
  if (!handle || !tw_timer_is_active(&handle->tw__timer))
    return 0;
  deadline = tw_timer_deadline(&handle->tw__timer);
  now = uv_now(owner_of(handle)->head.loop);
  return deadline > now ? deadline - now : 0;
}

int tw_uv_timer_is_active(const tw_uv_timer_t *handle) {
  return handle ? tw_timer_is_active(&handle->tw__timer) : 0;
}

void tw_uv_timer_ref(tw_uv_timer_t *handle) {
  tw_uv *d = owner_of(handle);
  if (!d || (handle->tw__flags & TW_UV__REF))
    return;
  handle->tw__flags |= TW_UV__REF;
  if (tw_timer_is_active(&handle->tw__timer)) {
    d->head.unrefd_active--;
    tw__uv_recount(&d->head);
  }
}

void tw_uv_timer_unref(tw_uv_timer_t *handle) {
  tw_uv *d = owner_of(handle);
  if (!d || !(handle->tw__flags & TW_UV__REF))
    return;
  handle->tw__flags &= ~TW_UV__REF;
  if (tw_timer_is_active(&handle->tw__timer)) {
    d->head.unrefd_active++;
    tw__uv_recount(&d->head);
  }
}

int tw_uv_timer_has_ref(const tw_uv_timer_t *handle) {
  return owner_of(handle) && (handle->tw__flags & TW_UV__REF);
}
