/*
 * The libevent adapter on real event bases and the real clock: the intent
 * of libevent's own timeout regress tests (simple, persistent, persistent
 * after a blocked loop, re-add, add(NULL), delete from another callback,
 * pending and regress_timer_timeout.c's time left, common timeouts,
 * loopbreak and loopexit beside plain libevent timers, priorities with one
 * level, free from a callback), a 20,000-timer stress run in the spirit of
 * test-time.c, the one-event-per-base promise and an idle reaper on real
 * sockets.
 *
 * Real time: order and "never early" are asserted exactly (against
 * CLOCK_MONOTONIC read before the add); lateness only with generous bounds.
 */
#include <criterion/criterion.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <twheel-event.h>

#define MS 1000000LL       /* ns */
#define LATE_OK (150 * MS) /* generous: CI machines stall */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void sleep_ns(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static void spin_ns(int64_t ns) { /* block the loop without yielding */
  int64_t until = mono_ns() + ns;
  while (mono_ns() < until)
    ;
}

static struct timeval tv_us(long long us) {
  struct timeval tv;
  tv.tv_sec = (time_t)(us / 1000000);
  tv.tv_usec = (suseconds_t)(us % 1000000);
  return tv;
}

static int64_t tv_wall_us(const struct timeval *tv) {
  return (int64_t)tv->tv_sec * 1000000LL + tv->tv_usec;
}

/* One base and one adapter per test. */
static struct event_base *base;
static tw_ev *d;

static void setup(void) {
  base = event_base_new();
  cr_assert_not_null(base);
  d = tw_ev_new(base);
  cr_assert_not_null(d);
}

static void teardown(void) {
  tw_ev_free(d); /* tests that freed it set d = NULL */
  d = NULL;
  event_base_free(base);
  base = NULL;
}

TestSuite(event, .init = setup, .fini = teardown, .timeout = 10);

static tw_stats stats(void) {
  tw_stats s;
  cr_assert_eq(tw_ev_stats(d, &s), 0);
  return s;
}

/* Events in the base that have a timeout pending. */
static int count_timeout_cb(const struct event_base *b, const struct event *ev,
                            void *arg) {
  (void)b;
  if (event_pending(ev, EV_TIMEOUT, NULL))
    ++*(int *)arg;
  return 0;
}

static int timeout_events(void) {
  int n = 0;
  event_base_foreach_event(base, count_timeout_cb, &n);
  return n;
}

/* A probe: records each call; `then` runs after the record. */
struct probe {
  tw_ev_timer t;
  int id;
  int calls;
  int64_t added;     /* CLOCK_MONOTONIC read just before the latest add */
  int64_t due;       /* added + timeval: the earliest allowed call */
  int64_t at[16];    /* call times */
  int pending_in_cb; /* tw_ev_timer_pending inside the latest call */
  struct timeval pending_tv;
  int64_t pending_ahead_us; /* pending_tv minus wall time, in the call */
  int iteration; /* loop iteration of the latest call (when counted) */
  void (*then)(struct probe *p);
};

static int order[64];
static int order_len;
static int iteration;

static void probe_cb(evutil_socket_t fd, short what, void *arg) {
  struct probe *p = arg;
  int64_t now = mono_ns();
  cr_assert_eq(fd, -1);
  cr_assert_eq(what, EV_TIMEOUT);
  cr_assert_geq(now, p->due, "timer %d ran %lld ns early", p->id,
                (long long)(p->due - now));
  if (p->calls < 16)
    p->at[p->calls] = now;
  p->calls++;
  p->iteration = iteration;
  p->pending_in_cb = tw_ev_timer_pending(&p->t, &p->pending_tv);
  p->pending_ahead_us = tv_wall_us(&p->pending_tv) - wall_us();
  if (order_len < 64)
    order[order_len++] = p->id;
  if (p->then)
    p->then(p);
}

static void probe_init(struct probe *p, int id, short flags) {
  memset(p, 0, sizeof *p);
  p->id = id;
  cr_assert_eq(tw_ev_timer_assign(&p->t, d, flags, probe_cb, p), 0);
}

static void probe_add(struct probe *p, long long us) {
  struct timeval tv = tv_us(us);
  p->added = mono_ns();
  p->due = p->added + (us > 0 ? us * 1000 : 0);
  cr_assert_eq(tw_ev_timer_add(&p->t, &tv), 0);
}

/* Probe p (id 1, `flags`, `then` after each call) alone: added for `us`,
 * then the base dispatched until nothing is left. */
static void run_alone(struct probe *p, short flags,
                      void (*then)(struct probe *), long long us) {
  probe_init(p, 1, flags);
  p->then = then;
  probe_add(p, us);
  cr_assert_eq(event_base_dispatch(base), 1);
}

/* The size twheel-event.h, README.md and the contract state for LP64. */
Test(event, a_timer_is_80_bytes) {
  if (sizeof(void *) == 8)
    cr_assert_eq(sizeof(tw_ev_timer), 80);
}

/* --- libevent's test_simpletimeout ------------------------------------ */

Test(event, one_shot_runs_once_never_early_then_dispatch_returns) {
  struct probe p;
  probe_init(&p, 1, 0);
  probe_add(&p, 30000);
  cr_assert(tw_ev_timer_pending(&p.t, NULL));
  cr_assert_eq(event_base_dispatch(base), 1,
               "nothing left: dispatch returns 1");
  cr_assert_eq(p.calls, 1);
  cr_assert_lt(p.at[0] - p.due, LATE_OK);
  cr_assert_eq(p.pending_in_cb, 0, "a one-shot is not pending in its callback");
  cr_assert_eq(tw_ev_timer_pending(&p.t, NULL), 0);
  tw_stats s = stats();
  cr_assert_geq(s.wakeups, 1);
  cr_assert_eq(s.fired, 1);
  cr_assert_eq(s.wakeups - s.empty_wakeups, 1);
}

Test(event, sub_millisecond_timevals_are_rounded_up_never_early) {
  enum { N = 200 };
  static struct probe p[N];
  srand(7);
  for (int i = 0; i < N; i++) {
    long long us =
        i < 8 ? (long long[]){1, 2, 999, 1000, 1001, 1500, 1999, 2001}[i]
              : 1 + rand() % 10000;
    probe_init(&p[i], i, 0);
    probe_add(&p[i], us);
  }
  cr_assert_eq(event_base_dispatch(base), 1);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(p[i].calls, 1, "timer %d", i);
    cr_assert_lt(p[i].at[0] - p[i].due, LATE_OK);
  }
}

/* Equal deadlines run in the order of their latest add; earlier deadlines
 * first (libevent leaves equal deadlines unordered; we promise FIFO). */
Test(event, order_is_deadline_then_latest_add) {
  struct probe a, b, c, e;
  probe_init(&a, 1, 0);
  probe_init(&b, 2, 0);
  probe_init(&c, 3, 0);
  probe_init(&e, 4, 0);
  probe_add(&a, 20000);
  probe_add(&b, 20000);
  probe_add(&c, 20000);
  probe_add(&a, 20000); /* re-added: now after b and c */
  probe_add(&e, 5000);
  sleep_ns(40 * MS); /* all due in the first wakeup */
  order_len = 0;
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(order_len, 4);
  cr_assert_eq(order[0], 4);
  cr_assert_eq(order[1], 2);
  cr_assert_eq(order[2], 3);
  cr_assert_eq(order[3], 1);
}

/* --- libevent's test_persistent_timeout -------------------------------- */

static void del_after_5(struct probe *p) {
  if (p->calls == 5)
    cr_assert_eq(tw_ev_timer_del(&p->t), 0);
}

Test(event, persistent_runs_every_period_without_drift) {
  struct probe p;
  run_alone(&p, EV_PERSIST, del_after_5, 20000);
  cr_assert_eq(p.calls, 5);
  for (int k = 0; k < 5; k++)
    cr_assert_geq(p.at[k], p.added + (k + 1) * 20 * MS, "call %d early", k);
  /* No drift: the 5th call is due at add + 100 ms, not at the sum of
   * 5 late wakeups plus periods. */
  cr_assert_lt(p.at[4] - (p.added + 100 * MS), LATE_OK);
}

