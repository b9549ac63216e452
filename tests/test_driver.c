/*
 * The loop driver (twheel.h, src/driver.c): the one rule every adapter
 * follows for its loop timer, against a fake loop that records each arm.
 * Virtual time: exact.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdlib.h>

#include <twheel.h>

static tw_wheel *wheel;
static tw_driver driver;

/* The fake loop: every arm the driver asked for. */
static struct arm_call {
  uint64_t at;
  int from_expiry;
} arms[4096];
static size_t arms_len;
static int refuse; /* the next arm fails */

static int fake_arm(tw_driver *d, uint64_t at, int from_expiry) {
  cr_assert_eq(d, &driver);
  cr_assert_lt(arms_len, sizeof arms / sizeof arms[0]);
  arms[arms_len].at = at;
  arms[arms_len].from_expiry = from_expiry;
  arms_len++;
  if (refuse) {
    refuse = 0;
    return -1;
  }
  return 0;
}

/* Two timers for the cases that need a pair (static: the wheel outlives a
 * test body until the teardown frees it). */
static tw_timer a, b;

static void setup(void) {
  tw_timer_init(&a);
  tw_timer_init(&b);
  arms_len = 0;
  refuse = 0;
  wheel = tw_wheel_new(1000);
  cr_assert_not_null(wheel);
  cr_assert_eq(tw_driver_init(&driver, wheel, fake_arm), 0);
}

static void teardown(void) {
  tw_wheel_free(wheel);
}

TestSuite(driver, .init = setup, .fini = teardown);

static int fired;
static void count_cb(tw_timer *t) {
  (void)t;
  fired++;
}

/* Starts `t` at `deadline` and tells the driver, as an adapter does. */
static void start_at(tw_timer *t, uint64_t deadline) {
  cr_assert_eq(tw_timer_start_at(wheel, t, count_cb, deadline, 0), 0);
  tw_driver_started(&driver, deadline);
}

static void stop(tw_timer *t) {
  cr_assert_eq(tw_timer_stop(wheel, t), 0);
  tw_driver_stopped(&driver);
}

Test(driver, init_refuses_null_and_arms_nothing) {
  tw_driver d;
  cr_assert_eq(tw_driver_init(NULL, wheel, fake_arm), -EINVAL);
  cr_assert_eq(tw_driver_init(&d, NULL, fake_arm), -EINVAL);
  cr_assert_eq(tw_driver_init(&d, wheel, NULL), -EINVAL);
  cr_assert_eq(driver.armed, TW_NEVER);
  cr_assert_eq(arms_len, 0);
}

Test(driver, every_call_refuses_null) {
  cr_assert_eq(tw_driver_started(NULL, 5), -EINVAL);
  cr_assert_eq(tw__driver_started(NULL, 5), -EINVAL); /* the exported one */
  cr_assert_eq(tw_driver_rearm(NULL, 5), -EINVAL);
  cr_assert_eq(tw_driver_expired(NULL, 5), 0);
  tw_driver_stopped(NULL); /* no crash: nothing to check */
  tw_driver_close(NULL);
}

Test(driver, armed_for_the_earliest_start_and_lazy_for_later_ones) {
  static tw_timer c;
  tw_timer_init(&c);
  start_at(&a, 1500);
  cr_assert_eq(arms_len, 1);
  cr_assert_eq(arms[0].at, 1500);
  cr_assert_not(arms[0].from_expiry);
  start_at(&b, 2000); /* later: the loop timer stays */
  start_at(&a, 3000); /* the idle reset: later, a store; stays too */
  cr_assert_eq(arms_len, 1);
  start_at(&c, 1200); /* earlier: re-armed */
  cr_assert_eq(arms_len, 2);
  cr_assert_eq(driver.armed, 1200);
  cr_assert_eq(driver.stats.rearms, 2);
}

Test(driver, stopped_only_when_the_wheel_is_empty) {
  start_at(&a, 1500);
  start_at(&b, 1600);
  stop(&a); /* b is left: lazy, the wakeup at 1500 fires nothing */
  cr_assert_eq(arms_len, 1);
  stop(&b);
  cr_assert_eq(arms_len, 2);
  cr_assert_eq(arms[1].at, TW_NEVER);
  cr_assert_eq(driver.armed, TW_NEVER);
  stop(&b); /* nothing armed, nothing to stop */
  cr_assert_eq(arms_len, 2);
}

