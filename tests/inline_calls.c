/*
 * The header's inline start and stop, compiled as any program gets them,
 * for test_exported.c, whose own calls go to the library's exported
 * symbols (it is built with TW__NO_INLINE).
 */
#include <twheel.h>

#include "inline_calls.h"

int inline_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb, uint64_t timeout) {
  return tw_timer_start(w, t, cb, timeout, 0);
}

int inline_stop(tw_wheel *w, tw_timer *t) {
  return tw_timer_stop(w, t);
}

void inline_driver_stopped(tw_driver *d) {
  tw_driver_stopped(d);
}
