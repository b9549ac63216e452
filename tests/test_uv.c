/*
 * The libuv adapter against real loops and the real clock. The first half
 * ports the intent of libuv's own timer tests (test-timer.c with libuv
 * 1.45's no_double_call cases, test-timer-again.c, test-timer-from-check.c,
 * test-ref.c, test-loop-time.c); the second covers what the adapter adds:
 * one UV_TIMER handle, lazy re-arming, liveness, 0 ms timers that cannot
 * starve I/O, close.
 *
 * Every callback checks "never early" with uv_hrtime(), as libuv's
 * timer_early_check does: uv_now() is the loop's cached clock (never ahead
 * of uv_hrtime), and a deadline is uv_now() at the start plus the timeout.
 * Order and never-early are asserted exactly; lateness only with generous
 * bounds.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "twheel-uv.h"

/* ---- fixture: a fresh loop, one adapter, an iteration counter ---- */

static uv_loop_t loop;
static tw_uv *d;
static uv_check_t iter_check;
static unsigned long iterations; /* loop iterations completed (check phase) */

static void on_check(uv_check_t *c) {
  (void)c;
  iterations++;
}

static void setup(void) {
  cr_assert_eq(uv_loop_init(&loop), 0);
  cr_assert_eq(tw_uv_init(&loop, &d), 0);
  cr_assert_eq(uv_check_init(&loop, &iter_check), 0);
  cr_assert_eq(uv_check_start(&iter_check, on_check), 0);
  uv_unref((uv_handle_t *)&iter_check); /* counts, keeps nothing alive */
  iterations = 0;
}

static void close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

static void teardown(void) {
  if (d)
    tw_uv_close(d, NULL); /* before the walk, which skips closing handles */
  uv_walk(&loop, close_any, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
}

TestSuite(uv, .init = setup, .fini = teardown, .timeout = 10);

/* ---- the library's start and stop, counted ----
 * test-uv is linked with --wrap for tw__uv_timer_start, tw__uv_timer_stop
 * and tw__uv_recount (tests/meson.build): every call this file makes to
 * them, the inline paths' included, comes here first, so that a test can
 * assert which an inline path made (the library's own calls of
 * tw__uv_recount are not counted). */
int __real_tw__uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                              uint64_t timeout, uint64_t repeat);
int __real_tw__uv_timer_stop(tw_uv_timer_t *handle);
int __wrap_tw__uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                              uint64_t timeout, uint64_t repeat);
int __wrap_tw__uv_timer_stop(tw_uv_timer_t *handle);
void __real_tw__uv_recount(struct tw_uv__head *d);
void __wrap_tw__uv_recount(struct tw_uv__head *d);

static unsigned long library_calls, inline_recounts;

void __wrap_tw__uv_recount(struct tw_uv__head *d) {
  inline_recounts++;
  __real_tw__uv_recount(d);
}

int __wrap_tw__uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                              uint64_t timeout, uint64_t repeat) {
  library_calls++;
  return __real_tw__uv_timer_start(handle, cb, timeout, repeat);
}

int __wrap_tw__uv_timer_stop(tw_uv_timer_t *handle) {
  library_calls++;
  return __real_tw__uv_timer_stop(handle);
}

/* ---- probes: timers that log every call and check never-early ---- */

enum { MAX_LOG = 20000 };

struct entry {
  int id;
  unsigned long iteration;
  uint64_t now;
  int active;      /* tw_uv_timer_is_active inside the callback */
  uint64_t due_in; /* tw_uv_timer_get_due_in inside the callback */
};

static struct entry log_[MAX_LOG];
static size_t log_len;

struct probe {
  tw_uv_timer_t t;
  int id;
  int calls;
  uint64_t deadline; /* the loop-clock deadline the callback must not beat */
  void (*then)(struct probe *p);
};

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

static void probe_cb(tw_uv_timer_t *h) {
  struct probe *p = h->data;
  uint64_t now = uv_now(&loop);
  uint64_t hr_ms = uv_hrtime() / 1000000;

  cr_assert_geq(now, p->deadline,
                "timer %d: loop time %llu before deadline %llu", p->id,
                (unsigned long long)now, (unsigned long long)p->deadline);
  cr_assert_geq(hr_ms, p->deadline,
                "timer %d: uv_hrtime %llu ms before deadline %llu", p->id,
                (unsigned long long)hr_ms, (unsigned long long)p->deadline);
  cr_assert_lt(log_len, MAX_LOG);
  log_[log_len++] =
      (struct entry){p->id, iterations, now, tw_uv_timer_is_active(h),
                     tw_uv_timer_get_due_in(h)};
  p->calls++;
  if (tw_uv_timer_get_repeat(h))
    p->deadline = sat_add(now, tw_uv_timer_get_repeat(h));
  if (p->then)
    p->then(p);
}

static void probes_init(struct probe *p, int n) {
  for (int i = 0; i < n; i++) {
    memset(&p[i], 0, sizeof p[i]);
    cr_assert_eq(tw_uv_timer_init(d, &p[i].t), 0);
    p[i].t.data = &p[i];
    p[i].id = i;
  }
  log_len = 0;
}

static void start(struct probe *p, uint64_t timeout, uint64_t repeat) {
  cr_assert_eq(tw_uv_timer_start(&p->t, probe_cb, timeout, repeat), 0);
  p->deadline = sat_add(uv_now(&loop), timeout);
}

#define EXPECT_FIRED(...)                                                      \
  do {                                                                         \
    const int want_[] = {__VA_ARGS__};                                         \
    size_t n_ = sizeof want_ / sizeof want_[0];                                \
    cr_assert_eq(log_len, n_, "fired %zu callbacks, expected %zu", log_len,    \
                 n_);                                                          \
    for (size_t i_ = 0; i_ < n_; i_++)                                         \
      cr_assert_eq(log_[i_].id, want_[i_],                                     \
                   "call %zu was timer %d, expected %d", i_, log_[i_].id,      \
                   want_[i_]);                                                 \
  } while (0)

static tw_stats stats_now(void) {
  tw_stats s;
  cr_assert_eq(tw_uv_stats(d, &s), 0);
  return s;
}

/* The adapter's shared handles, found the way a user would: uv_walk. */
struct census {
  int timers, prepares;
  uv_timer_t *shared;
};

static void count_handle(uv_handle_t *h, void *arg) {
  struct census *c = arg;
  if (h->type == UV_TIMER) {
    c->timers++;
    if (h->data == d)
      c->shared = (uv_timer_t *)h;
  } else if (h->type == UV_PREPARE) {
    c->prepares++;
  }
}

static struct census census(void) {
  struct census c = {0, 0, NULL};
  uv_walk(&loop, count_handle, &c);
  return c;
}

/* The size twheel-uv.h and README.md state for LP64. */
Test(uv, a_timer_is_80_bytes) {
  if (sizeof(void *) == 8)
    cr_assert_eq(sizeof(tw_uv_timer_t), 80);
}

/* ==== libuv's timer tests, ported in intent ==== */

/* timer_init */
Test(uv, init_state_is_inactive_never_started_repeat_zero_referenced) {
  tw_uv_timer_t t;
  t.data = &t;
  cr_assert_eq(tw_uv_timer_init(d, &t), 0);
  cr_assert_eq(t.data, &t, "init must leave data alone, as uv_timer_init does");
  cr_assert_eq(tw_uv_timer_is_active(&t), 0);
  cr_assert_eq(tw_uv_timer_get_repeat(&t), 0);
  cr_assert_eq(tw_uv_timer_get_due_in(&t), 0);
  cr_assert_eq(tw_uv_timer_has_ref(&t), 1);
  cr_assert_eq(tw_uv_timer_again(&t), UV_EINVAL); /* never started */
  cr_assert_eq(tw_uv_timer_stop(&t), 0);
  cr_assert_eq(uv_loop_alive(&loop), 0);
}

/* timer: ten one-shots spread over 90 ms, a repeating timer that closes
 * after five calls, and a stopped one that never runs. */
static struct probe basic[12];

static void stop_after_five(struct probe *p) {
  cr_assert(tw_uv_timer_is_active(&p->t));
  if (p->calls == 5)
    cr_assert_eq(tw_uv_timer_stop(&p->t), 0);
}

static void one_shot_is_inactive(struct probe *p) {
  cr_assert_not(tw_uv_timer_is_active(&p->t));
}

Test(uv, one_shots_and_a_repeat_fire_like_libuv_timer_test) {
  probes_init(basic, 12);
  uint64_t t0 = uv_now(&loop);
  for (int i = 0; i < 10; i++) {
    basic[i].then = one_shot_is_inactive;
    start(&basic[i], (uint64_t)i * 10, 0);
  }
  basic[10].then = stop_after_five;
  start(&basic[10], 20, 20);
  start(&basic[11], 20, 20);
  cr_assert_eq(tw_uv_timer_stop(&basic[11].t), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < 10; i++)
    cr_assert_eq(basic[i].calls, 1, "one-shot %d ran %d times", i,
                 basic[i].calls);
  cr_assert_eq(basic[10].calls, 5);
  cr_assert_eq(basic[11].calls, 0);
  cr_assert_geq(uv_now(&loop) - t0, 100);
}

