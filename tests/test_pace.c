/*
 * Bounded work per advance (the paced drains of src/pace.c), with 1e5
 * timers and virtual time: exact firing while the wheel crosses the points
 * where a wheel filing by absolute digits re-files every timer at once
 * (2^12, 2^18, 2^24, 2^30), counted moves per advance, work budgets, and
 * maintenance wakeups for a loop that sleeps. Counts, never times.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>

#include <twheel.h>

enum { N = 100000, IDLE = 30000 };

struct conn {
  tw_timer timer;
  uint64_t due;   /* the deadline the test asked for */
  uint32_t fired; /* callbacks run */
};

static struct conn *conns;
static tw_wheel *wheel;
static uint64_t fired, early, late, order_errors;
static uint64_t last_deadline; /* of the previous callback in this advance */
static int restart;            /* callbacks re-arm their idle timeout */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1du;
}

static uint64_t below(uint64_t n) {
  return rnd() % n;
}

static void on_idle(tw_timer *t) {
  struct conn *c = t->data;
  uint64_t now = tw_now(wheel);
  c->fired++;
  fired++;
  early += now < c->due;
  late += now > c->due;
  order_errors += c->due < last_deadline;
  last_deadline = c->due;
  if (restart) {
    c->due = now + IDLE;
    cr_assert_eq(tw_timer_start(wheel, t, on_idle, IDLE, 0), 0);
  }
}

static void setup(void) {
  conns = calloc(N, sizeof *conns);
  cr_assert_not_null(conns);
  for (size_t i = 0; i < N; i++) {
    tw_timer_init(&conns[i].timer);
    conns[i].timer.data = &conns[i];
  }
  fired = early = late = order_errors = 0;
  restart = 0;
}

static void teardown(void) {
  tw_wheel_free(wheel);
  wheel = NULL;
  free(conns);
}

TestSuite(pace, .init = setup, .fini = teardown);

static void start_at(struct conn *c, uint64_t deadline) {
  c->due = deadline;
  cr_assert_eq(tw_timer_start_at(wheel, &c->timer, on_idle, deadline, 0), 0);
}

/* tw_advance(wheel, now, TW_ALL): the timers it moved. */
static uint64_t moved_by_advance(uint64_t now) {
  uint64_t moves = tw_moves(wheel);
  last_deadline = 0;
  tw_advance(wheel, now, TW_ALL);
  return tw_moves(wheel) - moves;
}

/* One tick of the idle-timeout steady state: advance by one, then reset
 * N/10000 random connections (each one every ~10 s at 1 ms ticks).
 * Returns the timers the advance moved. */
static uint64_t tick(uint64_t now) {
  uint64_t moves = moved_by_advance(now);
  for (int k = 0; k < N / 10000; k++) {
    struct conn *c = &conns[below(N)];
    c->due = now + IDLE;
    cr_assert_eq(tw_timer_start(wheel, &c->timer, on_idle, IDLE, 0), 0);
  }
  return moves;
}

/*
 * The stall scenario around `edge`: N idle timeouts of 30 s whose last
 * activity is uniform over the past 30 s, 10 resets per tick, fired timers
 * restart; 30 s of warm-up, then 12,288 one-tick advances centred on the
 * edge. Every callback must run at exactly its deadline, and no advance may
 * move more than 0.1% of the timers: a wheel that re-files by absolute
 * digits moves all of them at 2^18 and 2^24.
 */
static void cross(uint64_t edge) {
  const uint64_t window = 12288;
  /* Below 2^15 there is no room for the warm-up: measure from the start. */
  const uint64_t t0 = edge > IDLE + window / 2 ? edge - IDLE - window / 2 : 0;
  const uint64_t from = edge > t0 + window / 2 ? edge - window / 2 : t0 + 1;
  uint64_t max_moves = 0, moves = 0;

  wheel = tw_wheel_new(t0);
  cr_assert_not_null(wheel);
  restart = 1;
  for (size_t i = 0; i < N; i++)
    start_at(&conns[below(N)], t0 + 1 + below(IDLE)); /* a few restart */
  for (size_t i = 0; i < N; i++)
    if (!tw_timer_is_active(&conns[i].timer))
      start_at(&conns[i], t0 + 1 + below(IDLE));
  for (uint64_t now = t0 + 1; now < from; now++)
    tick(now);
  for (uint64_t now = from; now <= edge + window / 2; now++) {
    uint64_t m = tick(now);
    moves += m;
    if (m > max_moves)
      max_moves = m;
  }
  cr_assert_eq(early, 0, "%llu callbacks before their deadline",
               (unsigned long long)early);
  cr_assert_eq(late, 0, "%llu callbacks after their deadline",
               (unsigned long long)late);
  cr_assert_leq(max_moves, N / 1000,
                "an advance moved %llu timers (%.1f per advance on average)",
                (unsigned long long)max_moves, (double)moves / window);
  cr_assert_gt(moves, 0, "nothing moved: the scenario did not run");

  /* Each armed timer fires once more, at its deadline, and none is lost. */
  restart = 0;
  fired = 0;
  last_deadline = 0;
  tw_advance(wheel, edge + window + 2 * IDLE, TW_ALL);
  cr_assert_eq(fired, N);
  cr_assert_eq(tw_count(wheel), 0);
  cr_assert_eq(order_errors, 0);
}

