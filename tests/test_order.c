/*
 * Firing order and what callbacks may do: rules 2, 5 and 6 of DESIGN.md.
 * Virtual time: exact.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "record.h"

TestSuite(order, .init = wheel_setup, .fini = wheel_teardown);

/*
 * Rule 1 across the sequence's wrap: a timer that waited while 2^46 starts
 * were made (sequences compare modulo 2^47; the starts are stood in for by
 * moving the next sequence on) still runs at its deadline, and so does the
 * timer behind it. (Every advance tested a fence at its own start, and
 * held that timer back as if started after it: nothing ran again.)
 */
Test(order, a_timer_older_than_2_46_starts_still_runs) {
  static struct probe p[2];
  probes_init(p, 2);
  start_at(&p[0], 1000);
  tw__head(wheel_)->next_seq += (uint64_t)1 << 46;
  start_at(&p[1], 2000);
  cr_assert_eq(tw_advance(wheel_, 1000, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_eq(tw_advance_slice(wheel_, 2000, TW_SLICE), 1);
  EXPECT_FIRED(1);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
}

/* Rule 2: deadline order within one advance, across levels. */
Test(order, rule2_one_advance_runs_callbacks_in_deadline_order) {
  static struct probe p[5];
  probes_init(p, 5);
  start(&p[0], 300000, 0); /* level 3 */
  start(&p[1], 5, 0);      /* level 0 */
  start(&p[2], 5000, 0);   /* level 2 */
  start(&p[3], 100, 0);    /* level 1 */
  start(&p[4], 4999, 0);   /* level 2, same slot as p[2] */
  cr_assert_eq(tw_advance(wheel_, 1000000, TW_ALL), 5);
  EXPECT_FIRED(1, 3, 4, 2, 0);
}

/* Rule 2 for a timer restarted earlier inside its slot, which keeps its
 * place in the slot (wheel.c, stays_in_slot): filed before B, C and D,
 * restarted after them for their deadline, A fires last. Four timers, so
 * that the slot reaches level 0 out of order and its collection sorts it;
 * once with the slot drained down tick by tick, once collected whole. */
Test(order, rule2_fifo_holds_for_a_timer_moved_earlier_inside_its_slot) {
  static struct probe p[4];
  for (uint64_t until = 800; until <= 2000; until += 1200) {
    wheel_teardown();
    wheel_setup();
    probes_init(p, 4);
    start_at(&p[0], 1010); /* A, the level-1 slot [768, 1024) */
    start_at(&p[1], 800);  /* B, C and D, the same slot */
    start_at(&p[2], 800);
    start_at(&p[3], 800);
    start_at(&p[0], 800); /* A again */
    cr_assert_eq(tw_advance(wheel_, until, TW_ALL), 4);
    EXPECT_FIRED(1, 2, 3, 0);
  }
}

/* Rule 2, libuv's timer_order: start A, B, C, restart A -> B, C, A. */
Test(order, rule2_equal_deadlines_fire_in_order_of_latest_start) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 50, 0);
  start(&p[1], 50, 0);
  start(&p[2], 50, 0);
  start(&p[0], 50, 0);
  cr_assert_eq(tw_advance(wheel_, 50, TW_ALL), 3);
  EXPECT_FIRED(1, 2, 0);
}

/* Rule 2 across levels: X waited in a higher level, Y went straight to
 * level 0 later with the same deadline; X started first, so X fires first. */
Test(order, rule2_fifo_holds_when_one_timer_waited_in_a_higher_level) {
  static struct probe p[2];
  probes_init(p, 2);
  tw_advance(wheel_, 1000, TW_ALL);
  start(&p[0], 300, 0); /* X: deadline 1300 */
  tw_advance(wheel_, 1290, TW_ALL);
  start(&p[1], 10, 0); /* Y: deadline 1300 */
  cr_assert_eq(tw_advance(wheel_, 1300, TW_ALL), 2);
  EXPECT_FIRED(0, 1);
}

/* The same with the roles of the levels swapped by a cascade in between,
 * and with a reset-later timer (re-filed from its stale slot) in the mix. */