Test(driver, a_wakeup_fires_what_is_due_and_rearms_from_expiry) {
  start_at(&a, 1500);
  start_at(&b, 1700);
  cr_assert_eq(tw_driver_expired(&driver, 1500), 1);
  cr_assert_eq(fired, 1);
  cr_assert_eq(driver.armed, 1700);
  cr_assert_eq(arms[arms_len - 1].at, 1700);
  cr_assert(arms[arms_len - 1].from_expiry);
  cr_assert_eq(tw_driver_expired(&driver, 1700), 1);
  cr_assert_eq(driver.armed, TW_NEVER, "no timer left: nothing armed");
  cr_assert_eq(driver.stats.wakeups, 2);
  cr_assert_eq(driver.stats.fired, 2);
  cr_assert_eq(driver.stats.empty_wakeups, 0);
}

Test(driver, a_wakeup_for_a_stopped_timer_is_empty_and_rearms_exactly) {
  start_at(&a, 1500);
  start_at(&b, 1900);
  stop(&a);
  cr_assert_eq(tw_driver_expired(&driver, 1500), 0);
  cr_assert_eq(driver.stats.empty_wakeups, 1);
  cr_assert_eq(driver.stats.maintenance, 0);
  cr_assert_eq(driver.armed, 1900);
}

static tw_timer in_cb_timer;
static void start_from_callback(tw_timer *t) {
  (void)t;
  fired++;
  /* An earlier deadline started inside the wakeup: no arm now, the driver
   * re-arms once the slice returns. */
  start_at(&in_cb_timer, 1550);
  cr_assert(driver.dispatching);
}

/* Timer a runs `cb` at 1500 while b waits for 5000; the loop timer fires
 * at 1500 and runs a. Returns how many arms there were before it fired. */
static size_t wake_running(tw_timer_cb cb) {
  size_t before;
  tw_timer_init(&in_cb_timer);
  cr_assert_eq(tw_timer_start_at(wheel, &a, cb, 1500, 0), 0);
  tw_driver_started(&driver, 1500);
  start_at(&b, 5000);
  before = arms_len;
  cr_assert_eq(tw_driver_expired(&driver, 1500), 1);
  return before;
}

Test(driver, starts_inside_callbacks_are_armed_when_the_slice_returns) {
  size_t before = wake_running(start_from_callback);
  cr_assert_eq(arms_len, before + 1, "exactly one arm, after the slice");
  cr_assert_eq(driver.armed, 1550);
}

/* A burst larger than a slice: each wakeup does at most TW_SLICE units and
 * leaves the loop timer armed for "now" until everything has run. */
Test(driver, a_burst_is_run_a_slice_per_wakeup) {
  enum { N = 3 * TW_SLICE };
  tw_timer *t = calloc(N, sizeof *t);
  size_t wakeups = 0;
  cr_assert_not_null(t);
  for (size_t i = 0; i < N; i++) {
    tw_timer_init(&t[i]);
    start_at(&t[i], 1001 + i % 500);
  }
  while (driver.armed <= 2000) {
    uint64_t moves = tw_moves(wheel);
    size_t ran = tw_driver_expired(&driver, 2000);
    cr_assert_leq(ran + (tw_moves(wheel) - moves), TW_SLICE);
    cr_assert_lt(++wakeups, N);
  }
  cr_assert_eq(fired, N);
  cr_assert_geq(wakeups, 3);
  cr_assert_eq(driver.armed, TW_NEVER);
  free(t);
}

/* Paced work a sleeping loop must wake for: counted apart from wakeups that
 * fired nothing because a timer moved. */
Test(driver, maintenance_wakeups_are_counted_apart) {
  enum { N = 20000 };
  tw_timer *t = calloc(N, sizeof *t);
  cr_assert_not_null(t);
  for (size_t i = 0; i < N; i++) {
    tw_timer_init(&t[i]);
    start_at(&t[i], 100000 + i % 256); /* one 256-tick slot, far off */
  }
  while (driver.armed != TW_NEVER) {
    cr_assert_leq(driver.armed, tw_next_expiry(wheel));
    tw_driver_expired(&driver, driver.armed);
  }
  cr_assert_eq(fired, N);
  cr_assert_gt(driver.stats.maintenance, 0);
  cr_assert_eq(driver.stats.empty_wakeups, 0);
  free(t);
}