static int64_t seen_deadline[8];
static void record_deadline(struct probe *p) {
  cr_assert(p->pending_in_cb, "EV_PERSIST: pending inside its callback");
  seen_deadline[p->calls - 1] = tv_wall_us(&p->pending_tv);
  if (p->calls == 4)
    tw_ev_timer_del(&p->t);
}

Test(event, persistent_rearms_at_previous_deadline_plus_period) {
  struct probe p;
  run_alone(&p, EV_PERSIST, record_deadline, 15000);
  cr_assert_eq(p.calls, 4);
  /* Deadlines step by exactly the period (to the microseconds it takes to
   * read two clocks), however late each call was. */
  for (int k = 1; k < 4; k++) {
    int64_t step = seen_deadline[k] - seen_deadline[k - 1];
    cr_assert(step > 15000 - 500 && step < 15000 + 500, "step %lld us",
              (long long)step);
  }
}

/* --- libevent's test_persistent_timeout_jump ----------------------------- */

static void del_after_2(struct probe *p) {
  if (p->calls == 2)
    tw_ev_timer_del(&p->t);
}

/* The loop is blocked for about five periods before it runs: one call for
 * the missed periods, then the next one a full period after that call's
 * wakeup, not a burst of catch-up calls. (As with libevent, a stall inside
 * the callbacks of one wakeup is not seen until the next: the re-arm counts
 * from the wakeup's time.) */
Test(event, persistent_after_blocked_loop_collapses_missed_periods) {
  struct probe per;
  probe_init(&per, 1, EV_PERSIST);
  per.then = del_after_2;
  probe_add(&per, 10000);
  spin_ns(60 * MS);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(per.calls, 2);
  cr_assert_geq(per.at[0], per.added + 60 * MS);
  cr_assert_geq(per.at[1] - per.at[0], 5 * MS, "burst: %lld ns apart",
                (long long)(per.at[1] - per.at[0]));
}

Test(event, readding_persistent_sets_the_new_period) {
  struct probe p;
  probe_init(&p, 1, EV_PERSIST);
  p.then = del_after_2;
  probe_add(&p, 500000);
  probe_add(&p, 10000);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p.calls, 2);
  cr_assert_geq(p.at[1], p.added + 20 * MS);
  cr_assert_lt(p.at[1] - p.added, 20 * MS + LATE_OK);
}

static void del_after_3(struct probe *p) {
  if (p->calls == 3)
    tw_ev_timer_del(&p->t);
}

Test(event, persistent_with_zero_period_runs_once) {
  struct probe p;
  run_alone(&p, EV_PERSIST, del_after_3, 0); /* 3 calls if it re-armed */
  cr_assert_eq(p.calls, 1);
  cr_assert_eq(p.pending_in_cb, 0);
}

/* --- re-add earlier and later -------------------------------------------- */

Test(event, readd_moves_the_deadline_earlier_and_later) {
  struct probe early, late;
  probe_init(&early, 1, 0);
  probe_init(&late, 2, 0);
  probe_add(&early, 400000);
  probe_add(&late, 10000);
  probe_add(&early, 10000); /* earlier */
  probe_add(&late, 60000);  /* later: the old 10 ms is forgotten */
  order_len = 0;
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(early.calls, 1);
  cr_assert_eq(late.calls, 1);
  cr_assert_lt(early.at[0] - early.due, LATE_OK);
  cr_assert_geq(late.at[0], late.added + 60 * MS);
  cr_assert_eq(order[0], 1);
}

static void readd_self_once(struct probe *p) {
  if (p->calls == 1)
    probe_add(p, 20000);
}

Test(event, readd_from_own_callback_runs_again_later) {
  struct probe p;
  run_alone(&p, 0, readd_self_once, 5000);
  cr_assert_eq(p.calls, 2);
  cr_assert_geq(p.at[1], p.at[0] + 20 * MS);
}

/* --- add(NULL) ----------------------------------------------------------- */

static struct probe *other;
static void add_null_to_other(struct probe *p) {
  (void)p;
  cr_assert_eq(tw_ev_timer_add(&other->t, NULL), 0);
}

Test(event, add_null_keeps_a_pending_deadline) {
  struct probe p, q;
  struct timeval before, after;
  probe_init(&p, 1, 0);
  probe_init(&q, 2, 0);
  probe_add(&p, 60000);
  cr_assert(tw_ev_timer_pending(&p.t, &before));
  cr_assert_eq(tw_ev_timer_add(&p.t, NULL), 0);
  cr_assert(tw_ev_timer_pending(&p.t, &after));
  cr_assert_lt(llabs((long long)(tv_wall_us(&after) - tv_wall_us(&before))),
               1000);
  other = &p;
  q.then = add_null_to_other; /* add(NULL) again 20 ms later */
  probe_add(&q, 20000);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p.calls, 1);
  cr_assert_geq(p.at[0], p.added + 60 * MS);
  cr_assert_lt(p.at[0] - p.due, LATE_OK, "add(NULL) must not restart it");
}

Test(event, add_null_on_a_timer_not_pending_does_nothing) {
  struct probe p;
  probe_init(&p, 1, EV_PERSIST);
  cr_assert_eq(tw_ev_timer_add(&p.t, NULL), 0);
  cr_assert_eq(tw_ev_timer_pending(&p.t, NULL), 0);
  cr_assert_eq(timeout_events(), 0);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p.calls, 0);
}

/* --- delete (libevent's test_event_remove_timeout, del idempotence) ------ */

static struct probe *victim, *moved;
static void del_victim_and_move_other(struct probe *p) {
  (void)p;
  cr_assert(tw_ev_timer_pending(&victim->t, NULL), "due, not yet run: pending");
  cr_assert_eq(tw_ev_timer_del(&victim->t), 0);
  cr_assert_eq(tw_ev_timer_del(&victim->t), 0);
  probe_add(moved, 30000); /* due now: re-adding cancels this call */
}

Test(event, del_or_readd_from_another_callback_cancels_a_due_call) {
  struct probe a, b, c;
  probe_init(&a, 1, 0);
  probe_init(&b, 2, 0);
  probe_init(&c, 3, 0);
  a.then = del_victim_and_move_other;
  victim = &b;
  moved = &c;
  probe_add(&a, 1000);
  probe_add(&b, 2000);
  probe_add(&c, 2000);
  sleep_ns(20 * MS); /* all three due in the same wakeup */
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(b.calls, 0);
  cr_assert_eq(c.calls, 1);
  cr_assert_geq(c.at[0], c.added + 30 * MS);
}

Test(event, del_is_idempotent_and_an_empty_wheel_lets_dispatch_return) {
  struct probe p;
  probe_init(&p, 1, 0);
  cr_assert_eq(tw_ev_timer_del(&p.t), 0, "never added");
  probe_add(&p, 50000);
  cr_assert_eq(timeout_events(), 1);
  cr_assert_eq(tw_ev_timer_del(&p.t), 0);
  cr_assert_eq(tw_ev_timer_del(&p.t), 0);
  cr_assert_eq(timeout_events(), 0, "empty wheel: the event is deleted");
  int64_t t0 = mono_ns();
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_lt(mono_ns() - t0, 20 * MS, "dispatch returned at once");
  cr_assert_eq(p.calls, 0);
  cr_assert_eq(stats().wakeups, 0);
}

/* --- pending (libevent's test_event_pending) ------------------------------ */

Test(event, pending_reports_absolute_wall_clock_expiry) {
  struct probe p;
  struct timeval tv = {0, 0};
  probe_init(&p, 1, 0);
  cr_assert_eq(tw_ev_timer_pending(&p.t, &tv), 0);
  cr_assert_eq(tv.tv_sec, 0, "not pending: tv untouched");
  int64_t w0 = wall_us();
  probe_add(&p, 250000);
  int64_t w1 = wall_us();
  cr_assert_eq(tw_ev_timer_pending(&p.t, &tv), EV_TIMEOUT);
  cr_assert_geq(tv.tv_usec, 0);
  cr_assert_lt(tv.tv_usec, 1000000);
  /* The deadline is add + 250 ms rounded up to the ms. */
  cr_assert_geq(tv_wall_us(&tv), w0 + 250000 - 100);
  cr_assert_leq(tv_wall_us(&tv), w1 + 251000 + 5000);
  cr_assert_eq(tw_ev_timer_pending(&p.t, NULL), EV_TIMEOUT);
  tw_ev_timer_del(&p.t);
  cr_assert_eq(tw_ev_timer_pending(&p.t, &tv), 0);
}