Test(order, rule2_fifo_holds_for_timers_refiled_after_a_reset) {
  static struct probe p[4];
  probes_init(p, 4);
  start(&p[0], 100, 0);  /* A, later moved to 9000 */
  start(&p[1], 9000, 0); /* B: started before A's reset */
  start(&p[0], 9000, 0); /* A now after B */
  tw_advance(wheel_, 8000, TW_ALL);
  start(&p[2], 1000, 0); /* C: 9000, straight into a low level */
  start_at(&p[3], 9000); /* D: 9000 */
  cr_assert_eq(tw_advance(wheel_, 9000, TW_ALL), 4);
  EXPECT_FIRED(1, 0, 2, 3);
}

/* A reset-later timer that sat stale behind an earlier timer of its slot is
 * re-filed when that slot comes due, behind timers started after its reset:
 * it still fires first among equal deadlines. */
Test(order, rule2_fifo_holds_for_a_stale_timer_refiled_behind_newer_ones) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 100, 0); /* Z: keeps the slot's minimum */
  start(&p[1], 120, 0); /* A: same slot */
  tw_advance(wheel_, 10, TW_ALL);
  start(&p[1], 8990, 0); /* A reset at 10 to 9000: a store */
  tw_advance(wheel_, 20, TW_ALL);
  start(&p[2], 8980, 0); /* B at 20, also 9000 */
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_eq(tw_advance(wheel_, 9000, TW_ALL), 2);
  EXPECT_FIRED(1, 2);
}

/*
 * A level-0 slot is collected from both ends in turn, and a work budget may
 * stop that walk anywhere: equal deadlines still fire in order of their
 * latest start, with a stale timer in the slot and tw_next_expiry asked
 * after the second slice (for small budgets, mid-collection), and the
 * invariant holds after every slice. Ten timers are started for
 * `deadline` (at 1000 they first wait in a level-1 slot, whose drain, from
 * both ends too, leaves two runs; at 100 they go straight to level 0, in
 * start order), timer 9 moves later, and the `restarts` are started again
 * for the same deadline, which leaves them in place, out of order.
 */
static void split_collection(size_t budget, uint64_t deadline,
                             const int *restarts, size_t n_restarts,
                             const int *expected) {
  enum { N = 10 };
  static struct probe p[N];
  size_t slices = 0, fired = 0;
  tw_wheel_free(wheel_);
  wheel_ = tw_wheel_new(0);
  log_len = 0;
  probes_init(p, N);
  for (int i = 0; i < N; i++)
    start_at(&p[i], deadline);
  cr_assert_eq(tw_advance(wheel_, deadline - 1, TW_ALL), 0);
  start_at(&p[9], deadline + 200); /* stale in the slot */
  for (size_t i = 0; i < n_restarts; i++)
    start_at(&p[restarts[i]], deadline);
  while (fired < N - 1) {
    fired += tw_advance_slice(wheel_, deadline, budget);
    cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
    if (++slices == 2 && fired < N - 1)
      cr_assert_eq(tw_next_expiry(wheel_), deadline);
    cr_assert_lt(slices, 100);
  }
  expect_fired(expected, N - 1);
  cr_assert_eq(tw_advance(wheel_, deadline + 200, TW_ALL), 1);
  EXPECT_FIRED(9);
}

Test(order, rule2_fifo_holds_when_a_budget_splits_a_collection) {
  static const int drained[] = {5, 0, 8},
                   drained_order[] = {1, 2, 3, 4, 6, 7, 5, 0, 8};
  static const int direct[] = {7}, direct_order[] = {0, 1, 2, 3, 4, 5, 6, 8, 7};
  for (size_t budget = 1; budget <= 12; budget++) {
    split_collection(budget, 1000, drained, 3, drained_order);
    split_collection(budget, 100, direct, 1, direct_order);
  }
}

/* Maps `k` pages and starts a probe at the start of each for tick 100,
 * timer i (id i) on page i, in that order: a timer's page can then be made
 * unreadable to show that a call does not read it. */
