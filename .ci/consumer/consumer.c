/* A program built the way a user builds against twheel: by .ci/consume,
 * against the installed pkg-config files (twheel, twheel-uv, twheel-event;
 * shared and static) and as a Meson subproject (meson.build here).
 * -DWITH_UV / -DWITH_EVENT add the adapters. It starts one timer through
 * each API it was built with and exits 0 when every one of them fired. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include <twheel.h>
#ifdef WITH_UV
#include <twheel-uv.h>
#endif
#ifdef WITH_EVENT
#include <twheel-event.h>
#endif

static int fired;

static void core_fired(tw_timer *t) {
  (void)t;
  fired++;
}

static int core(void) {
  tw_wheel *w = tw_wheel_new(0);
  tw_timer t;
  if (!w)
    return 1;
  tw_timer_init(&t);
  if (tw_timer_start(w, &t, core_fired, 10, 0) || tw_advance(w, 9, TW_ALL) ||
      tw_advance(w, 10, TW_ALL) != 1) {
    tw_wheel_free(w);
    return 1;
  }
  tw_wheel_free(w);
  printf("twheel: %zu-byte wheel, timer fired\n", tw_wheel_size());
  return 0;
}

#ifdef WITH_UV
static void uv_fired(tw_uv_timer_t *t) {
  (void)t;
  fired++;
}

static int with_uv(void) {
  uv_loop_t loop;
  tw_uv *timers;
  tw_uv_timer_t t;
  int before = fired;
  if (uv_loop_init(&loop) || tw_uv_init(&loop, &timers))
    return 1;
  if (tw_uv_timer_init(timers, &t) || tw_uv_timer_start(&t, uv_fired, 1, 0))
    return 1;
  uv_run(&loop, UV_RUN_DEFAULT);
  tw_uv_close(timers, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) || fired != before + 1)
    return 1;
  printf("twheel-uv: libuv %s, timer fired\n", uv_version_string());
  return 0;
}
#endif

#ifdef WITH_EVENT
static void event_fired(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what, (void)arg;
  fired++;
}

static int with_event(void) {
  struct event_base *base = event_base_new();
  tw_ev *timers = base ? tw_ev_new(base) : NULL;
  tw_ev_timer *t =
      timers ? tw_ev_timer_new(timers, 0, event_fired, NULL) : NULL;
  struct timeval ms = {0, 1000};
  int before = fired, bad = !t || tw_ev_timer_add(t, &ms);
  if (!bad)
    bad = event_base_dispatch(base) < 0 || fired != before + 1;
  tw_ev_timer_free(t);
  tw_ev_free(timers);
  if (base)
    event_base_free(base);
  if (!bad)
    printf("twheel-event: libevent %s, timer fired\n", event_get_version());
  return bad;
}
#endif

int main(void) {
  int bad = core();
#ifdef WITH_UV
  bad |= with_uv();
#endif
#ifdef WITH_EVENT
  bad |= with_event();
#endif
  return bad;
}
