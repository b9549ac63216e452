/* The header's inline paths, out of a file built without TW__NO_INLINE
 * (inline_calls.c). */
#ifndef TW_TESTS_INLINE_CALLS_H
#define TW_TESTS_INLINE_CALLS_H

#include <twheel.h>

int inline_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb, uint64_t timeout);
int inline_stop(tw_wheel *w, tw_timer *t);
void inline_driver_stopped(tw_driver *d);

#endif