/* test-loop-time's uv_update_time() from a callback: it moves uv_now() on
 * within the timer pass, and libuv re-arms a repeating timer whose turn
 * comes after it from that time. So does the adapter: inside each call the
 * timer reports its whole period due (probe_cb checks never-early against
 * uv_now() at the previous call + repeat). */
static void spin_then_update_time(struct probe *p) {
  uint64_t until = uv_hrtime() + 5 * 1000000;
  (void)p;
  while (uv_hrtime() < until)
    ;
  uv_update_time(&loop);
}

Test(uv, a_repeat_after_a_callback_that_updates_the_time_rearms_from_it) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = spin_then_update_time;
  p[1].then = stop_after_five;
  start(&p[0], 10, 10); /* same deadlines, started first: runs first */
  start(&p[1], 10, 10);
  while (p[1].calls < 5)
    cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
  for (size_t i = 0; i < log_len; i++)
    if (log_[i].id == 1)
      cr_assert_eq(log_[i].due_in, 10, "call %zu: due in %llu", i,
                   (unsigned long long)log_[i].due_in);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
}

/* timer_start_twice */
static int never_calls;
static void never_cb(tw_uv_timer_t *h) {
  (void)h;
  never_calls++;
}

Test(uv, start_twice_keeps_only_the_second_start) {
  static struct probe p;
  probes_init(&p, 1);
  cr_assert_eq(tw_uv_timer_start(&p.t, never_cb, 10, 0), 0);
  start(&p, 10, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(never_calls, 0);
  cr_assert_eq(p.calls, 1);
}

/* The inline reset (a timer waiting in the wheel, not its slot's earliest)
 * and the library's start, called by its exported name, do the same. Both
 * paths end in the same store, so this checks the results, not which path
 * ran (callgrind's counts in bench/results show the inline one is taken). */
Test(uv, inline_reset_and_library_start_replace_callback_and_repeat) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 10, 0); /* the earliest of their slot: never reset inline */
  cr_assert_eq(tw_uv_timer_start(&p[1].t, never_cb, 10, 0), 0);
  cr_assert_eq(tw_uv_timer_start(&p[2].t, never_cb, 10, 0), 0);
  start(&p[1], 20, 30);                                          /* inline */
  cr_assert_eq(tw__uv_timer_start(&p[2].t, probe_cb, 20, 0), 0); /* library */
  p[2].deadline = uv_now(&loop) + 20;
  cr_assert_eq(tw_uv_timer_get_repeat(&p[1].t), 30);
  cr_assert_eq(tw_uv_timer_get_due_in(&p[1].t), 20);
  tw_uv_timer_set_repeat(&p[1].t, 0); /* so that uv_run returns */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(never_calls, 0);
  EXPECT_FIRED(0, 1, 2);
  cr_assert_eq(uv_loop_alive(&loop), 0); /* liveness is whole */
}

/* The inline reset reads the loop's time from the field uv_now() returns:
 * the same value, as the clock moves. */
Test(uv, the_inline_reset_reads_the_time_uv_now_returns) {
  for (int i = 0; i < 3; i++) {
    uv_sleep(2);
    uv_update_time(&loop);
    cr_assert_eq(tw__uv_now(&loop), uv_now(&loop));
  }
}

/* The inline start (into a slot in use, a timer's first start included)
 * and the inline stop keep liveness as the library does: the
 * loop is alive exactly while a referenced timer is active. 5 s: nothing
 * fires. */
/* Whether the adapter's one uv_timer_t (its data is the adapter) is
 * armed. */
static void find_adapter_timer(uv_handle_t *handle, void *active) {
  if (handle->type == UV_TIMER && handle->data == (void *)d)
    *(int *)active = uv_is_active(handle);
}

static int adapter_timer_active(void) {
  int active = -1;
  uv_walk(&loop, find_adapter_timer, &active);
  cr_assert_neq(active, -1, "no loop timer of the adapter");
  return active;
}

Test(uv, inline_start_and_stop_keep_the_loop_alive_exactly) {
  static struct probe p[2];
  probes_init(p, 2);
  library_calls = inline_recounts = 0;
  start(&p[0], 5000, 0); /* the library's: the slot was not in use */
  cr_assert_eq(library_calls, 1);
  start(&p[1], 5000, 0); /* a first start, inline */
  cr_assert_eq(library_calls, 1,
               "a first start into a slot in use called "
               "the library");
  tw_uv_timer_unref(&p[1].t);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0); /* the last referenced one */
  cr_assert_eq(uv_loop_alive(&loop), 0);
  start(&p[0], 5000, 0); /* inline: the slot is in use (occupied) */
  cr_assert_eq(uv_loop_alive(&loop), 1);
  cr_assert_eq(tw_uv_timer_stop(&p[1].t), 0); /* unreferenced */
  cr_assert_eq(uv_loop_alive(&loop), 1);
  start(&p[1], 5000, 0); /* inline, unreferenced */
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  cr_assert(tw_uv_timer_is_active(&p[1].t));
  cr_assert_eq(tw_count(tw_uv_wheel(d)), 1);
  cr_assert(adapter_timer_active());
  cr_assert_eq(tw_uv_timer_stop(&p[1].t), 0); /* the last, unreferenced */
  cr_assert_eq(adapter_timer_active(), 0,
               "no timer left, the loop timer armed");
  cr_assert_eq(library_calls, 1, "an inline start or stop called the library");
  /* Three crossings: the two stops of the last referenced timer and the
   * start between them; the unreferenced timer's starts and stops, with no
   * referenced one active, made none. */
  cr_assert_eq(inline_recounts, 3, "%lu recounts", inline_recounts);
}

/* The library's start and stop (what the exported tw_uv_timer_start and
 * tw_uv_timer_stop do, for programs built against older headers) keep the
 * same count, for a timer waiting in a slot too. */
Test(uv, library_start_and_stop_keep_the_loop_alive_exactly) {
  static struct probe p[1];
  probes_init(p, 1);
  library_calls = 0;
  for (int round = 0; round < 2; round++) { /* never started, then stopped */
    cr_assert_eq(tw__uv_timer_start(&p[0].t, probe_cb, 5000, 0), 0);
    cr_assert_eq(uv_loop_alive(&loop), 1);
    cr_assert_eq(tw__uv_timer_stop(&p[0].t), 0);
    cr_assert_eq(uv_loop_alive(&loop), 0);
  }
  cr_assert_eq(tw_count(tw_uv_wheel(d)), 0);
  cr_assert_eq(library_calls, 4); /* the wrappers count (meson.build) */
}

/* The idle reset is the core's store inline for a deadline moved later,
 * and for one moved earlier (less jitter) after the minimum of its slot (a
 * level-1 slot: 256 ms); down to that minimum the library re-arms it.
 * Nothing runs the loop: nothing fires. */
Test(uv, inline_reset_moves_a_deadline_earlier_down_to_its_slot_minimum) {
  static struct probe p[2];
  uint64_t now = uv_now(&loop);
  uint64_t slot = ((now + 5000) / 256 + 1) * 256; /* the slot's start */
  probes_init(p, 2);
  start(&p[0], slot - now, 0); /* holds the slot's minimum */
  start(&p[1], slot + 100 - now, 0);
  library_calls = 0;
  start(&p[1], slot + 3000 - now, 0); /* later */
  cr_assert_eq(tw_uv_timer_get_due_in(&p[1].t), slot + 3000 - now);
  start(&p[1], slot + 50 - now, 0); /* earlier, after the minimum */
  cr_assert_eq(tw_uv_timer_get_due_in(&p[1].t), slot + 50 - now);
  start(&p[1], slot + 1 - now, 0); /* one tick after it */
  cr_assert_eq(tw_uv_timer_get_due_in(&p[1].t), slot + 1 - now);
  cr_assert_eq(library_calls, 0, "an inline reset called the library");
  cr_assert_eq(tw_next_expiry(tw_uv_wheel(d)), slot);
  start(&p[1], slot - now, 0); /* down to it */
  cr_assert_eq(library_calls, 1);
  start(&p[1], slot - 1 - now, 0); /* below it */
  cr_assert_eq(library_calls, 2);
  cr_assert_eq(tw_next_expiry(tw_uv_wheel(d)), slot - 1);
}

/* Restarted inline after an inline stop, a timer fires once, never early,
 * after the one that kept its slot (equal deadlines: by latest start). */
Test(uv, timer_stopped_and_restarted_inline_fires_once_in_order) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 20, 0);
  start(&p[1], 20, 0);
  library_calls = 0;
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
  start(&p[0], 20, 0);
  cr_assert_eq(library_calls, 0, "the stop or the restart called the library");
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(1, 0);
}

/* timer_order: equal deadlines by latest start; late timers by deadline. */
Test(uv, equal_deadlines_fire_in_order_of_latest_start) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 10, 0); /* uv_now does not move between these starts */
  start(&p[1], 10, 0);
  start(&p[2], 10, 0);
  start(&p[0], 10, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(1, 2, 0);
}

Test(uv, late_timers_fire_by_deadline_in_one_pass) {
  static struct probe p[4];
  probes_init(p, 4);
  start(&p[0], 30, 0);
  start(&p[1], 10, 0);
  start(&p[2], 20, 0);
  start(&p[3], 10, 0);
  uv_sleep(50); /* block the loop past every deadline */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(1, 3, 2, 0);
  cr_assert_eq(log_[0].iteration, log_[3].iteration, "not one pass");
}

