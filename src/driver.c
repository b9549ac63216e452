/*
 * The loop driver: when a loop's one timer must be armed for a wheel (see
 * twheel.h). Every loop adapter uses it, so the rule lives here once.
 *
 * INVARIANT (outside tw_driver_expired): `armed` is never later than the
 * earliest deadline of an active timer, and is TW_NEVER only when no timer
 * is active, or after the loop refused an arm (until the next start or
 * rearm, which arms for the wheel's next wakeup if that is earlier). Starts
 * keep it by lowering it; stops and later resets may leave it early (a wakeup
 * then fires nothing and re-arms); tw_driver_expired sets it to the wheel's
 * next wakeup when its slice returns.
 */
#define TW__NO_INLINE /* this file defines the driver's inline pair itself */
#include "wheel.h"

#include <errno.h>
#include <string.h>

int tw_driver_init(tw_driver *d, tw_wheel *w, tw_driver_arm_fn arm) {
  if (!d || !w || !arm)
    return -EINVAL;
  memset(d, 0, sizeof *d);
  d->wheel = w;
  d->armed = TW_NEVER;
  d->tw__arm = arm;
  d->tw__slice = TW_SLICE;
  return 0;
}

/* Sets the loop timer for `at` (TW_NEVER: stops it). */
static int set(tw_driver *d, uint64_t at, int for_maintenance,
               int from_expiry) {
  int rc = d->tw__arm(d, at, from_expiry);
  d->armed = rc == 0 ? at : TW_NEVER;
  d->tw__for_maintenance = (unsigned char)for_maintenance;
  d->stats.rearms++;
  return rc;
}

/*
 * Arms for `at` when nothing is armed, `started` being the timers the caller
 * has just started (1 for tw_driver_started, 0 for tw_driver_rearm). Any
 * other timer can be waiting then only after the loop refused an arm: the
 * wheel's next wakeup is armed instead when it is earlier. The common case,
 * a first timer on an empty wheel, reads nothing more of the wheel.
 */
static int set_from_nothing(tw_driver *d, uint64_t at, size_t started) {
  uint64_t expiry, wakeup;
  if (d->wheel->head.count > started) {
    wakeup = tw__next_times(d->wheel, &expiry);
    if (wakeup < at)
      return set(d, wakeup, wakeup < expiry, 0);
  }
  return set(d, at, 0, 0);
}

/* The loop timer is queued to fire (tw_driver_fence): re-arming could
 * cancel that wakeup, which re-arms for everything when it returns. */
static int queued(const tw_driver *d) {
  return d->wheel->fenced;
}

int tw__driver_started(tw_driver *d, uint64_t deadline) {
  if (!d)
    return -EINVAL;
  if (d->dispatching || d->closed || deadline >= d->armed || queued(d))
    return 0;
  if (d->armed == TW_NEVER)
    return set_from_nothing(d, deadline, 1);
  return set(d, deadline, 0, 0);
}

int tw_driver_started(tw_driver *d, uint64_t deadline) {
  return tw__driver_started(d, deadline);
}

/* The wheel emptied: the loop timer stops (not from inside
 * tw_driver_expired, which re-arms when its callbacks return), and with it
 * the wakeup a fence was for. */
void tw__driver_emptied(tw_driver *d) {
  if (d->dispatching)
    return;
  d->wheel->fenced = 0;
  if (d->armed != TW_NEVER)
    set(d, TW_NEVER, 0, 0);
}

/* As the inline one in twheel.h. */
void tw_driver_stopped(tw_driver *d) {
  if (d && !d->closed && d->wheel->head.count == 0)
    tw__driver_emptied(d);
}

int tw_driver_rearm(tw_driver *d, uint64_t at) {
  if (!d)
    return -EINVAL;
  if (d->dispatching || d->closed)
    return 0;
  d->wheel->fenced = 0; /* its wakeup is cancelled, or runs later (a break) */
  if (d->armed == TW_NEVER)
    return set_from_nothing(d, at, 0);
  if (d->armed < at)
    return set(d, d->armed, d->tw__for_maintenance, 0);
  return set(d, at, 0, 0);
}

/* The first fence before an advance is the one that counts. Inside
 * tw_driver_expired it would end with that advance, in which no timer
 * started meanwhile runs anyway. */
void tw_driver_fence(tw_driver *d) {
  if (d && !d->closed && !d->wheel->fenced) {
    d->wheel->fenced = 1;
    d->wheel->fence = tw__next_start_fence(d->wheel);
  }
}

/*
 * A wakeup that runs no callback is "maintenance" when it was armed for the
 * wheel's paced work, or when its slice ran out before anything was due
 * (it moved timers that had to move first); otherwise it is "empty": it was
 * armed for a deadline that has since moved later or gone.
 */
size_t tw_driver_expired(tw_driver *d, uint64_t now) {
  int for_maintenance;
  uint64_t expiry, wakeup;
  size_t ran;

  /* Closed, the loop may have freed the wheel; dispatching, this is a call
   * from a callback of the wakeup under way, which does nothing (as
   * tw_advance). */
  if (!d || d->closed || d->dispatching)
    return 0;
  for_maintenance = d->tw__for_maintenance;
  d->armed = TW_NEVER; /* the loop timer fires once per arming */
  d->dispatching = 1;
  ran = tw_advance_slice(d->wheel, now, d->tw__slice);
  d->dispatching = 0;
  d->stats.wakeups++;
  d->stats.fired += ran;
  if (d->closed) { /* a callback closed the loop: the wheel is gone */
    d->stats.empty_wakeups += ran == 0;
    return ran;
  }
  wakeup = tw__next_times(d->wheel, &expiry);
  if (ran == 0 && (for_maintenance || wakeup <= tw_now(d->wheel)))
    d->stats.maintenance++;
  else if (ran == 0)
    d->stats.empty_wakeups++;
  if (wakeup != TW_NEVER)
    set(d, wakeup, wakeup < expiry, 1);
  return ran;
}

void tw_driver_close(tw_driver *d) {
  if (!d)
    return;
  d->closed = 1;
  d->armed = TW_NEVER; /* the loop stops its timer itself */
}