static void close_from_callback(tw_timer *t) {
  (void)t;
  fired++;
  tw_driver_close(&driver);
  tw_wheel_free(wheel); /* freed when the advance returns */
  wheel = NULL;
}

Test(driver, closed_from_a_callback_it_arms_nothing_more) {
  cr_assert_eq(tw_timer_start_at(wheel, &a, close_from_callback, 1500, 0), 0);
  tw_driver_started(&driver, 1500);
  start_at(&b, 1600);
  size_t before = arms_len;
  cr_assert_eq(tw_driver_expired(&driver, 1500), 1);
  cr_assert(driver.closed);
  cr_assert_eq(arms_len, before);
  cr_assert_eq(driver.stats.wakeups, 1);
  tw_driver_started(&driver, 1); /* after close: nothing */
  cr_assert_eq(arms_len, before);
}

/* A callback that calls tw_driver_expired on its own driver (a loop that
 * dispatches its timer from inside a callback): the nested call does
 * nothing, like a nested tw_advance, so the wakeup stays one wakeup and a
 * start later in the same callback still waits for the slice's re-arm. */
static size_t nested_ran;
static void expire_from_callback(tw_timer *t) {
  (void)t;
  nested_ran = tw_driver_expired(&driver, tw_now(wheel));
  cr_assert(driver.dispatching, "still inside the outer wakeup");
  start_at(&in_cb_timer, tw_now(wheel) + 1);
}

Test(driver, a_nested_wakeup_from_a_callback_does_nothing) {
  size_t before;
  nested_ran = 99;
  before = wake_running(expire_from_callback);
  cr_assert_eq(nested_ran, 0);
  cr_assert_eq(driver.stats.wakeups, 1);
  cr_assert_eq(arms_len, before + 1, "exactly one arm, after the slice");
  cr_assert(arms[arms_len - 1].from_expiry);
  cr_assert_eq(driver.armed, 1501);
}

/* A loop timer that fires once the driver is closed (a loop that closed
 * it with the timer still due) advances nothing: the loop may have freed
 * the wheel, so the driver does not touch it, and counts no wakeup. */
Test(driver, closed_it_ignores_a_late_firing) {
  start_at(&a, 1500);
  tw_driver_close(&driver);
  cr_assert_eq(driver.armed, TW_NEVER, "nothing is armed any more");
  cr_assert_eq(tw_driver_expired(&driver, 2000), 0);
  cr_assert_eq(driver.armed, TW_NEVER);
  cr_assert(tw_timer_is_active(&a), "the wheel did not advance");
  cr_assert_eq(tw_now(wheel), 1000);
  cr_assert_eq(driver.stats.wakeups, 0);
}

Test(driver, rearm_forces_the_earlier_of_now_armed_and_given) {
  start_at(&a, 1500);
  cr_assert_eq(tw_driver_rearm(&driver, 1800), 0); /* armed earlier: kept */
  cr_assert_eq(arms_len, 2);
  cr_assert_eq(arms[1].at, 1500);
  cr_assert_eq(tw_driver_rearm(&driver, 1001), 0);
  cr_assert_eq(driver.armed, 1001);
}

Test(driver, a_refused_arm_is_returned_and_nothing_is_armed) {
  cr_assert_eq(tw_timer_start_at(wheel, &a, count_cb, 1500, 0), 0);
  refuse = 1;
  cr_assert_eq(tw_driver_started(&driver, 1500), -1);
  cr_assert_eq(driver.armed, TW_NEVER);
  cr_assert_eq(tw_driver_started(&driver, 1500), 0); /* retried: armed */
  cr_assert_eq(driver.armed, 1500);
}

/* A refused arm leaves nothing armed while a timer waits (the event
 * adapter then drops the timer it was adding). The next start arms for
 * the wheel's earliest time, not only for its own later deadline. */