/* timer_zero_timeout: a timer restarting itself with 0 ms from its callback
 * runs once per loop iteration, on libuv 1.44 too. */
static void restart_zero(struct probe *p) {
  start(p, 0, 0);
}

static void restart_zero_and_stop_loop(struct probe *p) {
  start(p, 0, 0);
  uv_stop(&loop);
}

Test(uv, zero_timeout_restarted_in_its_callback_runs_once_per_uv_run_nowait) {
  static struct probe p;
  probes_init(&p, 1);
  p.then = restart_zero;
  start(&p, 0, 0);
  for (int i = 1; i <= 100; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(p.calls, i, "%d calls after %d NOWAIT runs", p.calls, i);
  }
  for (size_t i = 1; i < log_len; i++)
    cr_assert_gt(log_[i].iteration, log_[i - 1].iteration);
  cr_assert_eq(tw_uv_timer_stop(&p.t), 0);
}

Test(uv, zero_timeout_restarted_with_uv_stop_returns_after_one_call) {
  static struct probe p;
  probes_init(&p, 1);
  p.then = restart_zero_and_stop_loop;
  start(&p, 0, 0);
  cr_assert_neq(uv_run(&loop, UV_RUN_DEFAULT), 0); /* still alive */
  cr_assert_eq(p.calls, 1);
  cr_assert_neq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(p.calls, 2);
  cr_assert_eq(tw_uv_timer_stop(&p.t), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(p.calls, 2);
}

/* timer_huge_timeout */
static struct probe huge[3];

static void stop_the_huge_ones(struct probe *p) {
  (void)p;
  cr_assert_eq(tw_uv_timer_stop(&huge[1].t), 0);
  cr_assert_eq(tw_uv_timer_stop(&huge[2].t), 0);
}

Test(uv, huge_timeouts_saturate_stay_active_and_never_fire) {
  probes_init(huge, 3);
  huge[0].then = stop_the_huge_ones;
  start(&huge[0], 1, 0);
  start(&huge[1], 0xffffffffffffULL, 0);
  start(&huge[2], UINT64_MAX, 0);
  uint64_t now = uv_now(&loop);
  cr_assert_eq(tw_uv_timer_get_due_in(&huge[1].t), 0xffffffffffffULL);
  /* saturated at UINT64_MAX - 1 (libuv: UINT64_MAX) */
  cr_assert_eq(tw_uv_timer_get_due_in(&huge[2].t), UINT64_MAX - 1 - now);
  cr_assert(tw_uv_timer_is_active(&huge[2].t));
  cr_assert_eq(tw_count(tw_uv_wheel(d)), 3);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(0);
}

/* A saturated timer is an ordinary active timer: alone, it keeps the loop
 * alive (as a uv_timer_t does), so an unreferenced watchdog gets to run. */
static tw_uv_timer_t *lone_huge;

static void watchdog_stops_the_huge_one(uv_timer_t *watchdog) {
  tw_uv_timer_stop(lone_huge);
  uv_close((uv_handle_t *)watchdog, NULL);
}

Test(uv, a_saturated_timer_alone_keeps_the_loop_alive) {
  static uv_timer_t watchdog;
  probes_init(huge, 1);
  lone_huge = &huge[0].t;
  start(&huge[0], UINT64_MAX, 0);
  uv_update_time(&loop);
  uint64_t t0 = uv_hrtime();
  uv_timer_init(&loop, &watchdog);
  uv_timer_start(&watchdog, watchdog_stops_the_huge_one, 30, 0);
  uv_unref((uv_handle_t *)&watchdog);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  /* 30 ms less uv_now()'s truncation to the ms; at once would be ~0 */
  cr_assert_geq(uv_hrtime() - t0, 28 * 1000000ull, "uv_run returned at once");
  cr_assert_not(tw_uv_timer_is_active(&huge[0].t));
  cr_assert_eq(log_len, 0);
}

/* timer_huge_repeat */
static struct probe hrep[2];

static void ten_calls_then_stop(struct probe *p) {
  (void)p;
  if (log_len == 10) {
    tw_uv_timer_stop(&hrep[0].t);
    tw_uv_timer_stop(&hrep[1].t);
  }
}

Test(uv, huge_repeat_fires_once_and_is_rearmed_far_away) {
  probes_init(hrep, 2);
  hrep[0].then = hrep[1].then = ten_calls_then_stop;
  start(&hrep[0], 2, 2);
  start(&hrep[1], 1, UINT64_MAX);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(log_len, 10);
  cr_assert_eq(log_[0].id, 1);
  cr_assert(log_[0].active, "a repeating timer is active in its callback");
  for (size_t i = 1; i < 10; i++)
    cr_assert_eq(log_[i].id, 0);
}

/* timer_run_once, plus NOWAIT */
Test(uv, run_once_and_nowait_run_due_timers) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 0, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 0);
  cr_assert_eq(p.calls, 1);
  start(&p, 1, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 0);
  cr_assert_eq(p.calls, 2);
  start(&p, 0, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);
  cr_assert_eq(p.calls, 3);
  start(&p, 200, 0);
  cr_assert_neq(uv_run(&loop, UV_RUN_NOWAIT), 0);
  cr_assert_eq(p.calls, 3, "NOWAIT must not wait for a 200 ms timer");
  cr_assert_eq(tw_uv_timer_stop(&p.t), 0);
}

/* timer_null_callback, and a handle used before init */
Test(uv, null_callback_and_bad_arguments_are_einval_and_change_nothing) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 40, 0);
  uint64_t due = tw_uv_timer_get_due_in(&p.t);
  cr_assert_eq(tw_uv_timer_start(&p.t, NULL, 5, 0), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_get_due_in(&p.t), due);
  cr_assert_eq(tw_uv_timer_start(NULL, probe_cb, 5, 0), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_stop(NULL), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_again(NULL), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_init(NULL, &p.t), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_init(d, NULL), UV_EINVAL);
  tw_uv_timer_set_repeat(NULL, 5);
  tw_uv_timer_ref(NULL);
  tw_uv_timer_unref(NULL);
  cr_assert_eq(tw_uv_timer_get_repeat(NULL), 0);
  cr_assert_eq(tw_uv_timer_get_due_in(NULL), 0);
  cr_assert_eq(tw_uv_timer_is_active(NULL), 0);
  cr_assert_eq(tw_uv_timer_has_ref(NULL), 0);
  cr_assert(tw_uv_timer_is_active(&p.t));

  tw_uv *other = (tw_uv *)&p; /* never written through: out is checked first */
  cr_assert_eq(tw_uv_init(NULL, &other), UV_EINVAL);
  cr_assert_eq(other, (tw_uv *)&p);
  cr_assert_eq(tw_uv_init(&loop, NULL), UV_EINVAL);
  tw_stats s;
  cr_assert_eq(tw_uv_stats(NULL, &s), UV_EINVAL);
  cr_assert_eq(tw_uv_stats(d, NULL), UV_EINVAL);
  cr_assert_null(tw_uv_wheel(NULL));
  cr_assert_null(tw_uv_loop(NULL));
  cr_assert_eq(tw_uv_loop(d), &loop);
  tw_uv_close(NULL, NULL);
  cr_assert_eq(tw_uv_timer_stop(&p.t), 0);
}

Test(uv, handle_used_before_init_is_einval) {
  tw_uv_timer_t zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  cr_assert_eq(tw_uv_timer_start(&zeroed, probe_cb, 5, 0), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_stop(&zeroed), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_again(&zeroed), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_is_active(&zeroed), 0);
  cr_assert_eq(tw_uv_timer_get_due_in(&zeroed), 0);
  cr_assert_eq(tw_uv_timer_has_ref(&zeroed), 0);
  tw_uv_timer_ref(&zeroed);
  cr_assert_eq(tw_uv_timer_has_ref(&zeroed), 0);
  cr_assert_eq(tw_count(tw_uv_wheel(d)), 0);
  cr_assert_eq(uv_loop_alive(&loop), 0);
}

/* timer_is_closing: a closed adapter refuses starts. */
static int closed_calls;
static tw_stats stats_at_close;
static void on_closed(tw_uv *closed) {
  closed_calls++;
  cr_assert_eq(tw_uv_stats(closed, &stats_at_close), 0); /* still valid here */
}

Test(uv, closed_adapter_refuses_starts_with_einval) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 10, 5);
  tw_uv_close(d, on_closed);
  cr_assert_eq(tw_uv_timer_start(&p.t, probe_cb, 10, 0), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_again(&p.t), UV_EINVAL);
  cr_assert_eq(tw_uv_timer_stop(&p.t), 0);
  cr_assert_eq(tw_uv_timer_init(d, &p.t), UV_EINVAL);
  cr_assert_null(tw_uv_wheel(d));
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(closed_calls, 1);
  cr_assert_eq(p.calls, 0);
  d = NULL;
}

/* timer_early_check, widened: many timeouts, restarts, a repeat; probe_cb
 * checks every call against uv_hrtime(). */