Test(event, pending_inside_callbacks_true_for_persistent_only) {
  struct probe one, per;
  probe_init(&one, 1, 0);
  probe_init(&per, 2, EV_PERSIST);
  per.then = del_after_3;
  probe_add(&one, 5000);
  probe_add(&per, 10000);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(one.pending_in_cb, 0);
  cr_assert_eq(per.calls, 3);
  cr_assert_eq(per.pending_in_cb, EV_TIMEOUT);
  /* Inside the call the next expiry is at most one period (+ rounding)
   * ahead, and in the future unless the call itself was a period late. */
  cr_assert_leq(per.pending_ahead_us, 10000 + 1000, "%lld us",
                (long long)per.pending_ahead_us);
  cr_assert_gt(per.pending_ahead_us, -(LATE_OK / 1000));
}

/* libevent's test_event_pending compares the expiry with the time of the
 * add plus the timeval, and regress_timer_timeout.c checks, 1000 times,
 * that the time left (pending's expiry minus the wall clock read after it)
 * is never more than the timeval: to the microsecond, as libevent keeps it
 * (a millisecond rounding would overshoot by up to 999 us). */
Test(event, pending_reports_the_add_time_plus_the_timeval_to_the_microsecond) {
  struct probe p;
  struct timeval tv;
  probe_init(&p, 1, 0);
  for (int i = 0; i < 1000; i++) {
    long long dur = 100 + i % 7 * 333; /* us, with sub-ms parts */
    int64_t before = wall_us();
    probe_add(&p, dur);
    cr_assert_eq(tw_ev_timer_pending(&p.t, &tv), EV_TIMEOUT);
    int64_t after = wall_us();
    int64_t at = tv_wall_us(&tv);
    cr_assert_leq(at - after, dur, "%lld us left of a %lld us timeout",
                  (long long)(at - after), dur);
    /* Three clock reads rounded down to the us: 2 us of slack. */
    cr_assert_geq(at - before, dur - 2, "%lld us after the add, not %lld",
                  (long long)(at - before), dur);
  }
  /* The timer still runs only once its ms, rounded up, has come. */
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p.calls, 1);
}

/* libevent's event_persist_closure: inside the callback of an EV_PERSIST
 * timer, pending reports its previous expiry + the period, exactly, even
 * for a period with a sub-millisecond part (which also keeps the timer from
 * drifting by its rounding); after a stall, the wakeup's time + the period. */
static int64_t persist_expiry[8];
static int persist_calls;
static void record_persist_expiry(struct probe *p) {
  cr_assert(p->pending_in_cb);
  persist_expiry[persist_calls++] = tv_wall_us(&p->pending_tv);
  if (persist_calls == 6)
    tw_ev_timer_del(&p->t);
}

/* The period in whole ms (libevent keeps the microseconds; our wheel's
 * unit is the ms, and a sub-ms part is rounded up): steps of `period_us`. */
static void persistent_expiry_steps(int64_t timeout_us, int64_t period_us) {
  struct probe p;
  struct timeval tv;
  probe_init(&p, 1, EV_PERSIST);
  p.then = record_persist_expiry;
  persist_calls = 0;
  probe_add(&p, timeout_us);
  cr_assert(tw_ev_timer_pending(&p.t, &tv));
  int64_t first = tv_wall_us(&tv);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(persist_calls, 6);
  /* Each step is the period; the clocks' difference, read at each call,
   * may move a microsecond. (A call later than its next expiry would count
   * the next from its wakeup instead: stop checking there, as on a stalled
   * machine.) */
  for (int k = 0; k < 6; k++) {
    if (p.at[k] > p.added + timeout_us * 1000 + (k + 1) * period_us * 1000)
      break;
    cr_assert(
        llabs((long long)(persist_expiry[k] - (first + (k + 1) * period_us))) <=
            2,
        "call %d: expiry %lld us after the first, not %lld", k,
        (long long)(persist_expiry[k] - first), (long long)(k + 1) * period_us);
  }
  /* Never early: call k ran at or after the add + timeout + k periods. */
  for (int k = 0; k < 6; k++)
    cr_assert_geq(p.at[k], p.added + timeout_us * 1000 + k * period_us * 1000);
}

Test(event, pending_in_a_persistent_callback_is_previous_expiry_plus_period) {
  persistent_expiry_steps(10000, 10000);
}

Test(event, a_persistent_period_with_a_sub_ms_part_is_rounded_up) {
  persistent_expiry_steps(10500, 11000);
}

static void block_then_record(struct probe *p) {
  if (p->calls == 1) {
    spin_ns(60 * MS); /* the next expiry (+10 ms) passes meanwhile */
    return;
  }
  tw_ev_timer_del(&p->t);
}

Test(event, pending_after_a_stalled_persistent_call_is_wakeup_plus_period) {
  struct probe p;
  probe_init(&p, 1, EV_PERSIST);
  p.then = block_then_record;
  probe_add(&p, 10000);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p.calls, 2);
  /* In the second call (at its wakeup, 60 ms late) the next expiry is that
   * wakeup + 10 ms: at most a period ahead of the wall clock read after. */
  cr_assert_leq(p.pending_ahead_us, 10000 + 2, "%lld us ahead",
                (long long)p.pending_ahead_us);
  cr_assert_gt(p.pending_ahead_us, 10000 - LATE_OK / 1000);
  cr_assert_geq(p.at[1], p.at[0] + 60 * MS);
}

/* --- loop control (libevent's test_loopbreak, test_loopexit) ------------ */

/* Three timers due in one wakeup, A first: what A's loop call lets run.
 * `twin` runs the same scenario with plain libevent timers, as the
 * reference. */
static struct event *twin_ev[3];
static int twin_order[8], twin_len;
static int breaker_mode; /* 0: event_base_loopbreak, 1: loopexit(NULL) */

static void stop_the_loop(void) {
  if (breaker_mode == 0)
    cr_assert_eq(event_base_loopbreak(base), 0);
  else
    cr_assert_eq(event_base_loopexit(base, NULL), 0);
}

static void twin_cb(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  int id = (int)(intptr_t)arg;
  twin_order[twin_len++] = id;
  if (id == 1)
    stop_the_loop();
}

static void probe_stops_the_loop(struct probe *p) {
  (void)p;
  stop_the_loop();
}

/* Runs the scenario with plain timers: the order of the first dispatch,
 * then -1, then the order of the second. */
static void run_twins(void) {
  twin_len = 0;
  for (int i = 0; i < 3; i++) {
    struct timeval tv = {0, (i + 1) * 1000};
    twin_ev[i] = evtimer_new(base, twin_cb, (void *)(intptr_t)(i + 1));
    cr_assert_eq(evtimer_add(twin_ev[i], &tv), 0);
  }
  sleep_ns(20 * MS);
  event_base_dispatch(base);
  twin_order[twin_len++] = -1;
  event_base_dispatch(base);
  for (int i = 0; i < 3; i++)
    event_free(twin_ev[i]);
}

static void run_probes(struct probe *p) {
  for (int i = 0; i < 3; i++)
    probe_init(&p[i], i + 1, i == 2 ? EV_PERSIST : 0);
  p[0].then = probe_stops_the_loop;
  p[2].then = del_after_2;
  for (int i = 0; i < 3; i++)
    probe_add(&p[i], (i + 1) * 1000);
  sleep_ns(20 * MS); /* all three due at the first wakeup */
  order_len = 0;
}