Test(pace, rule1_exact_and_bounded_moves_across_2_pow_12, .timeout = 60) {
  cross((uint64_t)1 << 12);
}

Test(pace, rule1_exact_and_bounded_moves_across_2_pow_18, .timeout = 60) {
  cross((uint64_t)1 << 18);
}

Test(pace, rule1_exact_and_bounded_moves_across_2_pow_24, .timeout = 60) {
  cross((uint64_t)1 << 24);
}

Test(pace, rule1_exact_and_bounded_moves_across_2_pow_30, .timeout = 60) {
  cross((uint64_t)1 << 30);
}

/*
 * A budget bounds all the work of an advance: N timers due at once (spread
 * over 30 s of deadlines, started in random order), one jump past all of
 * them, taken a slice of 1000 units at a time. Each slice moves and runs at
 * most that much, callbacks run in deadline order and never early, and
 * tw_next_wakeup says "now" until everything has run.
 */
Test(pace, a_sliced_advance_bounds_its_work_and_fires_in_order, .timeout = 60) {
  const uint64_t now = 2 * IDLE;
  size_t slices = 0;

  wheel = tw_wheel_new(0);
  cr_assert_not_null(wheel);
  for (size_t i = 0; i < N; i++)
    start_at(&conns[i], 1 + below(IDLE));
  last_deadline = 0;
  while (fired < N) {
    uint64_t moves = tw_moves(wheel);
    size_t ran = tw_advance_slice(wheel, now, 1000);
    cr_assert_leq(ran + (tw_moves(wheel) - moves), 1000);
    cr_assert(fired == N || tw_next_wakeup(wheel) <= now,
              "work left after slice %zu, but tw_next_wakeup says %llu", slices,
              (unsigned long long)tw_next_wakeup(wheel));
    cr_assert_lt(++slices, 2 * N, "no progress");
  }
  cr_assert_eq(early, 0);
  cr_assert_eq(order_errors, 0);
  cr_assert_eq(tw_count(wheel), 0);
  cr_assert_eq(tw_next_wakeup(wheel), TW_NEVER);
  cr_assert_geq(slices, N / 1000, "%zu slices for %d timers", slices, N);
}

/* A timer that breaks every advance it runs in (libevent's loopbreak). */
static void on_break(tw_timer *t) {
  (void)t;
  tw_break(wheel);
}

/*
 * A loop that advances every `stride` ticks, in each of which `breakers`
 * callbacks (each due at every tick, as libevent timers that call
 * event_base_loopbreak) call tw_break(), pays the pace all the same: N
 * timers due within one level-2 block move down a few at a time, none
 * moved in a whole slot at once, and each fires, never early, in order.
 * Returns the timers that fired late.
 */
static uint64_t advance_with_breaks(int breakers, uint64_t stride) {
  const uint64_t first = (uint64_t)1 << 17, spread = (uint64_t)1 << 16;
  static tw_timer breaker[2]; /* the wheel outlives a failed assertion */
  uint64_t max_moves = 0, now;

  wheel = tw_wheel_new(0);
  cr_assert_not_null(wheel);
  for (size_t i = 0; i < N; i++)
    start_at(&conns[i], first + below(spread));
  for (int b = 0; b < breakers; b++) {
    tw_timer_init(&breaker[b]);
    cr_assert_eq(tw_timer_start(wheel, &breaker[b], on_break, 1, 1), 0);
  }
  for (now = stride; now <= first + spread; now += stride) {
    uint64_t moves = moved_by_advance(now);
    if (moves > max_moves)
      max_moves = moves;
  }
  for (int b = 0; b < breakers; b++)
    cr_assert_eq(tw_timer_stop(wheel, &breaker[b]), 0);
  while (tw_count(wheel) > 0) /* what the breaks left */
    moved_by_advance(now);
  cr_assert_eq(fired, N);
  cr_assert_eq(early, 0);
  cr_assert_eq(order_errors, 0);
  cr_assert_leq(max_moves, N / 1000, "an advance moved %llu timers",
                (unsigned long long)max_moves);
  return late;
}