static char *probes_on_pages(struct probe **p, int k, long page) {
  char *pages = mmap(NULL, (size_t)page * (size_t)k, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(pages, MAP_FAILED);
  for (int i = 0; i < k; i++) {
    p[i] = (struct probe *)(void *)(pages + (size_t)page * (size_t)i);
    probes_init(p[i], 1);
    p[i]->id = i;
    start_at(p[i], 100);
  }
  return pages;
}

/*
 * A slot in start order that takes several slices to collect is not sorted
 * when its walk ends. 200 timers started for tick 100 (straight into level
 * 0, in start order), each on its own page, collected 64 units a slice: a
 * walk takes 32 from each end per slice, so the fourth slice takes the last
 * 8 (96-103), joins the tail part (104-199) after the head part (0-95) and
 * runs 0-55. Before it, the pages of the timers it has no reason to touch
 * (57-94, 105-198) are made unreadable. (When each slice's tail part joined
 * the firing list at once, the last slice read them: the order check of
 * each timer it took against the interleaved parts, then the sort of them
 * all, a million timers, 15 ms in one slice.) Then the pages come back and
 * the rest run in start order.
 */
Test(order, a_collection_split_by_budgets_keeps_start_order_unsorted) {
  enum { K = 200, SLICE = 64 };
  long page = sysconf(_SC_PAGESIZE);
  struct probe *p[K];
  char *pages = probes_on_pages(p, K, page);
  for (int slice = 0; slice < 3; slice++)
    cr_assert_eq(tw_advance_slice(wheel_, 100, SLICE), 0);
  for (int i = 0; i < K; i++)
    if ((i >= 57 && i <= 94) || (i >= 105 && i <= 198))
      cr_assert_eq(mprotect(p[i], (size_t)page, PROT_NONE), 0);
  cr_assert_eq(tw_advance_slice(wheel_, 100, SLICE), 56);
  cr_assert_eq(mprotect(pages, (size_t)page * K, PROT_READ | PROT_WRITE), 0);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), K - 56);
  cr_assert_eq(log_len, K);
  for (int i = 0; i < K; i++)
    cr_assert_eq(log_[i].id, i);
  log_len = 0;
  cr_assert_eq(munmap(pages, (size_t)page * K), 0);
}

/* Makes every page of `p` unreadable but those of the timers `from` to
 * `to` (inclusive), `first` and `last`; or, with `readable`, all again. */
static void protect_but(struct probe **p, int k, long page, int from, int to,
                        int first, int last) {
  for (int i = 0; i < k; i++) {
    int keep = (i >= from && i <= to) || i == first || i == last;
    cr_assert_eq(
        mprotect(p[i], (size_t)page, keep ? PROT_READ | PROT_WRITE : PROT_NONE),
        0);
  }
}

enum { TWO_RUNS = 256, RESTARTED = 64, SORT_SLICE = 8 };

/* Starts TWO_RUNS timers for tick 100 on pages (probes_on_pages), then
 * 1-64 again: they keep their places with later starts, so that the slot
 * holds two runs, 0-64 and 65-255, and fires 0, 65-255, 1-64. Then walks
 * it SORT_SLICE units a slice, 4 from each end, but for its last slice:
 * 124-131 are left in the slot. */
static char *walk_two_runs_but_the_last_slice(struct probe **p, long page) {
  char *pages = probes_on_pages(p, TWO_RUNS, page);
  for (int i = 1; i <= RESTARTED; i++)
    start_at(p[i], 100);
  for (int slice = 0; slice < TWO_RUNS / SORT_SLICE - 1; slice++)
    cr_assert_eq(tw_advance_slice(wheel_, 100, SORT_SLICE), 0);
  return pages;
}

/* The two runs' firing order, without the timers `skip_from` to `skip_to`,
 * into `ids`; returns how many. */
static int two_runs_order(int *ids, int skip_from, int skip_to) {
  int at = 0;
  for (int i = 0; i < TWO_RUNS; i++) {
    int id = i == 0                     ? 0
             : i < TWO_RUNS - RESTARTED ? RESTARTED + i
                                        : i - (TWO_RUNS - RESTARTED - 1);
    if (id < skip_from || id > skip_to)
      ids[at++] = id;
  }
  return at;
}

/*
 * A tick out of start order is sorted within the budgets. The two runs'
 * last walking slice takes 124-131, with pages readable for only those
 * (and 112-143 around them), the first and the last: it ends the walk with
 * its budget spent and sorts nothing. The next slice cuts 0-7 from the
 * first run, with only 0-16 readable. (When the walk's end sorted its tick
 * in one call, it read them all: a drained tick of a million timers, 2 ms
 * in one slice.) Then the pages come back, and the slices take one unit
 * each: 248 cut the rest into runs (57 of 0-64, then 65-255), the next
 * merges 0 (the one timer of 0-64 before 65-255, which then follow whole),
 * and none of these runs a callback; the 250th runs 0, and all the rest
 * follow in order.
 */
