/*
 * A program as a user builds it, for tests/test_abi.c: it starts one timer,
 * lets it fire, and prints "fired by" and the path of the library it ran
 * on (libtwheel, or libtwheel-uv with PROBE_UV), so that the test knows
 * which one the loader took. Built five ways (tests/abi/meson.build): with
 * the inline paths of twheel.h, also linked with --gc-sections, or with
 * TW__NO_INLINE; with PROBE_UV, the same through twheel-uv.h on a real
 * libuv loop, inline or with TW_UV__NO_INLINE. Exits 0 when the timer
 * fired once.
 */
#define _GNU_SOURCE /* dladdr */
#ifdef PROBE_UV
#include "twheel-uv.h"
#else
#include "twheel.h"
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int fired;

#ifdef PROBE_UV
static void on_timer(tw_uv_timer_t *handle) {
  (void)handle;
  fired++;
}

static void on_close(tw_uv *d) {
  (void)d;
}

static int run(void) {
  uv_loop_t loop;
  tw_uv *d;
  tw_uv_timer_t timer;
  if (uv_loop_init(&loop) || tw_uv_init(&loop, &d))
    return 1;
  if (tw_uv_timer_init(d, &timer) || tw_uv_timer_start(&timer, on_timer, 1, 0))
    return 1;
  uv_run(&loop, UV_RUN_DEFAULT);
  tw_uv_close(d, on_close);
  uv_run(&loop, UV_RUN_DEFAULT);
  return uv_loop_close(&loop) != 0;
}
#else
static void on_timer(tw_timer *t) {
  (void)t;
  fired++;
}

static int run(void) {
  tw_wheel *w = tw_wheel_new(0);
  tw_timer timer;
  if (!w)
    return 1;
  tw_timer_init(&timer);
  if (tw_timer_start(w, &timer, on_timer, 5, 0))
    return 1;
  tw_advance(w, 5, TW_ALL);
  tw_wheel_free(w);
  return 0;
}
#endif

int main(void) {
#ifdef PROBE_UV
  int (*library_function)(uv_loop_t *, tw_uv **) = tw_uv_init;
#else
  tw_wheel *(*library_function)(uint64_t) = tw_wheel_new;
#endif
  void *address; /* the function's, as dladdr takes it (not ISO C's cast) */
  Dl_info info;
  memcpy(&address, &library_function, sizeof address);
  if (run() || fired != 1) {
    fprintf(stderr, "probe: the timer fired %d times\n", fired);
    return 1;
  }
  if (!dladdr(address, &info) || !info.dli_fname) {
    fprintf(stderr, "probe: dladdr found no library\n");
    return 1;
  }
  printf("fired by %s\n", info.dli_fname);
  return 0;
}