/* One callback breaks at every tick: every timer still fires at its
 * deadline. (When a break skipped the pace, the advance at 2^17 moved all
 * N.) */
Test(pace, a_break_at_every_advance_leaves_the_pace_on_time, .timeout = 60) {
  cr_assert_eq(advance_with_breaks(1, 1), 0);
}

/* A break leaves pos behind now when it stops the advance at an earlier
 * tick: two callbacks that break at every tick (the first stops the
 * advance one tick short from then on), or one and a loop advancing every
 * other tick. The pace is paid at pos all the same; it was paid only when
 * pos had reached now, and the advance at 2^17 moved all N. The timers
 * run late, as a break allows (rule 1). */
Test(pace, breaks_that_leave_pos_behind_now_still_pay_the_pace, .timeout = 60) {
  advance_with_breaks(2, 1);
}

Test(pace, a_break_in_a_loop_advancing_every_other_tick_pays_the_pace,
     .timeout = 60) {
  advance_with_breaks(1, 2);
}

/* A loop that sleeps until tw_next_wakeup() and advances with no budget,
 * from `now` until the wheel is empty: every timer fires at its deadline,
 * no advance moves more than 4096 timers, and the advances that run no
 * callback (maintenance wakeups) number between the bounds given. */
static void sleep_until_empty(uint64_t now, uint64_t min_maintenance,
                              uint64_t max_maintenance) {
  uint64_t max_moves = 0, maintenance = 0, started = tw_count(wheel);

  while (tw_count(wheel) > 0) {
    uint64_t at = tw_next_wakeup(wheel), moves = tw_moves(wheel);
    size_t ran;
    cr_assert_leq(at, tw_next_expiry(wheel));
    cr_assert_geq(at, now, "a wakeup in the past with no work left");
    now = at;
    last_deadline = 0;
    ran = tw_advance(wheel, now, TW_ALL);
    maintenance += ran == 0;
    cr_assert_leq(maintenance, max_maintenance, "%llu maintenance wakeups",
                  (unsigned long long)maintenance);
    moves = tw_moves(wheel) - moves;
    if (moves > max_moves)
      max_moves = moves;
  }
  cr_assert_eq(fired, started);
  cr_assert_eq(early + late, 0);
  cr_assert_leq(max_moves, 4096, "an advance moved %llu timers",
                (unsigned long long)max_moves);
  cr_assert_geq(maintenance, min_maintenance, "%llu maintenance wakeups",
                (unsigned long long)maintenance);
}

/*
 * N timers due within `spread` ticks from `first` (and nothing before). The
 * wheel asks for a few maintenance wakeups shortly before each crowded
 * 256-tick stretch, so that no advance moves more than a few thousand
 * timers. A loop that slept until tw_next_expiry() instead would move all
 * N in the advance that fires the first of them.
 */
static void sleeping_loop(uint64_t base, uint64_t first, uint64_t spread,
                          uint64_t min_maintenance, uint64_t max_maintenance) {
  wheel = tw_wheel_new(base);
  cr_assert_not_null(wheel);
  for (size_t i = 0; i < N; i++)
    start_at(&conns[i], first + below(spread));
  sleep_until_empty(base, min_maintenance, max_maintenance);
}

Test(pace, a_sleeping_loop_wakes_for_paced_work_in_bounded_slices,
     .timeout = 60) {
  sleeping_loop(0, 60000, 256, N / 4096, N / 1000);
}

/* Crowded stretches behind a sparse one: every future source counts. Once
 * timers fire every tick, those advances carry the pace. */
Test(pace, a_sleeping_loop_looks_past_sparse_slots, .timeout = 60) {
  uint64_t base = (uint64_t)5 << 16;
  sleeping_loop(base, base + 1000, 3000, 1, N / 1000);
}

/* Deadlines 2^41 ticks away, whose sources span more than 2^32 ticks: the
 * pace's arithmetic must stay exact there, or the wheel asks for
 * maintenance wakeups at which nothing is owed yet, again and again. The
 * N timers come down from level 5, level by level, with a wakeup per 2048
 * moves or so while a source holds more than 2048 (down to level 2): at
 * most four passes, under N / 500 wakeups. */
Test(pace, a_sleeping_loop_far_from_its_timers_never_spins, .timeout = 60) {
  sleeping_loop(0, (uint64_t)1 << 41, 1 << 16, N / 2048, N / 500);
}