Test(driver, after_a_refused_arm_the_next_start_arms_for_the_earliest_timer) {
  start_at(&a, 1500);
  cr_assert_eq(tw_timer_start_at(wheel, &b, count_cb, 1200, 0), 0);
  refuse = 1;
  cr_assert_eq(tw_driver_started(&driver, 1200), -1);
  cr_assert_eq(driver.armed, TW_NEVER);
  stop(&b); /* what tw_ev_timer_add does when its arm fails */
  tw_timer_init(&in_cb_timer);
  cr_assert_eq(tw_timer_start_at(wheel, &in_cb_timer, count_cb, 2000, 0), 0);
  cr_assert_eq(tw_driver_started(&driver, 2000), 0);
  cr_assert_eq(driver.armed, 1500, "armed for %llu",
               (unsigned long long)driver.armed);
  cr_assert_eq(arms[arms_len - 1].at, 1500);
}

/* The same through tw_driver_rearm. */
Test(driver, after_a_refused_arm_a_rearm_arms_for_the_earliest_timer) {
  start_at(&a, 1500);
  refuse = 1;
  cr_assert_eq(tw_driver_rearm(&driver, 1200), -1);
  cr_assert_eq(driver.armed, TW_NEVER);
  cr_assert_eq(tw_timer_start_at(wheel, &b, count_cb, 2000, 0), 0);
  cr_assert_eq(tw_driver_rearm(&driver, 2000), 0);
  cr_assert_eq(driver.armed, 1500, "armed for %llu",
               (unsigned long long)driver.armed);
}

/* --- the fence: a wakeup already queued keeps later starts out --------- */

static int ran_order[8], ran_len;
static tw_timer c, e;
static void record_cb(tw_timer *t) {
  cr_assert_lt(ran_len, 8);
  ran_order[ran_len++] = t == &a ? 'a' : t == &b ? 'b' : t == &c ? 'c' : 'e';
}

static void start_recorded(tw_timer *t, uint64_t deadline) {
  cr_assert_eq(tw_timer_start_at(wheel, t, record_cb, deadline, 0), 0);
  tw_driver_started(&driver, deadline);
}

/* The loop timer, armed for 1500, is queued at 1600 (libevent: activated,
 * its callback to run after the I/O callbacks); one of those starts, after
 * a fence, e, between a and b in firing order, and c, due at once. a, the
 * last start before the fence, is the first to fire. */
static void queued_wakeup_then_fenced_starts(void) {
  tw_timer_init(&c);
  tw_timer_init(&e);
  ran_len = 0;
  start_recorded(&b, 1550);
  start_recorded(&a, 1500);
  tw_driver_fence(&driver);
  start_recorded(&e, 1520);
  tw_driver_fence(&driver); /* a second one moves nothing */
  start_recorded(&c, 1600);
}

Test(driver, a_fenced_wakeup_runs_what_was_started_before_and_rearms_at_once) {
  queued_wakeup_then_fenced_starts();
  cr_assert_eq(tw_driver_expired(&driver, 1600), 1);
  cr_assert_eq(ran_len, 1);
  cr_assert_eq(ran_order[0], 'a', "a, before e in firing order, ran");
  cr_assert_eq(driver.armed, 1520, "the rest is due: armed for e, past");
  cr_assert(arms[arms_len - 1].from_expiry);
  cr_assert_eq(tw_driver_expired(&driver, 1600), 3);
  cr_assert_eq(ran_len, 4);
  cr_assert_eq(ran_order[1], 'e');
  cr_assert_eq(ran_order[2], 'b', "b followed e in firing order: it waited");
  cr_assert_eq(ran_order[3], 'c');
  cr_assert_eq(driver.armed, TW_NEVER);
}

Test(driver, a_fence_lasts_one_advance) {
  queued_wakeup_then_fenced_starts();
  cr_assert_eq(tw_driver_expired(&driver, 1600), 1);
  tw_timer_init(&in_cb_timer);
  cr_assert_eq(tw_timer_start_at(wheel, &in_cb_timer, count_cb, 1600, 0), 0);
  tw_driver_started(&driver, 1600);
  fired = 0;
  cr_assert_eq(tw_driver_expired(&driver, 1600), 4, "nothing fenced now");
  cr_assert_eq(fired, 1);
}

/* The wheel empties: the loop timer stops, and the wakeup the fence was
 * for with it; a timer started after runs at the next wakeup. */
Test(driver, a_fence_ends_when_the_wheel_empties) {
  tw_timer_init(&c);
  ran_len = 0;
  start_recorded(&a, 1500);
  tw_driver_fence(&driver);
  stop(&a);
  cr_assert_eq(driver.armed, TW_NEVER);
  start_recorded(&c, 1600);
  cr_assert_eq(tw_driver_expired(&driver, 1600), 1);
  cr_assert_eq(ran_order[0], 'c');
}