Test(event, loopbreak_in_a_callback_leaves_other_due_timers_to_next_dispatch) {
  struct probe p[3];
  breaker_mode = 0;
  run_twins(); /* libevent: 1 | 2 3 */
  cr_assert_eq(twin_len, 4);
  cr_assert_eq(twin_order[0], 1);
  cr_assert_eq(twin_order[1], -1);

  run_probes(p);
  cr_assert_eq(event_base_dispatch(base), 0, "broken, not out of events");
  cr_assert(event_base_got_break(base));
  cr_assert_not(event_base_got_exit(base));
  cr_assert_eq(order_len, 1, "%d callbacks ran after the break", order_len);
  cr_assert_eq(order[0], 1);
  cr_assert(tw_ev_timer_pending(&p[1].t, NULL), "due, not run: pending");
  cr_assert_eq(p[2].calls, 0);
  /* The next dispatch runs the rest first, in order, none lost (the
   * persistent one then runs again a period later). */
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(order_len, 4);
  cr_assert_eq(order[1], 2);
  cr_assert_eq(order[2], 3);
  cr_assert_eq(order[3], 3);
  cr_assert_eq(p[0].calls + p[1].calls + p[2].calls, 4);
}

Test(event, loopexit_without_delay_in_a_callback_lets_other_due_timers_run) {
  struct probe p[3];
  breaker_mode = 1;
  run_twins(); /* libevent: 1 2 3 | */
  cr_assert_eq(twin_len, 4);
  cr_assert_eq(twin_order[3], -1);

  run_probes(p);
  cr_assert_eq(event_base_dispatch(base), 0);
  cr_assert(event_base_got_exit(base));
  cr_assert_not(event_base_got_break(base));
  cr_assert_eq(order_len, 3);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(order[i], i + 1);
  cr_assert(tw_ev_timer_pending(&p[2].t, NULL), "persistent: armed again");
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p[2].calls, 2);
}

/* test_loopbreak itself: two zero timeouts, the first breaks the loop, the
 * second must not run in that dispatch. */
static void break_loop(struct probe *p) {
  (void)p;
  event_base_loopbreak(base);
}

Test(event, loopbreak_from_the_first_of_two_zero_timeouts_skips_the_second) {
  struct probe a, b;
  probe_init(&a, 1, 0);
  probe_init(&b, 2, 0);
  a.then = break_loop;
  probe_add(&a, 0);
  probe_add(&b, 0);
  cr_assert_eq(event_base_dispatch(base), 0);
  cr_assert(event_base_got_break(base));
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(b.calls, 0);
  cr_assert_eq(tw_ev_timer_del(&b.t), 0);
}

/* test_loopexit: a day-long timer pending, loopexit after 60 ms. */
Test(event, loopexit_after_a_delay_returns_with_timers_pending) {
  struct probe day;
  struct timeval sixty = {0, 60000};
  probe_init(&day, 1, 0);
  probe_add(&day, 86400LL * 1000000);
  int64_t t0 = mono_ns();
  cr_assert_eq(event_base_loopexit(base, &sixty), 0);
  cr_assert_eq(event_base_dispatch(base), 0);
  cr_assert(event_base_got_exit(base));
  cr_assert_geq(mono_ns() - t0, 55 * MS); /* libevent's coarse clock */
  cr_assert_lt(mono_ns() - t0, 60 * MS + LATE_OK);
  cr_assert_eq(day.calls, 0);
  cr_assert(tw_ev_timer_pending(&day.t, NULL));
  tw_ev_timer_del(&day.t);
}

/* test_priorities with one priority: two timers re-adding themselves with
 * 0 run in turn, three times each, until one calls loopexit(NULL) on its
 * fourth call; the other still runs its fourth call in that wakeup. */
static void readd_zero_or_exit(struct probe *p) {
  if (p->calls == 4) {
    event_base_loopexit(base, NULL);
    return;
  }
  probe_add(p, 0);
}

Test(event, zero_timeouts_readding_themselves_alternate_until_loopexit) {
  struct probe one, two;
  probe_init(&one, 1, 0);
  probe_init(&two, 2, 0);
  one.then = two.then = readd_zero_or_exit;
  probe_add(&one, 0);
  probe_add(&two, 0);
  order_len = 0;
  cr_assert_eq(event_base_dispatch(base), 0);
  cr_assert_eq(one.calls, 4);
  cr_assert_eq(two.calls, 4);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(order[i], i % 2 + 1);
}

/* --- common timeouts (libevent's test_common_timeout) ------------------- */

Test(event, common_timeout_token_is_taken_as_its_duration) {
  struct timeval thirty = {0, 30000};
  const struct timeval *token = event_base_init_common_timeout(base, &thirty);
  cr_assert_not_null(token);
  cr_assert_neq(token->tv_usec, 30000, "a real token carries magic bits");
  struct probe one, per;
  probe_init(&one, 1, 0);
  probe_init(&per, 2, EV_PERSIST);
  per.then = del_after_3;
  one.added = per.added = mono_ns();
  one.due = per.due = one.added + 30 * MS;
  cr_assert_eq(tw_ev_timer_add(&one.t, token), 0);
  cr_assert_eq(tw_ev_timer_add(&per.t, token), 0);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(one.calls, 1);
  cr_assert_lt(one.at[0] - one.due, LATE_OK, "not a 0x5... second timeout");
  cr_assert_eq(per.calls, 3);
  cr_assert_geq(per.at[2], per.added + 90 * MS);
  cr_assert_lt(per.at[2] - (per.added + 90 * MS), LATE_OK);
}

/* --- zero and negative timeouts: next iteration, never this one --------- */

static void readd_zero(struct probe *p) {
  if (p->calls < 10) {
    struct timeval zero = {0, 0}, negative = {-1, 0};
    p->due = mono_ns();
    cr_assert_eq(tw_ev_timer_add(&p->t, p->calls % 2 ? &zero : &negative), 0);
  }
}

Test(event, zero_or_negative_timeout_from_callback_runs_next_iteration) {
  struct probe p;
  int calls_before;
  probe_init(&p, 1, 0);
  p.then = readd_zero;
  probe_add(&p, 0);
  /* Each EVLOOP_ONCE is one iteration: at most one call in each. */
  for (iteration = 1; iteration <= 40 && p.calls < 10; iteration++) {
    calls_before = p.calls;
    cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
    cr_assert_leq(p.calls - calls_before, 1, "two calls in iteration %d",
                  iteration);
  }
  cr_assert_eq(p.calls, 10);
  cr_assert_eq(event_base_dispatch(base), 1);
}

/* A higher-priority libevent timer runs first in the iteration where the
 * adapter's event is also due, adds a zero timeout, and keeps the loop
 * busy past the next ms: the new timer must still wait for the next
 * iteration (libevent's own rule for tv = 0). */
static struct probe *zero_probe;
static void high_priority_cb(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  probe_add(zero_probe, 0);
  spin_ns(3 * MS);
}

Test(event, zero_timeout_added_outside_the_wheel_waits_for_next_iteration) {
  struct probe t, z;
  struct timeval five = {0, 5000};
  tw_ev_free(d); /* priorities must exist before the adapter's event */
  cr_assert_eq(event_base_priority_init(base, 2), 0);
  d = tw_ev_new(base);
  probe_init(&t, 1, 0);
  probe_init(&z, 2, 0);
  zero_probe = &z;
  struct event *high = evtimer_new(base, high_priority_cb, NULL);
  event_priority_set(high, 0);
  probe_add(&t, 5000);
  evtimer_add(high, &five);
  sleep_ns(20 * MS); /* both overdue: activated in the same iteration */
  iteration = 1;
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert_eq(z.calls, 0, "zero timeout ran in the iteration that added it");
  for (iteration = 2; iteration < 10 && z.calls == 0; iteration++)
    event_base_loop(base, EVLOOP_ONCE);
  cr_assert_eq(z.calls, 1);
  cr_assert_eq(t.calls, 1);
  cr_assert_leq(t.iteration, z.iteration);
  event_free(high);
}