Test(order, a_tick_out_of_start_order_is_sorted_within_the_budgets) {
  long page = sysconf(_SC_PAGESIZE);
  struct probe *p[TWO_RUNS];
  char *pages = walk_two_runs_but_the_last_slice(p, page);
  int expected[TWO_RUNS], n = two_runs_order(expected, -1, -1);

  protect_but(p, TWO_RUNS, page, 112, 143, 0, TWO_RUNS - 1);
  cr_assert_eq(tw_advance_slice(wheel_, 100, SORT_SLICE), 0); /* walk ends */
  protect_but(p, TWO_RUNS, page, 0, 16, 0, 0);
  cr_assert_eq(tw_advance_slice(wheel_, 100, SORT_SLICE), 0); /* cuts 0-7 */
  cr_assert_eq(mprotect(pages, (size_t)page * TWO_RUNS, PROT_READ | PROT_WRITE),
               0);

  for (int slice = 0; slice < 249; slice++) {
    cr_assert_eq(tw_next_expiry(wheel_), 100);
    cr_assert_eq(tw_advance_slice(wheel_, 100, 1), 0, "slice %d", slice);
    cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  }
  cr_assert_eq(tw_advance_slice(wheel_, 100, 1), 1);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), (size_t)n - 1);
  expect_fired(expected, (size_t)n);
  cr_assert_eq(munmap(pages, (size_t)page * TWO_RUNS), 0);
}

/*
 * tw_next_expiry finishes a walk that stops left with nothing to take, to
 * answer exactly, but leaves the tick's sort to the advances' budgets. The
 * two runs' last 8 timers, 124-131, are stopped instead of walked; with
 * only the pages of the ends of the walk's two parts readable (0, 123,
 * 132, 255), tw_next_expiry answers 100. (It sorted the whole tick: any
 * number of timers in one call.)
 */
Test(order, next_expiry_leaves_a_tick_s_sort_to_the_budgets) {
  long page = sysconf(_SC_PAGESIZE);
  struct probe *p[TWO_RUNS];
  char *pages = walk_two_runs_but_the_last_slice(p, page);
  int expected[TWO_RUNS], n = two_runs_order(expected, 124, 131);

  for (int i = 124; i <= 131; i++)
    cr_assert_eq(tw_timer_stop(wheel_, &p[i]->timer), 0);
  protect_but(p, TWO_RUNS, page, 123, 132, 0, TWO_RUNS - 1);
  cr_assert_eq(tw_next_expiry(wheel_), 100);
  cr_assert_eq(mprotect(pages, (size_t)page * TWO_RUNS, PROT_READ | PROT_WRITE),
               0);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), (size_t)n);
  expect_fired(expected, (size_t)n);
  cr_assert_eq(munmap(pages, (size_t)page * TWO_RUNS), 0);
}

/*
 * Rule 10: a start with a past deadline joins the timers a budget left
 * without walking them, wherever its place is near an end. A budget of one
 * runs S, the first of a tick's timers, and leaves the rest; A, 64 middle
 * timers and C wait in order, the tick's own or past starts for tick 5
 * merged before T, the tick's last. With the middle timers' pages but the
 * first made unreadable, X is started for `x_deadline` and an advance that
 * runs nothing joins it to them: its place, found from both ends a step at
 * a time, is first (before A), last (after C), or, for tick 5, between C
 * and T. Either way the search reads A and C, and T and the first middle
 * timer when there. (A walk from the tail read every timer left for the
 * first place, one from the head for the third: a backlog of a million
 * timers worked off 64 at a time with such a start before each advance
 * took 12 s and 15 s.) Then the pages come back and all run in order.
 */