static void restart_a_few_times(struct probe *p) {
  if (p->calls < 3)
    start(p, (uint64_t)(p->id % 7) + 1, 0);
}

Test(uv, never_fires_before_its_deadline_by_uv_hrtime) {
  enum { N = 60 };
  static struct probe p[N];
  probes_init(p, N);
  for (int i = 0; i < N; i++) {
    p[i].then = restart_a_few_times;
    start(&p[i], (uint64_t)(i % 25) + 1, 0);
  }
  uint64_t t0 = uv_hrtime();
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(log_len, 3 * N);
  for (int i = 0; i < N; i++)
    cr_assert_eq(p[i].calls, 3);
  cr_assert_lt((uv_hrtime() - t0) / 1000000, 1000, "far too late");
}

/* timer_no_double_call_once / _nowait: a repeating timer whose deadline
 * passed while the loop was blocked. libuv >= 1.45 calls it once per
 * uv_run(UV_RUN_ONCE) or (UV_RUN_NOWAIT); libuv 1.44 runs the timer phase
 * before the poll and again after it in UV_RUN_ONCE, so a uv_timer_t twin
 * is called twice there. The adapter calls its timer once, whatever the
 * libuv; inside its callback it is active with due_in == repeat. */
static int twin_calls;
static void twin_cb(uv_timer_t *h) {
  (void)h;
  twin_calls++;
}

/* Probe p and its twin, both repeating every 10 ms, then the loop blocked
 * for `block_ms` before it runs. */
static void start_twins_and_block(struct probe *p, uv_timer_t *twin,
                                  unsigned block_ms) {
  probes_init(p, 1);
  cr_assert_eq(uv_timer_init(&loop, twin), 0);
  cr_assert_eq(uv_timer_start(twin, twin_cb, 10, 10), 0);
  start(p, 10, 10);
  uv_sleep(block_ms);
}

static void end_twins(struct probe *p, uv_timer_t *twin) {
  uv_close((uv_handle_t *)twin, NULL);
  tw_uv_timer_stop(&p->t);
  uv_run(&loop, UV_RUN_DEFAULT);
}

Test(uv, repeat_due_at_entry_runs_once_per_uv_run_once) {
  static struct probe p;
  uv_timer_t twin;
  start_twins_and_block(&p, &twin, 20);
  cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
  cr_assert_eq(p.calls, 1, "%d calls in one UV_RUN_ONCE", p.calls);
  cr_assert(log_[0].active);
  cr_assert_eq(log_[0].due_in, 10);
  cr_assert_geq(twin_calls, 1);
  if (uv_version() >= 0x012d00) /* 1.45: once, as the adapter */
    cr_assert_eq(twin_calls, 1);
  /* Every later UV_RUN_ONCE calls it once more (probe_cb: never early). */
  uv_timer_stop(&twin);
  for (int run = 2; run <= 6; run++) {
    cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
    cr_assert_eq(p.calls, run, "%d calls after %d UV_RUN_ONCE", p.calls, run);
  }
  end_twins(&p, &twin);
}

Test(uv, repeat_due_at_entry_runs_once_per_uv_run_nowait) {
  static struct probe p;
  uv_timer_t twin;
  start_twins_and_block(&p, &twin, 55); /* five periods */
  uv_run(&loop, UV_RUN_NOWAIT);
  cr_assert_eq(p.calls, 1);
  cr_assert_eq(twin_calls, 1);
  cr_assert_eq(log_[0].due_in, 10);
  end_twins(&p, &twin);
}

/* The usual UV_RUN_ONCE loop: each call waits for the next due timer and
 * calls it, never early; no call is empty and none calls a timer twice, also
 * with a one-shot started between two calls joining in. */
Test(uv, run_once_loop_calls_each_due_timer_once_per_call) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 4, 4);
  for (int run = 1; run <= 12; run++) {
    if (run == 6)
      start(&p[1], 2, 0); /* earlier than p[0]'s next call */
    int before[2] = {p[0].calls, p[1].calls};
    cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
    for (int i = 0; i < 2; i++)
      cr_assert_leq(p[i].calls - before[i], 1,
                    "run %d called timer %d %d times", run, i,
                    p[i].calls - before[i]);
    cr_assert_gt(p[0].calls + p[1].calls, before[0] + before[1],
                 "run %d called nothing", run);
  }
  cr_assert_eq(p[1].calls, 1);
  cr_assert_geq(p[0].calls, 11);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
}

/* test-timer-from-check's setting under UV_RUN_ONCE: a check callback
 * starts a 0 ms timer, which runs in that same call (its timer phase after
 * the poll), and the next call still waits for the repeating timer and runs
 * it: the adapter sees it was started after the poll, whichever check
 * handle runs first. */
static struct probe *from_check;
static int start_from_check;
static void check_starts_zero_timer(uv_check_t *c) {
  (void)c;
  if (start_from_check) {
    start_from_check = 0;
    start(from_check, 0, 0);
  }
}

static void stop_idle(uv_idle_t *idle) {
  uv_idle_stop(idle); /* one poll that does not wait */
}

Test(uv, timer_started_from_a_check_callback_leaves_next_run_once_whole) {
  static struct probe p[2];
  for (int older = 0; older < 2; older++) {
    uv_check_t user_check;
    uv_idle_t idle;
    probes_init(p, 2);
    from_check = &p[1];
    cr_assert_eq(uv_check_init(&loop, &user_check), 0);
    cr_assert_eq(uv_idle_init(&loop, &idle), 0);
    if (older) /* started before the adapter's check handle runs first */
      cr_assert_eq(uv_check_start(&user_check, check_starts_zero_timer), 0);
    start(&p[0], 50, 50); /* long enough not to come due by accident */
    if (!older)
      cr_assert_eq(uv_check_start(&user_check, check_starts_zero_timer), 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
    cr_assert_eq(p[0].calls, 1);
    start_from_check = 1;
    cr_assert_eq(uv_idle_start(&idle, stop_idle), 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
    cr_assert_eq(p[1].calls, 1, "the 0 ms timer did not run in its call");
    cr_assert_eq(p[0].calls, 1);
    for (int run = 2; run <= 4; run++) {
      cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
      cr_assert_eq(p[0].calls, run, "run %d: %d calls", run, p[0].calls);
    }
    cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
    uv_close((uv_handle_t *)&user_check, NULL);
    uv_close((uv_handle_t *)&idle, NULL);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  }
}

/* timer_zero_timeout under UV_RUN_ONCE: a timer restarting itself with 0 ms
 * runs once per call (libuv 1.44 would run such a uv_timer_t in both of
 * the call's timer phases, and 1.44's same-pass rerun many times more). */
Test(uv, zero_timeout_restarted_in_its_callback_runs_once_per_uv_run_once) {
  static struct probe p;
  probes_init(&p, 1);
  p.then = restart_zero;
  start(&p, 0, 0);
  for (int i = 1; i <= 50; i++) {
    cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
    cr_assert_eq(p.calls, i, "%d calls after %d UV_RUN_ONCE", p.calls, i);
  }
  for (size_t i = 1; i < log_len; i++)
    cr_assert_gt(log_[i].iteration, log_[i - 1].iteration);
  cr_assert_eq(tw_uv_timer_stop(&p.t), 0);
}

/* The adapter tells a start made after the check phase (whose timer phase
 * comes after the poll) from one made before a poll by the loop's time: a
 * timer phase updates it. Here a uv_run() returns after a check phase that
 * no wakeup of the adapter's followed (UV_RUN_NOWAIT; a UV_RUN_ONCE whose
 * poll an idle callback kept from waiting, and whose second timer phase ran
 * nothing), a plain uv_timer_t comes due between the two calls and,
 * in the next UV_RUN_ONCE's first timer phase, starts a twheel timer of 0 ms
 * repeating every 2 ms, whose calls take 3 ms: due again after the poll, it
 * still runs once per call. Taken for a start after the check phase, it ran
 * at once, and again after the poll: twice in that UV_RUN_ONCE, as libuv
 * 1.44 runs a uv_timer_t. */
static struct probe *started_by_plain;
static void start_zero_repeating(uv_timer_t *h) {
  (void)h;
  start(started_by_plain, 0, 2);
}

static void spin_3_ms(struct probe *p) {
  uint64_t until = uv_hrtime() + 3 * 1000000;
  while (uv_hrtime() < until)
    ;
  if (p->calls == 6)
    cr_assert_eq(tw_uv_timer_stop(&p->t), 0);
}

Test(uv,
     a_timer_started_before_the_poll_after_a_call_s_check_runs_once_per_call) {
  static struct probe p[2];
  static uv_timer_t plain; /* closed by the teardown's run */
  static uv_idle_t idle;
  cr_assert_eq(uv_timer_init(&loop, &plain), 0);
  cr_assert_eq(uv_idle_init(&loop, &idle), 0);
  for (int first = 0; first < 2; first++) {
    probes_init(p, 2);
    started_by_plain = &p[1];
    p[1].then = spin_3_ms;
    start(&p[0], 60000, 0); /* armed, never due */
    if (first == 0) {
      cr_assert_eq(uv_run(&loop, UV_RUN_NOWAIT), 1);
    } else {
      cr_assert_eq(uv_idle_start(&idle, stop_idle), 0);
      cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
    }
    cr_assert_eq(uv_timer_start(&plain, start_zero_repeating, 5, 0), 0);
    uv_sleep(10); /* due before the next call */
    for (int run = 1; run <= 10 && p[1].calls < 6; run++) {
      int before = p[1].calls;
      cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
      cr_assert_leq(p[1].calls - before, 1,
                    "%s, then run %d called it %d times",
                    first == 0 ? "UV_RUN_NOWAIT" : "UV_RUN_ONCE", run,
                    p[1].calls - before);
    }
    cr_assert_eq(p[1].calls, 6);
    cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
  }
}

/* In UV_RUN_DEFAULT nothing changes: a repeating timer runs once per loop
 * iteration, every period. */
static void stop_at_ten(struct probe *p) {
  if (p->calls == 10)
    cr_assert_eq(tw_uv_timer_stop(&p->t), 0);
}

Test(uv, repeat_in_run_default_runs_once_per_iteration_every_period) {
  static struct probe p;
  probes_init(&p, 1);
  p.then = stop_at_ten;
  start(&p, 3, 3);
  uint64_t t0 = uv_now(&loop);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(p.calls, 10);
  cr_assert_geq(log_[0].now, t0 + 3);
  for (size_t i = 1; i < log_len; i++) {
    cr_assert_gt(log_[i].iteration, log_[i - 1].iteration);
    cr_assert_geq(log_[i].now, log_[i - 1].now + 3);
  }
}

/* timer_no_run_on_unref, timer_ref, timer_ref2 */
Test(uv, unreferenced_zero_timer_never_runs_and_uv_run_returns) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 0, 0);
  tw_uv_timer_unref(&p.t);
  cr_assert_eq(tw_uv_timer_has_ref(&p.t), 0);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(p.calls, 0);
  cr_assert(tw_uv_timer_is_active(&p.t));
}