/* A socket kept readable (a byte never read) runs its callback once per
 * loop iteration, and the callback defers work with a zero timeout each
 * time, as servers defer to the next iteration. The adapter's event is
 * then activated before every such add: a deferred timer must run at the
 * next iteration, never in its own, and a timer due meanwhile must run
 * too (re-adding the adapter's event at each add would cancel its wakeup
 * every time, and nothing would ever run). */
enum { RING = 8 };
static struct probe ring[RING], *waiting;
static int ring_added[RING]; /* the iteration of each probe's latest add */
static int ring_calls, adds, waiting_added;
static struct event *readable;

static void deferred_ran(struct probe *p) {
  cr_assert_gt(iteration, ring_added[p - ring],
               "deferred timer ran in the iteration that added it");
  ring_calls++;
}

static void defer_each_iteration(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  iteration++;
  if (adds == RING + 1 && !waiting_added) {
    probe_add(waiting, 5000); /* once the adds have gone round the ring */
    waiting_added = 1;
  }
  if (waiting_added &&
      (waiting->calls > 0 || mono_ns() > waiting->due + 400 * MS)) {
    event_del(readable); /* the pending timers run, and dispatch returns */
    return;
  }
  ring_added[adds % RING] = iteration;
  probe_add(&ring[adds++ % RING], 0);
}