static void past_start_among_left_timers(int backlog_past,
                                         uint64_t x_deadline) {
  enum { S, A, C, T, X, ENDS, MIDDLE = 64 };
  static struct probe ends[ENDS];
  /* The first middle timer ends a page; the others begin the next. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t bytes = page + MIDDLE * sizeof(struct probe);
  char *pages = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  struct probe *middle;
  uint64_t tick = backlog_past ? 5 : 1000;
  int x_first = x_deadline < tick, at = 0;
  int order[MIDDLE + 4];
  cr_assert_neq(pages, MAP_FAILED);
  middle = (struct probe *)(void *)(pages + page) - 1;
  wheel_teardown();
  wheel_setup();
  probes_init(ends, ENDS);
  probes_init(middle, MIDDLE);
  for (int i = 0; i < MIDDLE; i++)
    middle[i].id = ENDS + i;
  start_at(&ends[S], 1000);
  if (backlog_past)
    start_at(&ends[T], 1000);
  else
    start_at(&ends[A], 1000);
  if (!backlog_past)
    for (int i = 0; i < MIDDLE; i++)
      start_at(&middle[i], 1000);
  if (!backlog_past)
    start_at(&ends[C], 1000);
  cr_assert_eq(tw_advance(wheel_, 1000, 1), 1);
  EXPECT_FIRED(S);
  if (backlog_past) {
    start_at(&ends[A], 5);
    for (int i = 0; i < MIDDLE; i++)
      start_at(&middle[i], 5);
    start_at(&ends[C], 5);
    cr_assert_eq(tw_advance(wheel_, 1000, 0), 0); /* before T */
  }

  cr_assert_eq(mprotect(pages + page, bytes - page, PROT_NONE), 0);
  start_at(&ends[X], x_deadline);
  cr_assert_eq(tw_advance(wheel_, 1000, 0), 0); /* X joins them */
  cr_assert_eq(mprotect(pages + page, bytes - page, PROT_READ | PROT_WRITE), 0);

  if (x_first)
    order[at++] = X;
  order[at++] = A;
  for (int i = 0; i < MIDDLE; i++)
    order[at++] = ENDS + i;
  order[at++] = C;
  if (!x_first)
    order[at++] = X;
  if (backlog_past)
    order[at++] = T;
  expect_fired(NULL, 0);
  cr_assert_eq(tw_advance(wheel_, 1000, TW_ALL), (size_t)at);
  expect_fired(order, (size_t)at);
  cr_assert_eq(munmap(pages, bytes), 0);
}

Test(order, a_past_start_walks_none_of_the_timers_a_budget_left) {
  past_start_among_left_timers(0, 999);  /* first */
  past_start_among_left_timers(0, 1000); /* last */
  past_start_among_left_timers(1, 5);    /* between C and T */
}

/*
 * A loop that sleeps past a whole level-1 slot (256 ticks) collects it in
 * one pass, moving none of its due timers: equal deadlines still fire in
 * order of their latest start, a timer moved later inside the slot fires at
 * its new deadline, and one moved past the slot moves on (the one move).
 */
Test(order, rule2_a_slot_slept_past_is_collected_whole_in_order) {
  static struct probe p[6];
  probes_init(p, 6);
  start_at(&p[0], 1100); /* all in the level-1 slot [1024, 1280) */
  start_at(&p[1], 1030);
  start_at(&p[2], 1100);
  start_at(&p[3], 1279);
  start_at(&p[4], 1100);
  start_at(&p[5], 1050);
  start_at(&p[0], 1100); /* a later start: after 2 and 4 */
  start_at(&p[5], 1200); /* later, inside the slot */
  start_at(&p[1], 3000); /* later, past the slot: stale */
  cr_assert_eq(tw_moves(wheel_), 0);
  cr_assert_eq(tw_advance(wheel_, 2000, TW_ALL), 5);
  EXPECT_FIRED(2, 4, 0, 5, 3);
  cr_assert_eq(tw_moves(wheel_), 1, "moved %llu timers",
               (unsigned long long)tw_moves(wheel_));
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_next_expiry(wheel_), 3000);
  cr_assert_eq(tw_advance(wheel_, 3000, TW_ALL), 1);
  EXPECT_FIRED(1);
}

/*
 * The same sleep when level 0 already holds a timer of that slot's span (Y,
 * started after the slot's timers had been filed and before the pace moved
 * them): the slot is drained as usual, so that Y fires after the older
 * timers of its deadline and before the later ones.
 */
Test(order, rule2_a_slot_slept_past_waits_for_level_0_timers_of_its_span) {
  enum { N = 21, Y = N - 1 };
  static struct probe p[N];
  int expected[N];
  probes_init(p, N);
  for (int i = 0; i < Y; i++) /* the level-1 slot [1024, 1280) */
    start_at(&p[i], i < Y / 2 ? 1100 : 1200);
  cr_assert_eq(tw_advance(wheel_, 770, TW_ALL), 0); /* too early to pace */
  start_at(&p[Y], 1100); /* level 0 now spans up to 1280 */
  for (int i = 0; i < N; i++)
    expected[i] = i < Y / 2 ? i : i == Y / 2 ? Y : i - 1;
  cr_assert_eq(tw_advance(wheel_, 5000, TW_ALL), N);
  expect_fired(expected, N);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
}