Test(uv, unref_before_start_and_of_an_active_repeat_keep_nothing_alive) {
  static struct probe p[2];
  probes_init(p, 2);
  tw_uv_timer_unref(&p[0].t); /* timer_ref: unref while inactive */
  start(&p[0], 1000, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  start(&p[1], 1000, 1000); /* timer_ref2: unref while active */
  cr_assert_eq(uv_loop_alive(&loop), 1);
  tw_uv_timer_unref(&p[1].t);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  tw_uv_timer_ref(&p[1].t);
  cr_assert_eq(uv_loop_alive(&loop), 1);
  tw_uv_timer_stop(&p[1].t);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  /* Stopping an active unreferenced timer leaves the others' liveness. */
  start(&p[1], 1000, 0);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
  cr_assert_eq(uv_loop_alive(&loop), 1);
  tw_uv_timer_stop(&p[1].t);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  cr_assert_eq(log_len, 0);
}

Test(uv, unreferenced_timers_fire_while_a_referenced_one_keeps_the_loop) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 60, 0);
  start(&p[1], 5, 5);
  tw_uv_timer_unref(&p[1].t);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0); /* returns when p[0] fired */
  cr_assert_eq(p[0].calls, 1);
  cr_assert_geq(p[1].calls, 1); /* usually ~11; a stalled loop collapses */
  cr_assert(tw_uv_timer_is_active(&p[1].t));
  cr_assert_eq(uv_loop_alive(&loop), 0);
}

/* Unreferenced timers alone, while a plain uv_timer_t keeps the loop alive:
 * the one due at entry runs before the poll, and the one that comes due
 * with the uv_timer_t, during the poll, runs in the same UV_RUN_ONCE, as
 * libuv's would. A wakeup that waits for the next prepare phase (the rule
 * of one call per UV_RUN_ONCE, on libuv 1.44) found the loop ended: the
 * adapter's handles are unreferenced, uv_run() returned 0, and the timer
 * stayed active, due, and never ran. */
static int keeper_calls;
static void keeper_cb(uv_timer_t *h) {
  (void)h;
  keeper_calls++;
}

Test(uv, unreferenced_timers_due_while_a_uv_timer_keeps_the_loop_all_run) {
  static struct probe p[2];
  static uv_timer_t keeper; /* closed by the teardown's run */
  int runs = 0;
  probes_init(p, 2);
  keeper_calls = 0;
  start(&p[0], 1, 0);
  start(&p[1], 20, 0);
  tw_uv_timer_unref(&p[0].t);
  tw_uv_timer_unref(&p[1].t);
  cr_assert_eq(uv_timer_init(&loop, &keeper), 0);
  cr_assert_eq(uv_timer_start(&keeper, keeper_cb, 20, 0), 0);
  uv_sleep(3); /* p[0] is due when uv_run starts, p[1] during its poll */
  while (runs < 10 && uv_run(&loop, UV_RUN_ONCE))
    runs++;
  cr_assert_eq(keeper_calls, 1);
  cr_assert_eq(p[0].calls, 1);
  cr_assert_eq(p[1].calls, 1,
               "the unreferenced timer due with the "
               "uv_timer_t never ran");
  cr_assert_not(tw_uv_timer_is_active(&p[1].t));
  cr_assert_eq(uv_loop_alive(&loop), 0);
  uv_close((uv_handle_t *)&keeper, NULL);
}

/* The same with a referenced twheel timer keeping the loop alive, stopped
 * after the UV_RUN_ONCE whose wakeup after the poll was left to the next
 * call's prepare phase: the unreferenced timer that came due during that
 * poll still runs, in the next call. (When the stop unreferenced all the
 * adapter's handles, the next uv_run() returned 0 at once, without it.) */
Test(uv,
     an_unreferenced_timer_owed_a_wakeup_runs_after_the_last_reference_goes) {
  static struct probe p[3];
  probes_init(p, 3);
  uv_update_time(&loop); /* deadlines from now, not from the setup */
  start(&p[0], 1, 0);
  start(&p[1], 50, 0);
  tw_uv_timer_unref(&p[0].t);
  tw_uv_timer_unref(&p[1].t);
  start(&p[2], 1000, 0); /* referenced, not due in this test */
  uv_sleep(3); /* p[0] is due when uv_run starts, p[1] during its poll */
  cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
  cr_assert_eq(p[0].calls, 1);
  cr_assert_eq(p[1].calls, 0,
               "p[1] ran before the poll (a stall of more "
               "than 47 ms?): nothing left to test");
  cr_assert_eq(tw_uv_timer_stop(&p[2].t), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 0);
  cr_assert_eq(p[1].calls, 1,
               "the unreferenced timer due during the poll "
               "never ran");
  cr_assert_eq(uv_loop_alive(&loop), 0);
}

/* uv_timer_get_due_in: max(0, deadline - uv_now), so 0 for a timer due
 * but not run yet. */
Test(uv, due_in_of_a_timer_due_but_not_run_yet_is_zero) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 2, 0);
  cr_assert_eq(tw_uv_timer_get_due_in(&p.t), 2);
  uv_sleep(5);
  uv_update_time(&loop);
  cr_assert(tw_uv_timer_is_active(&p.t));
  cr_assert_eq(tw_uv_timer_get_due_in(&p.t), 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(p.calls, 1);
}

/* timer_again */
Test(uv, again_follows_uv_timer_again) {
  static struct probe p[2];
  probes_init(p, 2);
  tw_uv_timer_set_repeat(&p[0].t, 30);
  cr_assert_eq(tw_uv_timer_again(&p[0].t), UV_EINVAL, "never started");
  cr_assert_not(tw_uv_timer_is_active(&p[0].t));

  start(&p[0], 50, 0); /* repeat 0: again does nothing */
  cr_assert_eq(tw_uv_timer_again(&p[0].t), 0);
  cr_assert_eq(tw_uv_timer_get_due_in(&p[0].t), 50);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
  cr_assert_eq(tw_uv_timer_again(&p[0].t), 0);
  cr_assert_not(tw_uv_timer_is_active(&p[0].t),
                "again with repeat 0 stays stopped");

  tw_uv_timer_set_repeat(&p[0].t, 30); /* stopped, repeat set: again starts */
  cr_assert_eq(tw_uv_timer_get_repeat(&p[0].t), 30);
  cr_assert_eq(tw_uv_timer_again(&p[0].t), 0);
  p[0].deadline = uv_now(&loop) + 30;
  cr_assert(tw_uv_timer_is_active(&p[0].t));
  cr_assert_eq(tw_uv_timer_get_due_in(&p[0].t), 30);

  start(&p[1], 10, 100); /* active repeat: again re-arms at now + repeat */
  cr_assert_eq(tw_uv_timer_again(&p[1].t), 0);
  p[1].deadline = uv_now(&loop) + 100;
  cr_assert_eq(tw_uv_timer_get_due_in(&p[1].t), 100);

  uv_run(&loop, UV_RUN_ONCE); /* p[0] at 30 */
  while (p[0].calls < 2)
    uv_run(&loop, UV_RUN_ONCE);
  cr_assert_eq(log_[0].id, 0);
  cr_assert_eq(log_[0].due_in, 30);
  tw_uv_timer_set_repeat(&p[0].t, 0); /* the next call is the last */
  while (p[1].calls < 1)
    uv_run(&loop, UV_RUN_ONCE);
  tw_uv_timer_stop(&p[1].t);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_not(tw_uv_timer_is_active(&p[0].t));
}

