/*
 * The libuv loop as both libuv rows drive it: per-connection uv_timer_t
 * (impl_uv.c) and tw_uv_timer_* (impl_twuv.c), so the two rows differ only
 * in their timer calls. Each iteration updates the loop time (uv_update_time,
 * what uv_run does at the top of every iteration) and runs the loop only
 * when a timer is due (uv_backend_timeout() == 0): the figure is the
 * timers' cost, not epoll_wait's, and timer calls see the cached loop time,
 * as in callbacks.
 *
 * Included after scenarios.h by a file whose `struct impl` has a
 * `uv_loop_t loop`; it defines the hooks that only concern the loop.
 */
#ifndef TW_BENCH_UV_LOOP_H
#define TW_BENCH_UV_LOOP_H

#include <uv.h>

/* The loop, its time read once; 0 or failure. */
static int open_loop(struct impl *x) {
  if (uv_loop_init(&x->loop) != 0)
    return 1;
  uv_update_time(&x->loop);
  return 0;
}

static void h_tick(struct impl *x) {
  uv_update_time(&x->loop);
  if (uv_backend_timeout(&x->loop) == 0)
    uv_run(&x->loop, UV_RUN_NOWAIT);
}

static void h_tick_end(struct impl *x) { (void)x; }

static void h_refresh(struct impl *x) { uv_update_time(&x->loop); }

static void h_expire(struct impl *x) { uv_run(&x->loop, UV_RUN_NOWAIT); }

static void h_run(struct impl *x) { uv_run(&x->loop, UV_RUN_DEFAULT); }

static size_t h_loop_size(void) { return sizeof(uv_loop_t); }

#endif /* TW_BENCH_UV_LOOP_H */