Test(order, rule2_start_at_again_and_repeat_rearm_count_as_starts) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 10, 10); /* repeats: re-armed at 10 for 20 */
  start_at(&p[1], 20);  /* started before the re-arm */
  start(&p[2], 30, 20);
  tw_advance(wheel_, 10, TW_ALL);
  EXPECT_FIRED(0);
  cr_assert_eq(tw_advance(wheel_, 20, TW_ALL), 2);
  EXPECT_FIRED(1, 0);
  tw_timer_stop(wheel_, &p[0].timer);
  start(&p[0], 10, 10);                /* due 30 */
  tw_timer_again(wheel_, &p[2].timer); /* due 40 */
  tw_timer_set_repeat(&p[2].timer, 10);
  tw_timer_again(wheel_, &p[2].timer); /* due 30, after p[0] */
  cr_assert_eq(tw_advance(wheel_, 30, TW_ALL), 2);
  EXPECT_FIRED(0, 2);
}

/* Rule 5: a callback restarting itself with 0 runs once per advance. */
static void restart_zero(struct probe *p) {
  start(p, 0, 0);
}

Test(order, rule5_restart_with_zero_in_callback_waits_for_next_advance) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = restart_zero;
  start(&p[0], 0, 0);
  start(&p[1], 0, 0);
  for (int round = 0; round < 3; round++) {
    cr_assert_eq(tw_advance(wheel_, 7, TW_ALL), round == 0 ? 2 : 1);
    if (round == 0)
      EXPECT_FIRED(0, 1);
    else
      EXPECT_FIRED(0);
    cr_assert(tw_timer_is_active(&p[0].timer));
    cr_assert_eq(tw_next_expiry(wheel_), 7);
  }
}

static void start_other_due_now(struct probe *p) {
  start_at(p->arg, 0); /* already in the past */
}

Test(order, rule5_timer_started_in_callback_with_past_deadline_waits) {
  static struct probe p[3];
  probes_init(p, 3);
  p[0].then = start_other_due_now;
  p[0].arg = &p[1];
  start(&p[0], 5, 0);
  start(&p[2], 9, 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 2);
  EXPECT_FIRED(0, 2);
  cr_assert_eq(tw_next_expiry(wheel_), 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 1);
  EXPECT_FIRED(1);
}

/* Rule 6: re-armed before the callback at now + repeat; one-shot inactive. */
Test(order, rule6_repeat_is_rearmed_before_callback_missed_periods_collapse) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 10, 10);
  start(&p[1], 10, 0);
  cr_assert_eq(tw_advance(wheel_, 95, TW_ALL), 2); /* nine periods missed */
  cr_assert_eq(log_[0].id, 0);
  cr_assert(log_[0].active);
  cr_assert_eq(log_[0].deadline, 105);
  cr_assert_eq(log_[1].id, 1);
  cr_assert_not(log_[1].active);
  cr_assert_eq(log_[1].deadline, TW_NEVER);
  log_len = 0;
  cr_assert_eq(tw_count(wheel_), 1);
  cr_assert_eq(tw_advance(wheel_, 104, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 105, TW_ALL), 1);
}

static void stop_other(struct probe *p) {
  tw_timer_stop(wheel_, &((struct probe *)p->arg)->timer);
}

static void restart_other_later(struct probe *p) {
  start(p->arg, 100, 0);
}

Test(order, rule6_timer_stopped_before_its_turn_does_not_fire) {
  static struct probe p[3];
  probes_init(p, 3);
  p[0].then = stop_other;
  p[0].arg = &p[2];
  start(&p[0], 5, 0);
  start(&p[1], 5, 0);
  start(&p[2], 8, 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 2);
  EXPECT_FIRED(0, 1);
  cr_assert_eq(tw_count(wheel_), 0);
}

Test(order, rule6_timer_restarted_before_its_turn_fires_at_new_deadline) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = restart_other_later;
  p[0].arg = &p[1];
  start(&p[0], 5, 0);
  start(&p[1], 6, 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_eq(tw_timer_deadline(&p[1].timer), 110);
  cr_assert_eq(tw_advance(wheel_, 109, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 110, TW_ALL), 1);
}