/* loop_backend_timeout. libuv 1.44 reports 0 until an iteration ran, and
 * 0 (1.44) or -1 (later) when nothing is pending. */
Test(uv, backend_timeout_follows_the_earliest_timer) {
  static struct probe p[2];
  probes_init(p, 2);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  start(&p[0], 0, 0); /* one real iteration first */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_leq(uv_backend_timeout(&loop), 0);
  start(&p[0], 1000, 0);
  cr_assert_gt(uv_backend_timeout(&loop), 100);
  cr_assert_leq(uv_backend_timeout(&loop), 1000);
  start(&p[1], 50, 0);
  cr_assert_leq(uv_backend_timeout(&loop), 50);
  cr_assert_eq(tw_uv_timer_stop(&p[1].t), 0); /* it was the earliest */
  /* Lazy: the poll may still wake at 50 ms, for nothing; never later. */
  cr_assert_leq(uv_backend_timeout(&loop), 50);
  start(&p[0], 20, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_leq(uv_backend_timeout(&loop), 0);
  EXPECT_FIRED(0, 0);
}

/* A timer that came due during the poll of a UV_RUN_ONCE that had run
 * another before it waits for the next uv_run (one call per UV_RUN_ONCE,
 * libuv 1.44's second timer phase: see twheel-uv.h). Meanwhile
 * uv_backend_timeout() is 0, as for a due uv_timer_t: a program that polls
 * uv_backend_fd() itself must not block. */
Test(uv, backend_timeout_is_zero_while_a_timer_waits_for_the_next_run) {
  static struct probe p[2];
  probes_init(p, 2);
  uv_update_time(&loop); /* p[1] is due 20 ms from now, not from setup */
  start(&p[0], 0, 0);
  start(&p[1], 20, 0); /* due during the poll */
  cr_assert_eq(uv_run(&loop, UV_RUN_ONCE), 1);
  cr_assert_eq(p[0].calls, 1);
  if (uv_version() < 0x012d00) /* 1.44: left for the next call */
    cr_assert_eq(p[1].calls, 0);
  if (p[1].calls == 0) {
    cr_assert(uv_loop_alive(&loop));
    cr_assert_eq(uv_backend_timeout(&loop), 0);
  }
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(p[1].calls, 1);
  start(&p[0], 1000, 0); /* nothing waits now: the loop may block again */
  cr_assert_gt(uv_backend_timeout(&loop), 100);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0);
}

/* ==== what the adapter adds ==== */

Test(uv, ten_thousand_timers_use_exactly_one_uv_timer_handle) {
  enum { N = 10000 };
  static struct probe p[N];
  probes_init(p, N);
  for (int i = 0; i < N; i++)
    start(&p[i], (uint64_t)(i * 7919 % 50) + 1, 0);
  struct census c = census();
  cr_assert_eq(c.timers, 1, "%d UV_TIMER handles", c.timers);
  cr_assert_not_null(c.shared);
  cr_assert_eq(tw_count(tw_uv_wheel(d)), N);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(log_len, N);
  for (size_t i = 1; i < log_len; i++) {
    uint64_t before = p[log_[i - 1].id].deadline,
             after = p[log_[i].id].deadline;
    cr_assert_leq(before, after, "call %zu out of deadline order", i);
    if (before == after)
      cr_assert_lt(log_[i - 1].id, log_[i].id,
                   "equal deadlines out of start order");
  }
  cr_assert_eq(census().timers, 1);
}

/* One uv_timer_start per earlier deadline; a later deadline (the idle reset)
 * or a stop leaves it alone, unless no timer is left. */
Test(uv, shared_timer_is_rearmed_only_when_the_next_expiry_gets_earlier) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 500, 0);
  uv_timer_t *shared = census().shared;
  cr_assert(uv_is_active((uv_handle_t *)shared));
  cr_assert_eq(uv_timer_get_due_in(shared), 500);
  cr_assert_eq(stats_now().rearms, 1);
  for (uint64_t i = 1; i <= 1000; i++)
    start(&p[0], 500 + i, 0); /* idle resets: later every time */
  start(&p[1], 800, 0);
  cr_assert_eq(stats_now().rearms, 1, "a later deadline touched the uv timer");
  cr_assert_eq(uv_timer_get_due_in(shared), 500);
  start(&p[2], 300, 0);
  cr_assert_eq(stats_now().rearms, 2);
  cr_assert_eq(uv_timer_get_due_in(shared), 300);
  cr_assert_eq(tw_uv_timer_stop(&p[1].t), 0); /* not the earliest */
  cr_assert_eq(stats_now().rearms, 2);
  cr_assert_eq(tw_uv_timer_stop(&p[2].t), 0); /* the earliest: lazy too */
  cr_assert_eq(uv_timer_get_due_in(shared), 300);
  cr_assert_eq(stats_now().rearms, 2);
  cr_assert_eq(tw_uv_timer_stop(&p[0].t), 0); /* empty: stopped */
  cr_assert_not(uv_is_active((uv_handle_t *)shared));
  cr_assert_eq(stats_now().rearms, 3);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  cr_assert_eq(log_len, 0);
}

Test(uv, stats_count_wakeups_fired_and_wakeups_that_fired_nothing) {
  enum { N = 100 };
  static struct probe p[N + 1];
  probes_init(p, N + 1);
  for (int i = 0; i < N; i++)
    start(&p[i], 10, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  tw_stats s = stats_now();
  cr_assert_eq(s.wakeups, 1);
  cr_assert_eq(s.fired, N);
  cr_assert_eq(s.empty_wakeups, 0);
  cr_assert_eq(s.rearms, 1);

  start(&p[N], 20, 0);
  start(&p[N], 40, 0); /* lazy: the uv timer still wakes at 20, for nothing */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  s = stats_now();
  cr_assert_eq(s.wakeups, 3);
  cr_assert_eq(s.empty_wakeups, 1);
  cr_assert_eq(s.fired, N + 1);
  cr_assert_eq(s.rearms, 3); /* armed at 20, then exactly at 40 */
  cr_assert_geq(log_[N].now, p[N].deadline);
}

/* Timers started with 0 ms from another timer's callback run in the next
 * loop iteration, not in the same pass (libuv 1.44 would run them at once). */
static struct probe chain[4];

static void start_two_zero_timers(struct probe *p) {
  (void)p;
  start(&chain[1], 0, 0);
  start(&chain[2], 0, 0);
}

Test(uv, zero_timers_started_from_a_callback_run_in_the_next_iteration) {
  probes_init(chain, 4);
  chain[0].then = start_two_zero_timers;
  start(&chain[0], 5, 0);
  start(&chain[3], 5, 0); /* due in the same pass as chain[0] */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(0, 3, 1, 2);
  cr_assert_eq(log_[1].iteration, log_[0].iteration);
  cr_assert_gt(log_[2].iteration, log_[0].iteration, "ran in the same pass");
  cr_assert_eq(log_[3].iteration, log_[2].iteration);
}

/* A wakeup that waits for the prepare phase on libuv 1.44 (its callbacks ran
 * before the poll, and the next came due during it) runs only the timers
 * started before it: a 0 ms timer started meanwhile from an idle callback
 * runs in the next iteration, after a uv_timer_t started before it in that
 * callback, as libuv runs its own. It ran at that prepare phase, in the
 * iteration it was started in, before its poll and ahead of the uv_timer_t.
 * (On libuv >= 1.45 nothing waits, and the same holds.) */
static struct probe idle_probes[3];
static uv_timer_t idle_twin;
static int idle_twin_calls;
static size_t idle_twin_at;           /* log_len when the uv_timer_t ran */
static unsigned long idle_started_at; /* iterations when the idle started */

static void idle_twin_cb(uv_timer_t *h) {
  (void)h;
  idle_twin_calls++;
  idle_twin_at = log_len;
}

static void idle_starts_twin_then_zero_timer(uv_idle_t *idle) {
  cr_assert_eq(uv_timer_start(&idle_twin, idle_twin_cb, 0, 0), 0);
  start(&idle_probes[2], 0, 0);
  idle_started_at = iterations;
  uv_idle_stop(idle);
}

/* The end of the first poll, p[0] having run before it: the idle callback
 * runs in the next iteration, after its timer phase has deferred the
 * wakeup p[1] came due for. */
static uv_idle_t starter;
static void check_starts_the_idle(uv_check_t *check) {
  if (idle_probes[0].calls == 1) {
    cr_assert_eq(uv_idle_start(&starter, idle_starts_twin_then_zero_timer), 0);
    uv_check_stop(check);
  }
}

Test(uv, a_zero_timer_started_while_a_wakeup_waits_runs_in_the_next_iteration) {
  static uv_check_t check; /* closed by the teardown's run */
  probes_init(idle_probes, 3);
  idle_twin_calls = 0;
  cr_assert_eq(uv_timer_init(&loop, &idle_twin), 0);
  cr_assert_eq(uv_idle_init(&loop, &starter), 0);
  cr_assert_eq(uv_check_init(&loop, &check), 0);
  cr_assert_eq(uv_check_start(&check, check_starts_the_idle), 0);
  uv_unref((uv_handle_t *)&check);
  start(&idle_probes[0], 1, 0);
  start(&idle_probes[1], 20, 0);
  uv_sleep(3); /* p[0] is due when uv_run starts, p[1] during its poll */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(0, 1, 2);
  cr_assert_eq(idle_twin_calls, 1);
  cr_assert_gt(log_[2].iteration, idle_started_at,
               "the 0 ms timer ran in the iteration it was started in");
  cr_assert_eq(idle_twin_at, 2, "the uv_timer_t started first ran after it");
  uv_close((uv_handle_t *)&idle_twin, NULL);
  uv_close((uv_handle_t *)&starter, NULL);
  uv_close((uv_handle_t *)&check, NULL);
}

/* A callback restarting itself with 0 ms does not starve real I/O: a TCP
 * ping-pong on 127.0.0.1 completes while it spins, and between two of its
 * calls the loop always went through poll and the check phase. */
struct pingpong {
  uv_tcp_t server, client, accepted;
  uv_connect_t connect;
  uv_write_t client_write, server_write;
  char server_buf[64], client_buf[64];
  int round_trips, target;
  struct probe spinner;
};
static struct pingpong pp;

static void pp_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)size;
  char *mem = h == (uv_handle_t *)&pp.client ? pp.client_buf : pp.server_buf;
  *buf = uv_buf_init(mem, sizeof pp.server_buf);
}