Test(event, zero_timeouts_added_at_every_iteration_hold_no_timer_back) {
  struct probe y;
  int fds[2];
  cr_assert_eq(evutil_socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  cr_assert_eq(write(fds[1], "x", 1), 1);
  readable =
      event_new(base, fds[0], EV_READ | EV_PERSIST, defer_each_iteration, NULL);
  cr_assert_not_null(readable);
  cr_assert_eq(event_add(readable, NULL), 0);
  for (int i = 0; i < RING; i++) {
    probe_init(&ring[i], 100 + i, 0);
    ring[i].then = deferred_ran;
  }
  ring_calls = adds = waiting_added = 0;
  iteration = 0;
  probe_init(&y, 1, 0);
  waiting = &y;
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(y.calls, 1);
  cr_assert_lt(y.at[0] - y.due, LATE_OK, "held back %lld ms by the adds",
               (long long)((y.at[0] - y.due) / MS));
  cr_assert_eq(ring_calls, adds, "a deferred timer was lost");
  event_free(readable);
  evutil_closesocket(fds[0]);
  evutil_closesocket(fds[1]);
}

/* Added outside the loop, with the adapter's event not activated, a zero
 * timeout runs in the first iteration. */
Test(event, zero_timeout_added_before_the_loop_runs_in_its_first_iteration) {
  struct probe z;
  probe_init(&z, 1, 0);
  probe_add(&z, 0);
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert_eq(z.calls, 1);
}

/* After event_base_loopbreak the adapter's activated event waits for the
 * next dispatch; a zero timeout added meanwhile runs in that dispatch's
 * first iteration, with the timers due before it, as libevent's own does. */
static void plain_timer_breaks_the_loop(evutil_socket_t fd, short what,
                                        void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  event_base_loopbreak(base);
}

static int plain_zero_calls;
static void count_plain_zero(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  plain_zero_calls++;
}

Test(event, zero_timeout_added_after_a_loopbreak_runs_in_the_next_dispatch) {
  struct probe t, z;
  struct timeval four = {0, 4000}, zero = {0, 0};
  struct event *breaker = evtimer_new(base, plain_timer_breaks_the_loop, NULL);
  struct event *plain = evtimer_new(base, count_plain_zero, NULL);
  probe_init(&t, 1, 0);
  probe_init(&z, 2, 0);
  plain_zero_calls = 0;
  evtimer_add(breaker, &four); /* runs first, before the adapter's event */
  probe_add(&t, 5000);
  sleep_ns(20 * MS); /* both due: activated in the same iteration */
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert(event_base_got_break(base));
  cr_assert_eq(t.calls, 0, "the break came first");
  probe_add(&z, 0);
  evtimer_add(plain, &zero);
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert_eq(plain_zero_calls, 1);
  cr_assert_eq(t.calls, 1);
  cr_assert_eq(z.calls, 1, "libevent's own ran, the adapter's did not");
  event_free(breaker);
  event_free(plain);
}

/* The same break, from a plain timer that first adds a zero timeout (Y):
 * the adapter's event is activated behind it, so Y is fenced out of that
 * wakeup. The break leaves the wakeup to the next dispatch, where Y and a
 * zero timeout added after the break (Z) run, as libevent's own would. (A
 * fence that outlived the break held both back one more dispatch.) */
static struct probe *added_before_the_break;
static void plain_timer_adds_zero_then_breaks(evutil_socket_t fd, short what,
                                              void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  probe_add(added_before_the_break, 0);
  event_base_loopbreak(base);
}

Test(event, a_loopbreak_ends_the_fence_of_a_zero_timeout_added_before_it) {
  struct probe t, y, z;
  struct timeval four = {0, 4000};
  struct event *breaker =
      evtimer_new(base, plain_timer_adds_zero_then_breaks, NULL);
  probe_init(&t, 1, 0);
  probe_init(&y, 2, 0);
  probe_init(&z, 3, 0);
  added_before_the_break = &y;
  evtimer_add(breaker, &four); /* runs first, before the adapter's event */
  probe_add(&t, 5000);
  sleep_ns(20 * MS); /* both due: activated in the same iteration */
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert(event_base_got_break(base));
  cr_assert_eq(t.calls + y.calls, 0, "the break came first");
  probe_add(&z, 0);
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert_eq(t.calls, 1);
  cr_assert_eq(y.calls, 1, "Y was held back past the break");
  cr_assert_eq(z.calls, 1);
  event_free(breaker);
}

/* After a loopbreak from a tw_ev_timer callback, the timers due with it
 * run at the next dispatch before the I/O callbacks that dispatch polls,
 * as libevent's activated events do: B, then the socket's callback. (The
 * adapter's event was added again with a zero timeout, which libevent
 * activates after the poll: the socket's callback ran first.) */
static int io_calls;
static void record_io(evutil_socket_t fd, short what, void *arg) {
  char c;
  (void)what;
  (void)arg;
  cr_assert_eq(read(fd, &c, 1), 1);
  io_calls++;
  if (order_len < 64)
    order[order_len++] = 99;
}

Test(event, after_a_loopbreak_the_timers_left_run_before_the_next_poll_s_io) {
  static struct probe a, b; /* the adapter outlives a failed assertion */
  int sv[2];
  struct event *io;
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  io = event_new(base, sv[0], EV_READ | EV_PERSIST, record_io, NULL);
  cr_assert_eq(event_add(io, NULL), 0);
  probe_init(&a, 1, 0);
  probe_init(&b, 2, 0);
  a.then = break_loop;
  probe_add(&a, 1000);
  probe_add(&b, 2000);
  order_len = io_calls = 0;
  sleep_ns(10 * MS); /* both due at the first wakeup */
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert(event_base_got_break(base));
  cr_assert_eq(order_len, 1);
  cr_assert_eq(write(sv[1], "x", 1), 1); /* readable at the next poll */
  cr_assert_geq(event_base_loop(base, EVLOOP_ONCE), 0);
  cr_assert_eq(order_len, 3, "%d callbacks", order_len);
  cr_assert_eq(order[1], 2, "B first, then the socket's callback");
  cr_assert_eq(order[2], 99);
  event_free(io);
  close(sv[0]);
  close(sv[1]);
}

/* A zero timeout runs at the next loop iteration when the adapter's event
 * waits for a deadline CLOCK_MONOTONIC has just passed: libevent measures
 * the event's wait with its coarse clock, up to a tick behind, and would
 * run it only once that clock got there. T is added for 1 ms; as soon as
 * the precise clock reaches T's ms, Z is added with a zero timeout, and
 * one non-blocking iteration runs both, T first. (Z waited for libevent's
 * clock: in almost every run, none ran.) */
Test(event,
     a_zero_timeout_runs_at_the_next_iteration_ahead_of_the_coarse_clock) {
  static struct probe t, z; /* the adapter outlives a failed assertion */
  int64_t before, after, t_ms;
  probe_init(&t, 1, 0);
  probe_init(&z, 2, 0);
  order_len = 0;
  do { /* the add reads the clock too: within one ms, T's ms is known */
    before = mono_ns();
    probe_add(&t, 1000);
    after = mono_ns();
  } while (before / MS != after / MS);
  t_ms = after / MS + 2; /* T's expiry, in (after's ms + 1, + 2], rounded up */
  while (mono_ns() < t_ms * MS)
    ;
  probe_add(&z, 0);
  cr_assert_geq(event_base_loop(base, EVLOOP_NONBLOCK), 0);
  cr_assert_eq(order_len, 2, "%d callbacks", order_len);
  cr_assert_eq(order[0], 1);
  cr_assert_eq(order[1], 2);
}

/* --- free from inside callbacks (libevent's test_event_free_*) ----------- */

static struct probe *later_probe;
static void free_adapter(struct probe *p) {
  (void)p;
  tw_ev_free(d);
  tw_ev_free(d); /* a second call while deferred is a no-op */
  cr_assert_eq(tw_ev_timer_add(&later_probe->t, &(struct timeval){0, 1000}), -1,
               "adds after tw_ev_free give -1");
  cr_assert_eq(tw_ev_timer_pending(&later_probe->t, NULL), 0);
  cr_assert_null(tw_ev_wheel(d));
  tw_stats s;
  cr_assert_eq(tw_ev_stats(d, &s), -1);
  tw_ev_timer fresh;
  cr_assert_eq(tw_ev_timer_assign(&fresh, d, 0, probe_cb, NULL), -1,
               "assigns after tw_ev_free give -1");
}

Test(event, free_adapter_inside_a_callback_no_other_timer_runs) {
  struct probe a, b, c;
  tw_ev_timer *heap_timer;
  probe_init(&a, 1, EV_PERSIST);
  probe_init(&b, 2, 0);
  probe_init(&c, 3, 0);
  heap_timer = tw_ev_timer_new(d, 0, probe_cb, &c);
  cr_assert_not_null(heap_timer);
  a.then = free_adapter;
  later_probe = &c;
  probe_add(&a, 1000);
  probe_add(&b, 2000); /* due in the same wakeup */
  probe_add(&c, 40000);
  cr_assert_eq(tw_ev_timer_add(heap_timer, &(struct timeval){0, 2000}), 0);
  sleep_ns(10 * MS);
  cr_assert_eq(event_base_dispatch(base), 1, "the event went with the adapter");
  d = NULL;
  cr_assert_eq(a.calls, 1);
  cr_assert_eq(b.calls, 0);
  cr_assert_eq(c.calls, 0);
  /* Timers of a freed adapter: inactive, del/pending/free are safe. */
  cr_assert_eq(tw_ev_timer_pending(&a.t, NULL), 0);
  cr_assert_eq(tw_ev_timer_del(&b.t), 0);
  tw_ev_timer_free(heap_timer);
}

Test(event, free_adapter_outside_callbacks_never_calls_its_timers) {
  struct probe a;
  probe_init(&a, 1, 0);
  probe_add(&a, 1000);
  tw_ev_free(d);
  d = NULL;
  sleep_ns(5 * MS);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(a.calls, 0);
  cr_assert_eq(tw_ev_timer_del(&a.t), 0);
}

static int self_free_calls;
static void free_self_cb(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  self_free_calls++;
  tw_ev_timer_free(*(tw_ev_timer **)arg);
}

static tw_ev_timer *doomed;
static int doomed_calls;
static void doomed_cb(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  doomed_calls++;
}
static void free_doomed(evutil_socket_t fd, short what, void *arg) {
  free_self_cb(fd, what, arg);
  tw_ev_timer_free(doomed); /* due in this same wakeup, not yet run */
  doomed = NULL;
}

Test(event, free_timer_inside_its_own_or_another_callback) {
  tw_ev_timer *one, *per, *killer;
  one = tw_ev_timer_new(d, 0, free_self_cb, &one);
  per = tw_ev_timer_new(d, EV_PERSIST, free_self_cb, &per);
  killer = tw_ev_timer_new(d, 0, free_doomed, &killer);
  doomed = tw_ev_timer_new(d, 0, doomed_cb, NULL);
  cr_assert(one && per && killer && doomed);
  cr_assert_eq(tw_ev_timer_add(one, &(struct timeval){0, 2000}), 0);
  cr_assert_eq(tw_ev_timer_add(per, &(struct timeval){0, 3000}), 0);
  cr_assert_eq(tw_ev_timer_add(killer, &(struct timeval){0, 1000}), 0);
  cr_assert_eq(tw_ev_timer_add(doomed, &(struct timeval){0, 1500}), 0);
  sleep_ns(10 * MS);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(self_free_calls, 3,
               "each freed itself once; the persistent "
               "one is not called again");
  cr_assert_eq(doomed_calls, 0);
  cr_assert_eq(tw_count(tw_ev_wheel(d)), 0);
}

/* The adapter's event is due in the same iteration as a higher-priority
 * libevent callback that frees the adapter: its activation is dropped. */
static void free_adapter_from_libevent(evutil_socket_t fd, short what,
                                       void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  tw_ev_free(d);
  d = NULL;
}

Test(event, free_adapter_from_another_callback_while_its_event_is_due) {
  struct probe t;
  struct timeval one = {0, 1000};
  tw_ev_free(d);
  cr_assert_eq(event_base_priority_init(base, 2), 0);
  d = tw_ev_new(base);
  probe_init(&t, 1, 0);
  struct event *high = evtimer_new(base, free_adapter_from_libevent, NULL);
  event_priority_set(high, 0);
  probe_add(&t, 1000);
  evtimer_add(high, &one);
  sleep_ns(10 * MS);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_null(d);
  cr_assert_eq(t.calls, 0);
  event_free(high);
}

Test(event, two_adapters_on_one_base_are_independent) {
  tw_ev *d2 = tw_ev_new(base);
  struct probe a, b;
  probe_init(&a, 1, 0);
  memset(&b, 0, sizeof b);
  b.id = 2;
  cr_assert_eq(tw_ev_timer_assign(&b.t, d2, 0, probe_cb, &b), 0);
  probe_add(&a, 10000);
  probe_add(&b, 20000);
  cr_assert_eq(timeout_events(), 2, "one event per adapter");
  order_len = 0;
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(order_len, 2);
  cr_assert_eq(order[0], 1);
  cr_assert_eq(order[1], 2);
  tw_stats s;
  cr_assert_eq(tw_ev_stats(d2, &s), 0);
  cr_assert_eq(s.fired, 1);
  tw_ev_free(d2);
}

/* --- one event per base, counters ---------------------------------------- */

static void never_cb(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  cr_assert_fail("must not run");
}

Test(event, ten_thousand_timers_add_exactly_one_event_to_the_base) {
  enum { N = 10000 };
  tw_ev_timer *t = calloc(N, sizeof *t);
  cr_assert_not_null(t);
  cr_assert_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
  srand(3);
  for (int i = 0; i < N; i++) {
    struct timeval tv = tv_us(1000000 + rand() % 9000000);
    cr_assert_eq(
        tw_ev_timer_assign(&t[i], d, i % 2 ? EV_PERSIST : 0, never_cb, NULL),
        0);
    cr_assert_eq(tw_ev_timer_add(&t[i], &tv), 0);
  }
  cr_assert_eq(tw_count(tw_ev_wheel(d)), N);
  cr_assert_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 1);
  cr_assert_eq(timeout_events(), 1);
  /* Idle resets (later deadlines) leave the event alone. */
  uint64_t rearms = stats().rearms;
  for (int r = 0; r < 5; r++)
    for (int i = 0; i < N; i++)
      cr_assert_eq(tw_ev_timer_add(&t[i], &(struct timeval){12 + r, 0}), 0);
  cr_assert_eq(stats().rearms, rearms, "a later add must not touch libevent");
  for (int i = 0; i < N; i++)
    cr_assert_eq(tw_ev_timer_del(&t[i]), 0);
  cr_assert_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
  cr_assert_eq(event_base_dispatch(base), 1);
  free(t);
}