/* Rule 6: the advance never touches a timer after its callback returned
 * unless it is still active. Heap timers freed in callbacks: ASan checks. */
struct owned {
  tw_timer timer;
  struct owned *victim; /* freed (after stopping) by this one's callback */
};

static int owned_calls;

static void free_victim_and_self(tw_timer *t) {
  struct owned *o = t->data;
  owned_calls++;
  if (o->victim) {
    tw_timer_stop(wheel_, &o->victim->timer);
    free(o->victim);
  }
  tw_timer_stop(wheel_, t); /* a repeating timer must be stopped first */
  free(o);
}

Test(order, rule6_callbacks_may_free_their_own_and_other_timers) {
  struct owned *a = malloc(sizeof *a), *b = malloc(sizeof *b),
               *c = malloc(sizeof *c);
  tw_timer_init(&a->timer);
  tw_timer_init(&b->timer);
  tw_timer_init(&c->timer);
  a->timer.data = a;
  b->timer.data = b;
  c->timer.data = c;
  a->victim = b; /* b is due in the same advance, after a */
  b->victim = NULL;
  c->victim = NULL;
  tw_timer_start(wheel_, &a->timer, free_victim_and_self, 5, 5);
  tw_timer_start(wheel_, &b->timer, free_victim_and_self, 6, 0);
  tw_timer_start(wheel_, &c->timer, free_victim_and_self, 7, 1);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 2);
  cr_assert_eq(owned_calls, 2);
  cr_assert_eq(tw_count(wheel_), 0);
  cr_assert_eq(tw_advance(wheel_, 1000, TW_ALL), 0);
}

/* A nested advance of either kind returns 0 and changes nothing. */
static void advance_inside(struct probe *p) {
  (void)p;
  cr_assert_eq(tw_advance(wheel_, 1000, TW_ALL), 0);
  cr_assert_eq(tw_advance_slice(wheel_, 1000, TW_SLICE), 0);
}

Test(order, nested_advance_from_a_callback_does_nothing) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = advance_inside;
  start(&p[0], 5, 0);
  start(&p[1], 500, 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_eq(tw_now(wheel_), 10);
  cr_assert(tw_timer_is_active(&p[1].timer));
}

/* The functions added after the first contract, with bad input: NULL
 * gives TW_NEVER or 0 and does nothing; a nested tw_advance_slice returns 0
 * and changes nothing, like a nested tw_advance; tw_break outside an
 * advance leaves the next advance whole; a budget of 0 moves the time and
 * runs nothing. */
Test(order, the_later_functions_refuse_null_and_nesting) {
  static struct probe p[3];
  probes_init(p, 3);
  cr_assert_eq(tw_next_wakeup(NULL), TW_NEVER);
  cr_assert_eq(tw_next_expiry(NULL), TW_NEVER);
  cr_assert_eq(tw_advance_slice(NULL, 5, TW_SLICE), 0);
  cr_assert_eq(tw_moves(NULL), 0);
  tw_break(NULL);
  p[0].then = advance_inside;
  start(&p[0], 5, 0);
  start(&p[1], 6, 0);
  start(&p[2], 500, 0);
  cr_assert_eq(tw_advance_slice(wheel_, 10, 0), 0);
  cr_assert_eq(tw_now(wheel_), 10);
  EXPECT_NONE();
  tw_break(wheel_); /* outside an advance: nothing */
  cr_assert_eq(tw_advance_slice(wheel_, 10, TW_SLICE), 2);
  EXPECT_FIRED(0, 1);
  cr_assert_eq(tw_now(wheel_), 10);
  cr_assert(tw_timer_is_active(&p[2].timer));
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
}

static void check_next_expiry(struct probe *p) {
  (void)p;
  cr_assert_leq(tw_next_expiry(wheel_), tw_now(wheel_));
}

Test(order, next_expiry_inside_a_callback_sees_what_is_still_due) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = check_next_expiry;
  start(&p[0], 5, 0);
  start(&p[1], 6, 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 2);
}

/* tw_break from a callback: the advance returns after it; what is still
 * due runs first at the next advance, in order, none early, none lost. */
static void break_the_advance(struct probe *p) {
  (void)p;
  tw_break(wheel_);
}

