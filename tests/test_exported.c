/*
 * The library's exported tw_timer_start, tw_timer_start_at, tw_timer_stop
 * and tw_driver_stopped, which the header makes inline: what a program
 * built against an older header calls, and what a program that takes their
 * address gets. Built with TW__NO_INLINE, so that the calls below are to
 * the exported symbols; inline_calls.c has the inline ones, and both kinds
 * are mixed on one wheel. Virtual time: exact.
 */
#define TW__NO_INLINE
#include <criterion/criterion.h>

#include <errno.h>

#include <twheel.h>

#include "inline_calls.h"

const char *tw__check(const tw_wheel *w, int full); /* src/check.c */

static tw_wheel *wheel;

static void setup(void) {
  wheel = tw_wheel_new(1000);
  cr_assert_not_null(wheel);
}

static void teardown(void) {
  tw_wheel_free(wheel);
}

TestSuite(exported, .init = setup, .fini = teardown);

#define TIMERS 48
static tw_timer timers[TIMERS];
static int fired[TIMERS], fired_len;

static void record(tw_timer *t) {
  fired[fired_len++] = (int)(t - timers);
}

static void expect_valid(void) {
  const char *broken = tw__check(wheel, 1);
  cr_assert_null(broken, "%s", broken);
}

Test(exported, the_exported_calls_refuse_null_and_uninitialised_timers) {
  static tw_timer zeroed; /* never initialised */
  tw_timer_init(&timers[0]);
  cr_assert_eq(tw_timer_start(NULL, &timers[0], record, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start(wheel, NULL, record, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel, &timers[0], NULL, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel, &zeroed, record, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_stop(NULL, &timers[0]), -EINVAL);
  cr_assert_eq(tw_timer_stop(wheel, &zeroed), -EINVAL);
  tw_driver_stopped(NULL);
  cr_assert_eq(tw_count(wheel), 0);
  cr_assert_not(tw_timer_is_active(&timers[0]));
}

/* What each timer was last started for, and in which order: the order
 * the wheel must fire them in. */
static uint64_t deadline_of[TIMERS];
static int start_of[TIMERS], starts, live[TIMERS];

static void start(int i, uint64_t timeout, int exported) {
  int rc = exported ? tw_timer_start(wheel, &timers[i], record, timeout, 0)
                    : inline_start(wheel, &timers[i], record, timeout);
  cr_assert_eq(rc, 0);
  deadline_of[i] = tw_now(wheel) + timeout;
  start_of[i] = starts++;
  live[i] = 1;
  expect_valid();
}

static void stop(int i, int exported) {
  int rc = exported ? tw_timer_stop(wheel, &timers[i])
                    : inline_stop(wheel, &timers[i]);
  cr_assert_eq(rc, 0);
  live[i] = 0;
  expect_valid();
}

static int fires_before(int a, int b) {
  return deadline_of[a] < deadline_of[b] ||
         (deadline_of[a] == deadline_of[b] && start_of[a] < start_of[b]);
}

/*
 * Timers started, re-armed later and stopped by both kinds of call, taking
 * turns, in one level-1 slot (deadlines 1280-1535) and in level-0 slots
 * (1250-1279): a slot's first timer, its minimum's holder, a slot a stop
 * left empty, equal deadlines. The wheel stays valid after every call and
 * fires the survivors in deadline order, equal ones by latest start.
 */
Test(exported, mixed_with_the_inline_calls_on_one_wheel) {
  int expected[TIMERS], n = 0;
  for (int i = 0; i < TIMERS; i++)
    tw_timer_init(&timers[i]);
  for (int i = 0; i < TIMERS; i++)
    start(i, i % 3 == 0 ? 250 + (uint64_t)i : 300 + (uint64_t)i, i % 2);
  for (int i = 0; i < TIMERS; i += 4)
    stop(i, i % 8 != 0);
  stop(30, 0); /* 1280, the level-1 slot's earliest: it holds its minimum */
  cr_assert_eq(tw_count(wheel), TIMERS - TIMERS / 4 - 1);
  start(8, 305, 1); /* timer 5's deadline, after it */
  start(4, 305, 0);
  start(0, 250, 0); /* back into the level-0 slot its stop left empty */
  start(12, 262, 1);
  start(2, 400, 0); /* active, later: the store, inline and exported */
  start(7, 400, 1);
  cr_assert_eq(tw_next_expiry(wheel), 1250);

  for (int i = 0; i < TIMERS; i++) { /* insertion sort of the live ones */
    int k = n;
    if (!live[i])
      continue;
    while (k > 0 && fires_before(i, expected[k - 1])) {
      expected[k] = expected[k - 1];
      k--;
    }
    expected[k] = i;
    n++;
  }
  cr_assert_eq(tw_advance(wheel, 2000, TW_ALL), (size_t)n);
  cr_assert_eq(tw_count(wheel), 0);
  cr_assert_eq(fired_len, n);
  for (int k = 0; k < n; k++)
    cr_assert_eq(fired[k], expected[k], "call %d: timer %d, expected %d", k,
                 fired[k], expected[k]);
}

/* A timer that does not hold its slot's minimum, moved later with the
 * store: the minimum stays exact, through the exported start as through
 * the inline one, so the next tw_next_expiry re-files nothing. */
Test(exported, a_later_restart_of_a_timer_not_holding_the_minimum_keeps_it) {
  for (int via_inline = 0; via_inline < 2; via_inline++) {
    tw_timer *holder = &timers[0], *other = &timers[1];
    uint64_t now = tw_now(wheel), moves;
    tw_timer_init(holder);
    tw_timer_init(other);
    cr_assert_eq(tw_timer_start(wheel, holder, record, 100, 0), 0);
    cr_assert_eq(tw_timer_start(wheel, other, record, 100, 0), 0);
    moves = tw_moves(wheel);
    if (via_inline)
      cr_assert_eq(inline_start(wheel, other, record, 150), 0);
    else
      cr_assert_eq(tw_timer_start(wheel, other, record, 150, 0), 0);
    cr_assert_eq(tw_next_expiry(wheel), now + 100);
    cr_assert_eq(tw_moves(wheel), moves, "inline %d: the slot was re-filed",
                 via_inline);
    cr_assert_null(tw__check(wheel, 1));
    cr_assert_eq(tw_advance(wheel, now + 150, TW_ALL), 2);
  }
}

static tw_driver driver;
static int arms;
static uint64_t armed_at;

static int fake_arm(tw_driver *d, uint64_t at, int from_expiry) {
  (void)d;
  (void)from_expiry;
  arms++;
  armed_at = at;
  return 0;
}

/* The exported tw_driver_stopped and the inline one: both stop the loop
 * timer when the last timer goes, and only then. */
Test(exported, driver_stopped_stops_the_loop_timer_once_the_wheel_is_empty) {
  cr_assert_eq(tw_driver_init(&driver, wheel, fake_arm), 0);
  for (int i = 0; i < 2; i++) {
    tw_timer_init(&timers[i]);
    cr_assert_eq(tw_timer_start(wheel, &timers[i], record, 10, 0), 0);
    cr_assert_eq(tw_driver_started(&driver, 1010), 0);
  }
  cr_assert_eq(arms, 1);
  cr_assert_eq(tw_timer_stop(wheel, &timers[0]), 0);
  tw_driver_stopped(&driver); /* one left: lazy */
  inline_driver_stopped(&driver);
  cr_assert_eq(arms, 1);
  cr_assert_eq(inline_stop(wheel, &timers[1]), 0);
  tw_driver_stopped(&driver);
  cr_assert_eq(arms, 2);
  cr_assert_eq(armed_at, TW_NEVER);
  cr_assert_eq(driver.armed, TW_NEVER);
  tw_timer_init(&timers[0]);
  cr_assert_eq(tw_timer_start(wheel, &timers[0], record, 10, 0), 0);
  cr_assert_eq(tw_driver_started(&driver, 1010), 0);
  cr_assert_eq(tw_timer_stop(wheel, &timers[0]), 0);
  inline_driver_stopped(&driver);
  cr_assert_eq(arms, 4);
  cr_assert_eq(driver.armed, TW_NEVER);
}