Test(event, earlier_add_rearms_later_add_does_not) {
  struct probe a, b;
  probe_init(&a, 1, 0);
  probe_init(&b, 2, 0);
  probe_add(&a, 100000);
  cr_assert_eq(stats().rearms, 1);
  probe_add(&a, 200000); /* later */
  probe_add(&b, 300000); /* later than armed */
  cr_assert_eq(stats().rearms, 1);
  probe_add(&b, 50000); /* earlier than armed */
  cr_assert_eq(stats().rearms, 2);
  tw_ev_timer_del(&a.t);
  cr_assert_eq(stats().rearms, 2, "a del that leaves timers: lazy");
  tw_ev_timer_del(&b.t);
  cr_assert_eq(stats().rearms, 3, "the last del deletes the event");
}

Test(event, counters_count_wakeups_empty_wakeups_and_fired) {
  struct probe a, b, c;
  probe_init(&a, 1, 0);
  probe_init(&b, 2, 0);
  probe_init(&c, 3, 0);
  probe_add(&a, 10000);
  probe_add(&b, 40000);
  probe_add(&c, 40000);
  tw_ev_timer_del(&a.t); /* the event stays armed for 10 ms: lazy */
  cr_assert_eq(event_base_dispatch(base), 1);
  tw_stats s = stats();
  cr_assert_eq(s.fired, 2);
  cr_assert_geq(s.empty_wakeups, 1, "the wakeup at 10 ms found nothing");
  cr_assert_geq(s.wakeups, s.empty_wakeups + 1);
  cr_assert_leq(s.wakeups - s.empty_wakeups, 2);
  cr_assert_geq(s.rearms, 2);
}

/* A plain libevent callback that spins 30 ms and then adds a 20 ms timer:
 * libevent counts an add from inside a callback from the time it cached
 * when the iteration began, 30 ms old, so the adapter brings that cache up
 * to date first; else the loop would wake 10 ms before the timer is due,
 * for nothing. */
static void noop_cb(evutil_socket_t fd, short what, void *arg);
static struct probe *slow_added;
static struct event *after_slow;
static void spin_then_add(evutil_socket_t fd, short what, void *arg) {
  struct timeval zero = {0, 0};
  (void)fd;
  (void)what;
  (void)arg;
  spin_ns(30 * MS);
  probe_add(slow_added, 20000);
  evtimer_add(after_slow, &zero); /* one more iteration, at once */
}

Test(event, an_add_from_a_slow_callback_wakes_the_loop_once_when_due) {
  struct probe p;
  struct timeval zero = {0, 0};
  struct event *slow = evtimer_new(base, spin_then_add, NULL);
  after_slow = evtimer_new(base, noop_cb, NULL);
  probe_init(&p, 1, 0);
  slow_added = &p;
  evtimer_add(slow, &zero);
  cr_assert_eq(event_base_dispatch(base), 1);
  cr_assert_eq(p.calls, 1);
  tw_stats s = stats();
  cr_assert_eq(s.empty_wakeups + s.maintenance, 0,
               "woke %llu times for nothing",
               (unsigned long long)(s.empty_wakeups + s.maintenance));
  cr_assert_eq(s.wakeups, 1);
  event_free(slow);
  event_free(after_slow);
}

/* --- arguments ------------------------------------------------------------ */

static void noop_cb(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
}

Test(event, bad_arguments_give_minus_one_and_change_nothing) {
  tw_ev_timer t, zeroed;
  struct timeval tv = {1, 0};
  tw_stats s;
  memset(&zeroed, 0, sizeof zeroed);
  cr_assert_null(tw_ev_new(NULL));
  tw_ev_free(NULL);
  cr_assert_null(tw_ev_wheel(NULL));
  cr_assert_eq(tw_ev_stats(NULL, &s), -1);
  cr_assert_eq(tw_ev_stats(d, NULL), -1);
  cr_assert_eq(tw_ev_timer_assign(NULL, d, 0, noop_cb, NULL), -1);
  cr_assert_eq(tw_ev_timer_assign(&t, NULL, 0, noop_cb, NULL), -1);
  cr_assert_eq(tw_ev_timer_assign(&t, d, 0, NULL, NULL), -1);
  cr_assert_eq(tw_ev_timer_assign(&t, d, EV_READ, noop_cb, NULL), -1);
  cr_assert_eq(tw_ev_timer_assign(&t, d, EV_SIGNAL | EV_PERSIST, noop_cb, NULL),
               -1);
  cr_assert_eq(
      tw_ev_timer_assign(&t, d, EV_TIMEOUT | EV_PERSIST, noop_cb, NULL), 0);
  cr_assert_null(tw_ev_timer_new(NULL, 0, noop_cb, NULL));
  cr_assert_null(tw_ev_timer_new(d, EV_WRITE, noop_cb, NULL));
  cr_assert_null(tw_ev_timer_new(d, 0, NULL, NULL));
  tw_ev_timer_free(NULL);
  cr_assert_eq(tw_ev_timer_add(NULL, &tv), -1);
  cr_assert_eq(tw_ev_timer_add(&zeroed, &tv), -1, "never assigned");
  cr_assert_eq(tw_ev_timer_del(NULL), -1);
  cr_assert_eq(tw_ev_timer_del(&zeroed), 0);
  cr_assert_eq(tw_ev_timer_pending(NULL, &tv), 0);
  cr_assert_eq(tw_ev_timer_pending(&zeroed, NULL), 0);
  cr_assert_eq(tw_count(tw_ev_wheel(d)), 0);
  cr_assert_eq(timeout_events(), 0);
}

Test(event, odd_timevals_saturate_or_normalise) {
  tw_ev_timer huge, carry;
  struct timeval tv;
  cr_assert_eq(tw_ev_timer_assign(&huge, d, EV_PERSIST, never_cb, NULL), 0);
  cr_assert_eq(tw_ev_timer_assign(&carry, d, 0, never_cb, NULL), 0);
  tv.tv_sec = (time_t)INT64_MAX;
  tv.tv_usec = 999999;
  cr_assert_eq(tw_ev_timer_add(&huge, &tv), 0);
  cr_assert(tw_ev_timer_pending(&huge, &tv));
  cr_assert_gt(tv.tv_sec, (time_t)(wall_us() / 1000000 + 100LL * 365 * 86400),
               "saturated far in the future");
  tv.tv_sec = 1;
  tv.tv_usec = 1500000; /* 2.5 s */
  int64_t w0 = wall_us();
  cr_assert_eq(tw_ev_timer_add(&carry, &tv), 0);
  cr_assert(tw_ev_timer_pending(&carry, &tv));
  cr_assert_geq(tv_wall_us(&tv), w0 + 2500000 - 100);
  cr_assert_lt(tv_wall_us(&tv), w0 + 2500000 + 50000);
  tw_ev_timer_del(&huge);
  tw_ev_timer_del(&carry);
  cr_assert_eq(event_base_dispatch(base), 1);
}

/* Out-of-range timevals normalise as libevent's arithmetic would read them:
 * the expiry pending reports is the add time plus what they stand for. */
Test(event, odd_timevals_stand_for_their_normalised_duration) {
  static const struct {
    long long sec, usec, want_us; /* want -1: saturated */
  } cases[] = {
      {1, -500000, 500000},           /* negative usec borrows a second */
      {-1, 1500000, 500000},          /* usec carries into negative sec */
      {-3, 1000000, 0},               /* still negative after the carry */
      {0, -1, 0},                     /* negative overall */
      {0, 0x60000005, 1610612741},    /* not a common-timeout token */
      {INT64_MAX, 2000000, -1},       /* the carry overflows: saturated */
      {INT64_MAX / 1000000000, 0, -1} /* too many ns: saturated */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tw_ev_timer t;
    struct timeval tv, at;
    tv.tv_sec = (time_t)cases[i].sec;
    tv.tv_usec = (suseconds_t)cases[i].usec;
    cr_assert_eq(tw_ev_timer_assign(&t, d, 0, never_cb, NULL), 0);
    int64_t before = wall_us();
    cr_assert_eq(tw_ev_timer_add(&t, &tv), 0, "case %zu", i);
    cr_assert(tw_ev_timer_pending(&t, &at));
    int64_t after = wall_us();
    if (cases[i].want_us < 0) {
      cr_assert_gt(at.tv_sec, (time_t)(after / 1000000 + 100LL * 365 * 86400),
                   "case %zu: not saturated", i);
    } else {
      cr_assert_geq(tv_wall_us(&at) - before, cases[i].want_us - 2,
                    "case %zu: %lld us", i,
                    (long long)(tv_wall_us(&at) - before));
      cr_assert_leq(tv_wall_us(&at) - after, cases[i].want_us, "case %zu", i);
    }
    cr_assert_eq(tw_ev_timer_del(&t), 0);
  }
  cr_assert_eq(event_base_dispatch(base), 1);
}

