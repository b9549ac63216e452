/* The per-timer public API: argument checks, then the wheel's tw__arm. */
#include "wheel.h"

#include <errno.h>

static int usable(const tw_wheel *w, const tw_timer *t) {
  return w && t && !w->free_pending && tw__is_valid(t);
}

void tw_timer_init(tw_timer *t) {
  if (!t)
    return;
  t->tw__link.next = t->tw__link.prev = NULL;
  t->tw__cb = NULL;
  t->tw__deadline = TW_NEVER;
  t->tw__repeat = 0;
  t->tw__order = TW_IDLE;
}

int tw_timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                      uint64_t deadline, uint64_t repeat) {
  if (!usable(w, t) || !cb)
    return -EINVAL;
  if (deadline > TW_MAX_DEADLINE)
    deadline = TW_MAX_DEADLINE;
  t->tw__cb = cb;
  t->tw__repeat = repeat;
  tw__arm(w, t, deadline);
  return 0;
}

int tw_timer_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb, uint64_t timeout,
                   uint64_t repeat) {
  if (!w)
    return -EINVAL;
  return tw_timer_start_at(w, t, cb, tw__saturating_add(w->now, timeout),
                           repeat);
}

int tw_timer_stop(tw_wheel *w, tw_timer *t) {
  if (!usable(w, t))
    return -EINVAL;
  if (tw__state(t) != TW_IDLE)
    tw__disarm(w, t);
  return 0;
}

int tw_timer_again(tw_wheel *w, tw_timer *t) {
  if (!usable(w, t) || !t->tw__cb)
    return -EINVAL;
  if (t->tw__repeat)
    tw__arm(w, t, tw__saturating_add(w->now, t->tw__repeat));
  return 0;
}

void tw_timer_set_repeat(tw_timer *t, uint64_t repeat) {
  if (t && tw__is_valid(t))
    t->tw__repeat = repeat;
}

uint64_t tw_timer_get_repeat(const tw_timer *t) {
  return t && tw__is_valid(t) ? t->tw__repeat : 0;
}

int tw_timer_is_active(const tw_timer *t) {
  return t && tw__is_valid(t) && tw__state(t) != TW_IDLE;
}

uint64_t tw_timer_deadline(const tw_timer *t) {
  return tw_timer_is_active(t) ? t->tw__deadline : TW_NEVER;
}
