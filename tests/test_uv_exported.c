/*
 * The libuv adapter's exported start and stop, as a program built without
 * the inline paths calls them (TW_UV__NO_INLINE: tw_uv_timer_start and
 * tw_uv_timer_stop are then the library's symbols, what a program built
 * against an older header calls too). tests/test_uv.c holds the rest.
 */
#define TW_UV__NO_INLINE
#include <criterion/criterion.h>
#include <uv.h>

#include "twheel-uv.h"

static int fired;

static void on_fire(tw_uv_timer_t *handle) {
  (void)handle;
  fired++;
}

Test(uv_exported, start_and_stop_keep_the_loop_alive_exactly_and_fire) {
  uv_loop_t loop;
  tw_uv *d;
  tw_uv_timer_t t;
  cr_assert_eq(uv_loop_init(&loop), 0);
  cr_assert_eq(tw_uv_init(&loop, &d), 0);
  cr_assert_eq(tw_uv_timer_init(d, &t), 0);
  cr_assert_eq(tw_uv_timer_start(NULL, on_fire, 1, 0), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_start(&t, NULL, 1, 0), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_stop(NULL), UV_EINVAL);
  for (int round = 0; round < 2; round++) { /* never started, then stopped */
    cr_assert_eq(tw_uv_timer_start(&t, on_fire, 5000, 0), 0);
    cr_assert_eq(uv_loop_alive(&loop), 1);
    cr_assert_eq(tw_uv_timer_stop(&t), 0);
    cr_assert_eq(uv_loop_alive(&loop), 0);
    cr_assert_eq(tw_uv_timer_stop(&t), 0); /* idempotent */
  }
  cr_assert_eq(tw_uv_timer_start(&t, on_fire, 10, 0), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(fired, 1);
  tw_uv_close(d, NULL);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(uv_loop_close(&loop), 0);
}