/* --- stress: 20,000 timers adding and deleting each other --------------- */

enum { STRESS_N = 20000 };

struct stress {
  tw_ev_timer t;
  int pending; /* the model */
  int persist;
  int calls;
  int64_t due;    /* earliest allowed next call */
  int64_t period; /* ns, persistent timers */
};

static struct stress *st;
static uint64_t rng, seed;
static long budget, lives, ended_by_fire, ended_by_del, calls_total;

static uint32_t next_rand(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (uint32_t)((rng * 2685821657736338717ULL) >> 32);
}

static void stress_add(struct stress *s) {
  long long us = s->persist ? 1000 + next_rand() % 49001 : next_rand() % 50001;
  struct timeval tv = tv_us(us);
  if (!s->pending)
    lives++;
  s->pending = 1;
  s->due = mono_ns() + us * 1000;
  s->period = us * 1000;
  cr_assert_eq(tw_ev_timer_add(&s->t, &tv), 0);
}

static void stress_del(struct stress *s) {
  if (s->pending)
    ended_by_del++;
  s->pending = 0;
  cr_assert_eq(tw_ev_timer_del(&s->t), 0);
}

static void stress_cb(evutil_socket_t fd, short what, void *arg) {
  struct stress *s = arg;
  int64_t now = mono_ns();
  (void)fd;
  (void)what;
  cr_assert(s->pending, "timer %ld called while not pending (seed %llu)",
            (long)(s - st), (unsigned long long)seed);
  cr_assert_geq(now, s->due, "timer %ld early by %lld ns (seed %llu)",
                (long)(s - st), (long long)(s->due - now),
                (unsigned long long)seed);
  s->calls++;
  calls_total++;
  cr_assert_eq(!!tw_ev_timer_pending(&s->t, NULL), s->persist);
  if (s->persist) {
    s->due += s->period; /* the next call is at least a period later */
    if (s->calls % 3 == 0)
      stress_del(s);
  } else {
    s->pending = 0;
    ended_by_fire++;
  }
  /* Touch two random timers: re-add one, delete or check another. */
  if (budget > 0) {
    budget--;
    stress_add(&st[next_rand() % STRESS_N]);
  }
  struct stress *o = &st[next_rand() % STRESS_N];
  if (next_rand() % 3 == 0)
    stress_del(o);
  else
    cr_assert_eq(!!tw_ev_timer_pending(&o->t, NULL), o->pending);
}

Test(event, stress_20000_timers_adding_and_deleting_each_other, .timeout = 60) {
  seed = (uint64_t)mono_ns() | 1;
  if (getenv("TW_SEED"))
    seed = strtoull(getenv("TW_SEED"), NULL, 10);
  rng = seed;
  st = calloc(STRESS_N, sizeof *st);
  cr_assert_not_null(st);
  budget = 2 * STRESS_N;
  for (int i = 0; i < STRESS_N; i++) {
    st[i].persist = i % 10 == 0;
    cr_assert_eq(tw_ev_timer_assign(&st[i].t, d, st[i].persist ? EV_PERSIST : 0,
                                    stress_cb, &st[i]),
                 0);
    stress_add(&st[i]);
  }
  cr_assert_eq(timeout_events(), 1);
  cr_assert_eq(event_base_dispatch(base), 1);
  for (int i = 0; i < STRESS_N; i++)
    cr_assert_eq(st[i].pending, 0, "timer %d still pending (seed %llu)", i,
                 (unsigned long long)seed);
  cr_assert_eq(lives, ended_by_fire + ended_by_del,
               "every add accounted for: %ld lives, %ld fired, %ld deleted "
               "(seed %llu)",
               lives, ended_by_fire, ended_by_del, (unsigned long long)seed);
  cr_assert_eq(budget, 0);
  tw_stats s = stats();
  cr_assert_eq(s.fired, (uint64_t)calls_total);
  cr_assert_eq(tw_count(tw_ev_wheel(d)), 0);
  cr_assert_eq(timeout_events(), 0);
  free(st);
}

/* --- an idle reaper on real sockets --------------------------------------- */

struct conn {
  struct bufferevent *bev;
  tw_ev_timer idle;
  int64_t last; /* CLOCK_MONOTONIC before the latest idle-timer add */
  int reaped;
  int64_t reaped_at;
};

static struct conn server_conns[2];
static int accepted;
static const struct timeval idle_tv = {0, 100000}; /* 100 ms */

static void conn_touch(struct conn *c) {
  c->last = mono_ns();
  cr_assert_eq(tw_ev_timer_add(&c->idle, &idle_tv), 0);
}

static void conn_read(struct bufferevent *bev, void *arg) {
  struct evbuffer *in = bufferevent_get_input(bev);
  evbuffer_drain(in, evbuffer_get_length(in));
  conn_touch(arg);
}

static void conn_reap(evutil_socket_t fd, short what, void *arg) {
  struct conn *c = arg;
  (void)fd;
  (void)what;
  c->reaped_at = mono_ns();
  cr_assert_geq(c->reaped_at, c->last + 100 * MS, "reaped early");
  c->reaped = 1;
  bufferevent_free(c->bev);
  c->bev = NULL;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int len, void *arg) {
  (void)l;
  (void)sa;
  (void)len;
  (void)arg;
  cr_assert_lt(accepted, 2);
  struct conn *c = &server_conns[accepted++];
  c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
  bufferevent_setcb(c->bev, conn_read, NULL, NULL, c);
  bufferevent_enable(c->bev, EV_READ);
  cr_assert_eq(tw_ev_timer_assign(&c->idle, d, 0, conn_reap, c), 0);
  conn_touch(c);
}

static int chatty_fd;
static int chats;
static void chat(struct probe *p) {
  if (write(chatty_fd, "x", 1) != 1)
    cr_assert_fail("write");
  if (++chats == 15) {
    tw_ev_timer_del(&p->t);
    event_base_loopexit(base, NULL);
  }
}

Test(event, idle_tcp_connection_is_reaped_and_chatty_one_kept) {
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct evconnlistener *l = evconnlistener_new_bind(
      base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
      (struct sockaddr *)&sin, sizeof sin);
  cr_assert_not_null(l);
  getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&sin, &len);
  int fds[2];
  for (int i = 0; i < 2; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_eq(connect(fds[i], (struct sockaddr *)&sin, sizeof sin), 0);
    while (accepted <= i)
      event_base_loop(base, EVLOOP_ONCE);
  }
  /* Client 0 stays silent; client 1 writes every 20 ms for 300 ms. */
  struct probe ticker;
  chatty_fd = fds[1];
  probe_init(&ticker, 1, EV_PERSIST);
  ticker.then = chat;
  probe_add(&ticker, 20000);
  event_base_dispatch(base);
  cr_assert_eq(chats, 15);
  cr_assert(server_conns[0].reaped, "the idle connection was not reaped");
  cr_assert_lt(server_conns[0].reaped_at - server_conns[0].last,
               100 * MS + LATE_OK);
  cr_assert_eq(server_conns[1].reaped, 0, "the chatty connection was reaped");
  char byte;
  cr_assert_eq(read(fds[0], &byte, 1), 0, "the client sees the server close");
  tw_ev_timer_del(&server_conns[1].idle);
  bufferevent_free(server_conns[1].bev);
  evconnlistener_free(l);
  close(fds[0]);
  close(fds[1]);
}