static void pp_written(uv_write_t *req, int status) {
  (void)req;
  cr_assert_eq(status, 0);
}

static void pp_ping(void) {
  static char msg[] = "ping";
  uv_buf_t buf = uv_buf_init(msg, 4);
  cr_assert_eq(uv_write(&pp.client_write, (uv_stream_t *)&pp.client, &buf, 1,
                        pp_written),
               0);
}

static void pp_server_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)s;
  if (n <= 0)
    return;
  uv_buf_t echo = uv_buf_init(buf->base, (unsigned)n);
  cr_assert_eq(uv_write(&pp.server_write, (uv_stream_t *)&pp.accepted, &echo, 1,
                        pp_written),
               0);
}

static void pp_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)s;
  (void)buf;
  if (n <= 0)
    return;
  if (++pp.round_trips < pp.target) {
    pp_ping();
    return;
  }
  tw_uv_timer_stop(&pp.spinner.t);
  uv_close((uv_handle_t *)&pp.client, NULL);
  uv_close((uv_handle_t *)&pp.accepted, NULL);
  uv_close((uv_handle_t *)&pp.server, NULL);
}

static void pp_connection(uv_stream_t *server, int status) {
  cr_assert_eq(status, 0);
  cr_assert_eq(uv_tcp_init(&loop, &pp.accepted), 0);
  cr_assert_eq(uv_accept(server, (uv_stream_t *)&pp.accepted), 0);
  cr_assert_eq(
      uv_read_start((uv_stream_t *)&pp.accepted, pp_alloc, pp_server_read), 0);
}

static void pp_connected(uv_connect_t *req, int status) {
  (void)req;
  cr_assert_eq(status, 0);
  cr_assert_eq(
      uv_read_start((uv_stream_t *)&pp.client, pp_alloc, pp_client_read), 0);
  pp_ping();
}

