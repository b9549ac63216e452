#include <criterion/criterion.h>
#include <twheel.h>
static int fired;
static void cb(tw_timer *t) { (void)t; fired++; }
Test(wheel, smoke) {
  tw_wheel *w = tw_wheel_new(0);
  tw_timer t; tw_timer_init(&t);
  cr_assert_eq(tw_timer_start(w, &t, cb, 100, 0), 0);
  cr_assert_eq(tw_next_expiry(w), 100);
  cr_assert_eq(tw_advance(w, 99, TW_ALL), 0);
  cr_assert_eq(tw_advance(w, 100, TW_ALL), 1);
  tw_wheel_free(w);
}