Test(order, break_from_a_callback_ends_the_advance_after_it) {
  static struct probe p[5];
  probes_init(p, 5);
  p[1].then = break_the_advance;
  for (int i = 0; i < 4; i++)
    start(&p[i], 10 + (uint64_t)i, 0);
  start(&p[4], 50, 0);
  cr_assert_eq(tw_advance(wheel_, 20, TW_ALL), 2);
  EXPECT_FIRED(0, 1);
  cr_assert_leq(tw_next_expiry(wheel_), 20, "p[2] and p[3] are still due");
  tw_break(wheel_); /* outside an advance: nothing */
  cr_assert_eq(tw_advance(wheel_, 20, TW_ALL), 2);
  EXPECT_FIRED(2, 3);
  cr_assert_eq(tw_advance(wheel_, 60, TW_ALL), 1);
  EXPECT_FIRED(4);
}

/* Rule 7 across a break: an advance that a callback breaks tells
 * tw_next_wakeup whether it used up its budget, as any advance does: yes,
 * so at or before now (there may be work left); no, so not an earlier
 * advance's answer (the stale one would be "now", one wasted wakeup). */
Test(order, break_keeps_the_next_wakeup_true_to_the_budget) {
  static struct probe p[4];
  probes_init(p, 4);
  p[0].then = break_the_advance;
  start_at(&p[0], 10);
  start_at(&p[1], 1000);
  /* 2 units: p[0] collected, then run; it breaks with the budget spent */
  cr_assert_eq(tw_advance_slice(wheel_, 10, 2), 1);
  EXPECT_FIRED(0);
  cr_assert_leq(tw_next_wakeup(wheel_), 10, "the budget was used up");
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 0);
  cr_assert_eq(tw_next_wakeup(wheel_), 1000);

  p[3].then = break_the_advance;
  start_at(&p[2], 20);
  start_at(&p[3], 20);
  /* 1 unit: the collection of slot 20 stops after p[2], work left */
  cr_assert_eq(tw_advance_slice(wheel_, 20, 1), 0);
  cr_assert_leq(tw_next_wakeup(wheel_), 20);
  /* the rest, with budget to spare: p[3] breaks as the last one due */
  cr_assert_eq(tw_advance(wheel_, 20, TW_ALL), 2);
  EXPECT_FIRED(2, 3);
  cr_assert_eq(tw_next_wakeup(wheel_), 1000, "nothing is left before p[1]");
}

/* Rule 6 with a fixed rate (libevent's EV_PERSIST): re-armed at the
 * deadline it fired for + repeat, so late advances do not shift the
 * period; a period already missed collapses into now + repeat. */
Test(order, rule6_fixed_rate_repeat_keeps_its_period) {
  static struct probe p;
  probes_init(&p, 1);
  tw_timer_set_fixed_rate(&p.timer, 1);
  cr_assert(tw_timer_is_fixed_rate(&p.timer));
  start(&p, 10, 10); /* due at 10, 20, 30... */
  cr_assert_eq(tw_advance(wheel_, 13, TW_ALL), 1);
  cr_assert_eq(log_[0].deadline, 20, "re-armed at 10 + 10, not 13 + 10");
  cr_assert_eq(tw_advance(wheel_, 20, TW_ALL), 1);
  cr_assert_eq(tw_timer_deadline(&p.timer), 30);
  cr_assert_eq(tw_advance(wheel_, 55, TW_ALL), 1); /* 30, 40, 50 missed */
  cr_assert_eq(tw_timer_deadline(&p.timer), 65, "collapsed: 55 + 10");
  cr_assert_eq(tw_advance(wheel_, 60, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 65, TW_ALL), 1);
  cr_assert_eq(tw_timer_deadline(&p.timer), 75);
  tw_timer_set_fixed_rate(&p.timer, 0);
  cr_assert_eq(tw_advance(wheel_, 77, TW_ALL), 1);
  cr_assert_eq(tw_timer_deadline(&p.timer), 87, "off again: 77 + 10");
  cr_assert_eq(tw_timer_stop(wheel_, &p.timer), 0);
  tw_timer_init(&p.timer);
  cr_assert_not(tw_timer_is_fixed_rate(&p.timer), "init clears it");
  tw_timer_set_fixed_rate(NULL, 1);
  cr_assert_not(tw_timer_is_fixed_rate(NULL));
}