Test(uv, zero_timer_spinning_in_its_callback_does_not_starve_tcp_io) {
  struct sockaddr_in addr;
  struct sockaddr_storage bound;
  int len = sizeof bound;

  memset(&pp, 0, sizeof pp);
  pp.target = 20;
  probes_init(&pp.spinner, 1);
  pp.spinner.then = restart_zero;
  cr_assert_eq(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
  cr_assert_eq(uv_tcp_init(&loop, &pp.server), 0);
  cr_assert_eq(uv_tcp_bind(&pp.server, (const struct sockaddr *)&addr, 0), 0);
  cr_assert_eq(uv_listen((uv_stream_t *)&pp.server, 16, pp_connection), 0);
  cr_assert_eq(uv_tcp_getsockname(&pp.server, (struct sockaddr *)&bound, &len),
               0);
  cr_assert_eq(uv_tcp_init(&loop, &pp.client), 0);
  cr_assert_eq(uv_tcp_connect(&pp.connect, &pp.client,
                              (const struct sockaddr *)&bound, pp_connected),
               0);
  start(&pp.spinner, 0, 0);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(pp.round_trips, pp.target);
  cr_assert_geq(pp.spinner.calls, pp.target, "the spinner ran %d times",
                pp.spinner.calls);
  for (size_t i = 1; i < log_len; i++)
    cr_assert_gt(log_[i].iteration, log_[i - 1].iteration,
                 "calls %zu and %zu in one iteration", i - 1, i);
}

/* Inside callbacks: a repeating timer is active with due_in == repeat, a
 * one-shot is inactive; stopping or restarting a timer due in the same pass
 * cancels its call. */
static struct probe pass[4];

static void stop_and_push_the_others(struct probe *p) {
  (void)p;
  tw_uv_timer_stop(&pass[1].t);
  start(&pass[2], 30, 0);
}

Test(uv, stop_or_restart_inside_a_pass_cancels_a_due_call) {
  probes_init(pass, 4);
  pass[0].then = stop_and_push_the_others;
  start(&pass[0], 10, 0);
  start(&pass[1], 10, 0);
  start(&pass[2], 10, 0);
  start(&pass[3], 10, 25);
  uv_run(&loop, UV_RUN_ONCE);
  while (pass[2].calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  tw_uv_timer_stop(&pass[3].t);
  cr_assert_eq(log_[0].id, 0);
  cr_assert_eq(log_[0].active, 0);
  cr_assert_eq(log_[1].id, 3);
  cr_assert_eq(log_[1].active, 1);
  cr_assert_eq(log_[1].due_in, 25);
  cr_assert_eq(pass[1].calls, 0);
  cr_assert_eq(pass[2].calls, 1);
  cr_assert_geq(log_[log_len - 1].now, log_[0].now + 30);
}

/* Liveness like Node's single timer: uv_run returns once the last
 * referenced timer has fired, with unreferenced ones still armed. */
Test(uv, loop_alive_exactly_while_a_referenced_timer_is_active) {
  static struct probe p[3];
  probes_init(p, 3);
  cr_assert_eq(uv_loop_alive(&loop), 0);
  start(&p[0], 20, 0);
  cr_assert_eq(uv_loop_alive(&loop), 1);
  start(&p[1], 5000, 0);
  tw_uv_timer_unref(&p[1].t);
  start(&p[2], 5, 0);
  tw_uv_timer_unref(&p[2].t);
  tw_uv_timer_ref(&p[2].t);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(2, 0);
  cr_assert(tw_uv_timer_is_active(&p[1].t));
  cr_assert_eq(uv_loop_alive(&loop), 0);
}

/* ==== close ==== */

Test(uv, close_with_active_timers_calls_none_and_close_cb_once) {
  static struct probe p[4];
  probes_init(p, 4);
  start(&p[0], 0, 0);
  start(&p[1], 10, 0);
  start(&p[2], 5, 5);
  start(&p[3], 1, 0);
  tw_uv_timer_unref(&p[3].t);
  tw_uv_close(d, on_closed);
  tw_uv_close(d, NULL); /* while closing: no-op, the first close_cb stays */
  for (int i = 0; i < 4; i++)
    cr_assert_not(tw_uv_timer_is_active(&p[i].t));
  cr_assert_eq(closed_calls, 0, "close_cb before libuv closed the handle");
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(closed_calls, 1);
  cr_assert_eq(log_len, 0);
  cr_assert_eq(stats_at_close.fired, 0);
  /* The adapter is freed; its timers may still be stopped and queried. */
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(tw_uv_timer_stop(&p[i].t), 0);
    cr_assert_eq(tw_uv_timer_get_due_in(&p[i].t), 0);
    tw_uv_timer_ref(&p[i].t);
  }
  d = NULL;
}

static struct probe closing[4];

static void close_the_adapter(struct probe *p) {
  (void)p;
  start(&closing[3], 0, 0); /* a due-now timer: the prepare path is armed */
  tw_uv_close(d, on_closed);
  cr_assert_eq(tw_uv_timer_start(&closing[3].t, probe_cb, 0, 0), UV_EINVAL);
}

Test(uv, close_from_a_callback_stops_the_pass_and_calls_nothing_more) {
  probes_init(closing, 4);
  closing[0].then = close_the_adapter;
  start(&closing[0], 5, 0);
  start(&closing[1], 5, 0); /* due in the same pass, after closing[0] */
  start(&closing[2], 6, 3);
  uv_sleep(10);
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_FIRED(0);
  cr_assert_eq(closed_calls, 1);
  cr_assert_eq(stats_at_close.fired, 1);
  for (int i = 0; i < 4; i++)
    cr_assert_not(tw_uv_timer_is_active(&closing[i].t));
  d = NULL;
}

/* On libuv 1.44 the second call of a repeating timer due at the start of
 * a UV_RUN_ONCE waits for the next call's prepare phase: closing the
 * adapter from there works as from the timer phase. */
static void close_on_second_call(struct probe *p) {
  if (p->calls == 2)
    tw_uv_close(d, on_closed);
}

Test(uv, close_from_a_repeating_callback_in_a_later_run_once) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = close_on_second_call;
  start(&p[0], 5, 5);
  start(&p[1], 500, 0); /* never called: the close comes first */
  uv_sleep(10);
  while (closed_calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  cr_assert_eq(p[0].calls, 2);
  cr_assert_eq(p[1].calls, 0);
  cr_assert_not(tw_uv_timer_is_active(&p[1].t));
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  d = NULL;
}

static tw_uv_timer_t *heap_timers[64];

static void close_and_free_everything(struct probe *p) {
  (void)p;
  tw_uv_close(d, on_closed);
  for (int i = 0; i < 64; i++) {
    free(heap_timers[i]); /* inactive at once: the memory is ours again */
    heap_timers[i] = NULL;
  }
}

Test(uv, timers_may_be_freed_right_after_close_from_inside_a_callback) {
  static struct probe p;
  probes_init(&p, 1);
  for (int i = 0; i < 64; i++) {
    heap_timers[i] = malloc(sizeof *heap_timers[i]);
    cr_assert_not_null(heap_timers[i]);
    cr_assert_eq(tw_uv_timer_init(d, heap_timers[i]), 0);
    cr_assert_eq(tw_uv_timer_start(heap_timers[i], never_cb, (uint64_t)i % 3,
                                   (uint64_t)i % 2),
                 0);
  }
  p.then = close_and_free_everything;
  start(&p, 0, 0); /* started last: fires after those due at 0 */
  cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  cr_assert_eq(closed_calls, 1);
  cr_assert_eq(p.calls, 1);
  d = NULL;
}

/* ==== differential: twheel timers against uv_timer_t twins ==== */

/* Two families of N timers in one loop, driven by the same random script:
 * uv_timer_t and tw_uv_timer_t. Callbacks stop, restart (>= 1 ms, so that
 * libuv 1.44's same-pass rerun of 0 ms timers is not involved), `again`,
 * set_repeat, ref and unref timers of their own family. Each family logs
 * (id, iteration, active, due_in, repeat) per call; the logs must be
 * identical. At every twheel call the adapter's count of active referenced
 * timers (struct tw_uv__head) must be what the timers say. */
enum { TWINS = 200, TWIN_CALLS = 6 };

struct family {
  uint64_t rng;
  int again_einval;
  int calls[TWINS];
  struct twin_entry {
    int id;
    unsigned long iteration;
    int active;
    uint64_t due_in, repeat;
  } log[TWINS * TWIN_CALLS * 4];
  size_t len;
};
static struct family fam[2]; /* 0: uv_timer_t, 1: tw_uv_timer_t */
static uv_timer_t uvt[TWINS];
static tw_uv_timer_t twt[TWINS];
static uint64_t seed;

static uint64_t next_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static void uv_family_cb(uv_timer_t *h);
static void tw_family_cb(tw_uv_timer_t *h);

/* One scripted operation on timer `id` of family `f`. */
static void twin_op(int f, int id, unsigned op, uint64_t arg) {
  switch (op) {
  case 0: /* start */
    if (f == 0)
      uv_timer_start(&uvt[id], uv_family_cb, arg % 20 + 1,
                     arg % 3 ? 0 : arg % 7 + 1);
    else
      tw_uv_timer_start(&twt[id], tw_family_cb, arg % 20 + 1,
                        arg % 3 ? 0 : arg % 7 + 1);
    break;
  case 1:
    if (f == 0)
      uv_timer_stop(&uvt[id]);
    else
      tw_uv_timer_stop(&twt[id]);
    break;
  case 2: /* again: the result codes are compared at the end */
    fam[f].again_einval += (f == 0 ? uv_timer_again(&uvt[id])
                                   : tw_uv_timer_again(&twt[id])) == UV_EINVAL;
    break;
  case 3:
    if (f == 0)
      uv_timer_set_repeat(&uvt[id], arg % 9);
    else
      tw_uv_timer_set_repeat(&twt[id], arg % 9);
    break;
  case 4: /* unref one time in four, else ref */
    if (f == 0)
      (arg % 4 ? uv_ref : uv_unref)((uv_handle_t *)&uvt[id]);
    else
      (arg % 4 ? tw_uv_timer_ref : tw_uv_timer_unref)(&twt[id]);
    break;
  }
}

/* The adapter's count of active unreferenced timers, and what it must be;
 * the same for the wheel's count of active timers. */
static size_t tw_family_unrefd(void) {
  return ((struct tw_uv__head *)(void *)d)->unrefd_active;
}

static size_t tw_family_active(int referenced) {
  size_t n = 0;
  for (int i = 0; i < TWINS; i++)
    n += tw_uv_timer_is_active(&twt[i]) &&
         (referenced < 0 || tw_uv_timer_has_ref(&twt[i]) == referenced);
  return n;
}

static void family_call(int f, int id, int active, uint64_t due_in,
                        uint64_t repeat) {
  struct family *fm = &fam[f];
  cr_assert_lt(fm->len, sizeof fm->log / sizeof fm->log[0]);
  fm->log[fm->len++] =
      (struct twin_entry){id, iterations, active, due_in, repeat};
  if (++fm->calls[id] >= TWIN_CALLS) { /* bound the run */
    twin_op(f, id, 1, 0);
    return;
  }
  unsigned ops = (unsigned)(next_rand(&fm->rng) % 3);
  for (unsigned i = 0; i < ops; i++) {
    int target = (int)(next_rand(&fm->rng) % TWINS);
    unsigned op = (unsigned)(next_rand(&fm->rng) % 5);
    uint64_t arg = next_rand(&fm->rng);
    if (fm->calls[target] < TWIN_CALLS)
      twin_op(f, target, op, arg);
  }
}

static void uv_family_cb(uv_timer_t *h) {
  int id = (int)(h - uvt);
  family_call(0, id, uv_is_active((uv_handle_t *)h), uv_timer_get_due_in(h),
              uv_timer_get_repeat(h));
}

/* Counts the adapter's own handles (their data is the adapter) that keep
 * the loop alive. */
static void count_adapter_refs(uv_handle_t *handle, void *refs) {
  if (handle->data == (void *)d && uv_has_ref(handle))
    ++*(int *)refs;
}

static void tw_family_cb(tw_uv_timer_t *h) {
  int id = (int)(h - twt), refs = 0;
  uv_walk(&loop, count_adapter_refs, &refs);
  cr_assert_eq(refs, tw_family_active(1) > 0 ? 4 : 0, "%d handles referenced",
               refs);
  cr_assert_eq(tw_family_unrefd(), tw_family_active(0));
  cr_assert_eq(tw_count(tw_uv_wheel(d)), tw_family_active(-1));
  family_call(1, id, tw_uv_timer_is_active(h), tw_uv_timer_get_due_in(h),
              tw_uv_timer_get_repeat(h));
}

Test(uv, behaves_like_uv_timer_twins_under_a_random_script) {
  for (int round = 0; round < 5; round++) {
    seed = (uint64_t)uv_hrtime() ^ (uint64_t)round * 0x9e3779b97f4a7c15ull;
    memset(fam, 0, sizeof fam);
    fam[0].rng = fam[1].rng = seed;
    uint64_t script = seed;
    for (int i = 0; i < TWINS; i++) {
      cr_assert_eq(uv_timer_init(&loop, &uvt[i]), 0);
      cr_assert_eq(tw_uv_timer_init(d, &twt[i]), 0);
    }
    for (int i = 0; i < TWINS; i++) { /* the same initial script for both */
      unsigned op = (unsigned)(next_rand(&script) % 5);
      uint64_t arg = next_rand(&script);
      twin_op(0, i, op == 1 ? 0 : op, arg);
      twin_op(1, i, op == 1 ? 0 : op, arg);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    size_t n = fam[0].len < fam[1].len ? fam[0].len : fam[1].len;
    for (size_t i = 0; i < n; i++) {
      struct twin_entry *a = &fam[0].log[i], *b = &fam[1].log[i];
      cr_assert(
          a->id == b->id && a->iteration == b->iteration &&
              a->active == b->active && a->due_in == b->due_in &&
              a->repeat == b->repeat,
          "seed %llu call %zu: uv_timer_t #%d (iter %lu active %d due_in %llu"
          " repeat %llu) vs twheel #%d (iter %lu active %d due_in %llu repeat "
          "%llu)",
          (unsigned long long)seed, i, a->id, a->iteration, a->active,
          (unsigned long long)a->due_in, (unsigned long long)a->repeat, b->id,
          b->iteration, b->active, (unsigned long long)b->due_in,
          (unsigned long long)b->repeat);
    }
    cr_assert_eq(fam[0].len, fam[1].len, "seed %llu: %zu calls vs %zu",
                 (unsigned long long)seed, fam[0].len, fam[1].len);
    cr_assert_eq(fam[0].again_einval, fam[1].again_einval);
    cr_assert_gt(fam[0].len, TWINS / 2);
    for (int i = 0; i < TWINS; i++) {
      uv_timer_stop(&uvt[i]);
      tw_uv_timer_stop(&twt[i]);
      uv_close((uv_handle_t *)&uvt[i], NULL);
    }
    cr_assert_eq(tw_family_unrefd(), 0);
    cr_assert_eq(tw_count(tw_uv_wheel(d)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
}