/* Closed, the driver may hold a freed wheel: the fence touches nothing.
 * This case fails only under AddressSanitizer (CI's sanitizer build): a
 * write to the freed wheel crashes nothing otherwise. */
Test(driver, a_fence_on_a_closed_or_null_driver_does_nothing) {
  tw_driver_fence(NULL);
  tw_driver_close(&driver);
  tw_wheel_free(wheel);
  wheel = NULL;
  tw_driver_fence(&driver);
}

/* Re-arming would cancel the queued wakeup the fence is for: a start
 * earlier than `armed` arms nothing, and the wakeup arms for it. */
Test(driver, a_start_after_a_fence_arms_nothing) {
  tw_timer_init(&c);
  ran_len = 0;
  start_recorded(&a, 1500);
  size_t before = arms_len;
  tw_driver_fence(&driver);
  start_recorded(&c, 1400);
  cr_assert_eq(arms_len, before, "the queued wakeup was re-armed");
  cr_assert_eq(driver.armed, 1500);
  cr_assert_eq(tw_driver_expired(&driver, 1600), 0, "c is first: fenced");
  cr_assert_eq(driver.armed, 1400);
  cr_assert_eq(tw_driver_expired(&driver, 1600), 2);
  cr_assert_eq(ran_order[0], 'c');
  cr_assert_eq(ran_order[1], 'a');
  cr_assert_eq(driver.stats.maintenance, 1, "a fenced wakeup that ran nothing");
}

/* Start sequences wrap at 2^47 (tw__order keeps 47 bits of them): the
 * fence compares them as the firing order does, modulo 2^47. */
Test(driver, a_fence_holds_across_the_sequence_wrap) {
  for (uint64_t below = 0; below < 2; below++) {
    tw_timer_init(&a);
    tw_timer_init(&c);
    tw_timer_init(&e);
    ran_len = 0;
    tw__head(wheel)->next_seq = ((uint64_t)1 << 47) - 1 - below;
    start_recorded(&a, 1500); /* sequence 2^47 - 1 - below */
    tw_driver_fence(&driver);
    start_recorded(&c, 1500); /* the fence's: 0 once wrapped if below 0 */
    start_recorded(&e, 1500); /* 0 once wrapped if below 1 */
    cr_assert_eq(tw_driver_expired(&driver, 1600), 1, "below %llu",
                 (unsigned long long)below);
    cr_assert_eq(ran_order[0], 'a');
    cr_assert_eq(tw_driver_expired(&driver, 1600), 2);
    cr_assert_eq(ran_order[1], 'c');
    cr_assert_eq(ran_order[2], 'e');
  }
}

/* A fence holds back only the timers started since it: a, started 2^46
 * starts before it (sequences are numbered modulo 2^47), runs at the
 * fenced wakeup, c at the next. (Compared as signed distances, a looked
 * started after the fence, and a fence at every wakeup held it, and
 * every timer after it, for ever.) */
Test(driver, a_fence_lets_a_timer_started_2_46_starts_before_it_run) {
  tw_timer_init(&c);
  ran_len = 0;
  start_recorded(&a, 1500);
  tw__head(wheel)->next_seq += (uint64_t)1 << 46;
  tw_driver_fence(&driver);
  start_recorded(&c, 1550); /* a later deadline: ties that far apart may
                               come out of start order (wheel.h) */
  cr_assert_eq(tw_driver_expired(&driver, 1600), 1);
  cr_assert_eq(ran_order[0], 'a');
  cr_assert_eq(tw_driver_expired(&driver, 1600), 1);
  cr_assert_eq(ran_order[1], 'c');
}

/* A re-arm cancels the queued wakeup (libevent: re-adding the event), and
 * the fence with it: the next wakeup runs every timer due. */
Test(driver, a_rearm_ends_a_fence) {
  tw_timer_init(&c);
  ran_len = 0;
  start_recorded(&a, 1500);
  tw_driver_fence(&driver);
  start_recorded(&c, 1400);
  cr_assert_eq(tw_driver_rearm(&driver, 1400), 0);
  cr_assert_eq(driver.armed, 1400);
  cr_assert_eq(tw_driver_expired(&driver, 1600), 2);
}