/*
 * Sources too small to ever owe TW_MAINTENANCE_MOVES (2048) at once: 2000
 * timers at three deadlines near 2^60, which come down from the top level.
 * Each level's source holds them all in turn, so one advance from the start
 * to their deadlines would move each down seven levels, 14,000 moves (as
 * it did before the pace woke for such sources at their deadlines). Then
 * eight clusters of 2500 far apart: once a maintenance wakeup has paid a
 * cluster's source down below 2048, what is left must still come down a
 * level at a time.
 */
Test(pace, a_sleeping_loop_brings_small_far_sources_down_a_level_at_a_time,
     .timeout = 60) {
  const uint64_t far = 0x1249249249249249u;
  wheel = tw_wheel_new(0);
  cr_assert_not_null(wheel);
  for (size_t i = 0; i < 2000; i++)
    start_at(&conns[i], far + i % 3);
  sleep_until_empty(0, 6, 40);

  for (size_t i = 0; i < 20000; i++)
    start_at(&conns[i],
             tw_now(wheel) + ((uint64_t)1 << 62) / (1 + i % 8) + below(4));
  fired = 0;
  sleep_until_empty(tw_now(wheel), 7 * 8,
                    400); /* a level per cluster at least */
}

/*
 * Timers that arrive after the wheel has run empty are paced like the
 * first ones: a server starts with no connection, then N arrive over one
 * second (N/1000 a tick), each with a 2 s idle timeout. The sources they
 * fill were empty when the pace last looked; the drains must still be
 * spread over the ticks before each source is due (no advance moves more
 * than a tick's share, where draining a whole 256-tick slot at once would
 * move 25,600), and a loop that has just advanced to `now` must never be
 * told to wake again at `now` with nothing to do (it would spin).
 */
Test(pace, timers_that_arrive_later_are_paced_and_never_spin, .timeout = 60) {
  const uint64_t t0 = 100, timeout = 2000;
  uint64_t max_moves = 0, now;
  size_t started = 0;

  wheel = tw_wheel_new(0);
  cr_assert_not_null(wheel);
  tw_advance(wheel, t0, TW_ALL); /* the pace finds nothing to pace */
  for (now = t0 + 1; tw_count(wheel) > 0 || started < N; now++) {
    uint64_t moves = moved_by_advance(now);
    if (moves > max_moves)
      max_moves = moves;
    for (size_t k = 0; k < N / 1000 && started < N; k++, started++)
      start_at(&conns[started], now + timeout);
    cr_assert_gt(tw_next_wakeup(wheel), now,
                 "at %llu, with nothing left to do, tw_next_wakeup says now",
                 (unsigned long long)now);
  }
  cr_assert_eq(fired, N);
  cr_assert_eq(early + late, 0);
  cr_assert_eq(order_errors, 0);
  cr_assert_leq(max_moves, N / 100, "an advance moved %llu timers",
                (unsigned long long)max_moves);
}

/*
 * The pace pays a source in batches (TW_PACE_BATCH in src/wheel.h, 16
 * moves), spread over its window: 1000 timers due at 1000 wait in the
 * level-1 slot of [768, 1023], which is drained while pos crosses
 * [512, 767] and must be empty by 767. One-tick advances: every advance
 * that moves timers moves a whole batch (the one at the window's end pays
 * what is left), the first pays as soon as a batch is owed, and all fire at
 * their deadline.
 */
Test(pace, a_source_is_paid_in_batches_over_its_window) {
  enum { TIMERS = 1000, BATCH = 16, WINDOW_START = 512, WINDOW_END = 767 };
  uint64_t first_paid = 0, moved_by_end = 0;

  wheel = tw_wheel_new(0);
  cr_assert_not_null(wheel);
  for (size_t i = 0; i < TIMERS; i++)
    start_at(&conns[i], 1000);
  for (uint64_t now = 1; now <= 1000; now++) {
    uint64_t moves = tw_moves(wheel);
    last_deadline = 0;
    tw_advance(wheel, now, TW_ALL);
    moves = tw_moves(wheel) - moves;
    if (moves == 0)
      continue;
    cr_assert(now > WINDOW_START && now <= WINDOW_END,
              "%llu moved at %llu, outside the window",
              (unsigned long long)moves, (unsigned long long)now);
    cr_assert(moves >= BATCH || now == WINDOW_END,
              "an advance at %llu paid %llu moves, less than a batch",
              (unsigned long long)now, (unsigned long long)moves);
    if (!first_paid)
      first_paid = now;
    moved_by_end += moves;
  }
  cr_assert_eq(moved_by_end, TIMERS);
  /* A batch is owed after 16/1000 of the 255-tick window: tick 517. */
  cr_assert_eq(first_paid, 517, "first paid at %llu",
               (unsigned long long)first_paid);
  cr_assert_eq(fired, TIMERS);
  cr_assert_eq(early + late, 0);
}
