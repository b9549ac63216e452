/*
 * The core contract, rule by rule (DESIGN.md "Semantics"), plus level edges,
 * huge jumps, bad input and the wheel's lifetime. Virtual time: exact.
 * Ordering and re-entrancy (rules 2, 5, 6) are in test_order.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

TestSuite(wheel, .init = wheel_setup, .fini = wheel_teardown);

/* Offsets at and around every level edge: one block and two blocks of each
 * level (the two a level holds), and powers of 64 besides. */
static const uint64_t edges[] = {
    1,
    2,
    62,
    63,
    64,
    65,
    127,
    128,
    254,
    255,
    256,
    257,
    511,
    512,
    513,
    4095,
    4096,
    4097,
    65535,
    65536,
    65537,
    131071,
    131072,
    131073,
    262143,
    262144,
    ((uint64_t)1 << 24) - 1,
    (uint64_t)1 << 24,
    (uint64_t)1 << 30,
    (uint64_t)1 << 36,
    ((uint64_t)1 << 36) + 1,
    ((uint64_t)1 << 48) - 1,
    (uint64_t)1 << 48,
    (uint64_t)1 << 60,
    ((uint64_t)1 << 63) + 12345,
};

/* Starting points: aligned, mid-digit, and just below digit rollovers. */
static const uint64_t bases[] = {0,
                                 1,
                                 63,
                                 255,
                                 1000003,
                                 4095,
                                 65535,
                                 65281,
                                 262143,
                                 16777215,
                                 ((uint64_t)1 << 40) - 5};

/* Rule 1 at every level: nothing before the deadline, even when time stops
 * at each point where the timer's slot or block changes (where it is
 * drained down a level, at 8-bit digits, and at the 6-bit ones a wheel of
 * 64-slot levels would use), then the timer fires at exactly the deadline. */
Test(wheel, rule1_fires_exactly_at_deadline_at_every_level_edge) {
  for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
      struct probe p;
      tw_wheel *w = tw_wheel_new(bases[b]);
      wheel_ = w;
      probes_init(&p, 1);
      start(&p, edges[e], 0);
      uint64_t deadline = bases[b] + edges[e];
      cr_assert_eq(tw_timer_deadline(&p.timer), deadline);
      cr_assert_eq(tw_next_expiry(w), deadline);
      /* Stop at every digit boundary between now and the deadline. */
      for (unsigned bits = 63; bits >= 6; bits--) {
        if (bits % 8 != 0 && bits % 6 != 0)
          continue;
        uint64_t boundary = deadline & ~(((uint64_t)1 << bits) - 1);
        if (boundary > tw_now(w) && boundary < deadline) {
          cr_assert_eq(tw_advance(w, boundary, TW_ALL), 0,
                       "base %llu offset %llu fired early at %llu",
                       (unsigned long long)bases[b],
                       (unsigned long long)edges[e],
                       (unsigned long long)boundary);
          cr_assert_eq(tw_next_expiry(w), deadline);
        }
      }
      cr_assert_eq(tw_advance(w, deadline - 1, TW_ALL), 0);
      cr_assert_eq(tw_next_expiry(w), deadline);
      cr_assert_eq(tw_advance(w, deadline, TW_ALL), 1,
                   "base %llu offset %llu did not fire at its deadline",
                   (unsigned long long)bases[b], (unsigned long long)edges[e]);
      cr_assert_eq(log_[0].now, deadline);
      log_len = 0;
      cr_assert_eq(tw_count(w), 0);
      cr_assert_eq(tw_next_expiry(w), TW_NEVER);
      tw_wheel_free(w);
    }
  }
  wheel_ = tw_wheel_new(0); /* for the teardown */
}

/* The filing rule the inline start shares with the library
 * (tw__filing_slot, frozen by the header's ABI), held to its definition by
 * the invariant checker (src/check.c, rule_slot: the lowest level whose two
 * blocks hold the deadline). From starting points at and around digit
 * rollovers and near the end of time, timers are started one tick before,
 * at and one after each of the wheel's level ends, at the edge offsets and
 * at random distances, two timers at each deadline: the first is filed by
 * the library where its slot is empty, the second by the inline start (the
 * slot is occupied then). */
Test(wheel, filing_rule_names_the_lowest_level_whose_two_blocks_hold_it) {
  static const uint64_t near_end[] = {
      UINT64_MAX - 2,
      UINT64_MAX - ((uint64_t)1 << 16),
      UINT64_MAX - ((uint64_t)1 << 17) + 5,
      UINT64_MAX - ((uint64_t)1 << 40),
      ((uint64_t)1 << 63) - 1,
  };
  enum { BASES = sizeof bases / sizeof bases[0], RANDOM = 1000 };
  enum { DEADLINES = 3 * TW__LEVELS + sizeof edges / sizeof edges[0] + RANDOM };
  static struct probe p[2 * DEADLINES];
  uint64_t x = 0x9e3779b97f4a7c15u; /* xorshift: random offsets */
  tw_wheel_free(wheel_);
  for (size_t k = 0; k < BASES + sizeof near_end / sizeof near_end[0]; k++) {
    uint64_t pos = k < BASES ? bases[k] : near_end[k - BASES];
    uint64_t deadlines[DEADLINES];
    size_t n = 0, started = 0;
    wheel_ = tw_wheel_new(pos);
    for (unsigned level = 0; level < TW__LEVELS; level++) {
      uint64_t end = tw__head(wheel_)->level_end[level];
      deadlines[n++] = end - 1;
      deadlines[n++] = end;
      deadlines[n++] = end + 1;
    }
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
      deadlines[n++] = pos + edges[e];
    for (int i = 0; i < RANDOM; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      deadlines[n++] = pos + 1 + (x >> (x % 64)) % (TW_NEVER - 1 - pos);
    }
    probes_init(p, 2 * n);
    for (size_t i = 0; i < n; i++)
      if (deadlines[i] > pos && deadlines[i] < TW_NEVER) { /* filed in slots */
        start_at(&p[started++], deadlines[i]);
        start_at(&p[started++], deadlines[i]);
      }
    cr_assert_geq(started, 2 * RANDOM); /* the random ones all lie in range */
    cr_assert_null(tw__check(wheel_, 1), "pos %llu: %s",
                   (unsigned long long)pos, tw__check(wheel_, 1));
    tw_wheel_free(wheel_);
  }
  wheel_ = tw_wheel_new(0); /* for the teardown */
}

/* Rule 1 tick by tick across level 0's two blocks and into level 1. */
Test(wheel, rule1_never_early_stepping_one_tick_at_a_time) {
  static const uint64_t timeouts[] = {63,  64,  65,  255,  256,  257,
                                      511, 512, 513, 4095, 4096, 4100};
  enum { N = sizeof timeouts / sizeof timeouts[0] };
  static struct probe p[N];
  probes_init(p, N);
  for (int i = 0; i < N; i++)
    start(&p[i], timeouts[i], 0);
  for (uint64_t now = 1; now <= 5000; now++) {
    tw_advance(wheel_, now, TW_ALL);
    for (size_t i = 0; i < log_len; i++)
      cr_assert_eq(timeouts[log_[i].id], now, "timer due %llu fired at %llu",
                   (unsigned long long)timeouts[log_[i].id],
                   (unsigned long long)now);
    log_len = 0;
  }
  cr_assert_eq(tw_count(wheel_), 0);
}

/* Huge jumps: 1,000 timers spread over 10^9 ticks all fire in one advance,
 * in deadline order. */
Test(wheel, huge_jump_fires_everything_in_deadline_order) {
  enum { N = 1000 };
  static struct probe p[N];
  uint64_t state = 12345;
  probes_init(p, N);
  for (int i = 0; i < N; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    start(&p[i], (state >> 11) % 1000000000u, 0);
  }
  cr_assert_eq(tw_advance(wheel_, 1000000000, TW_ALL), N);
  for (int i = 1; i < N; i++) {
    uint64_t before = p[log_[i - 1].id].timer.tw__deadline;
    uint64_t after = p[log_[i].id].timer.tw__deadline;
    cr_assert_leq(before, after, "position %d out of deadline order", i);
    if (before == after)
      cr_assert_lt(log_[i - 1].id, log_[i].id);
  }
  cr_assert_eq(tw_count(wheel_), 0);
}

/* Huge jumps in steps: timers across 2^20..2^50, advanced in uneven strides,
 * each fires in the first advance that reaches it and never before. */
Test(wheel, huge_jumps_in_strides_fire_each_timer_in_first_advance_past_it) {
  enum { N = 300 };
  static struct probe p[N];
  uint64_t deadline[N], state = 99;
  probes_init(p, N);
  for (int i = 0; i < N; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    deadline[i] = (state >> 14) & (((uint64_t)1 << 50) - 1);
    start_at(&p[i], deadline[i]);
  }
  const uint64_t stride = ((uint64_t)1 << 41) / 7 + 13;
  uint64_t now = 0;
  while (now < ((uint64_t)1 << 50) + stride) { /* bounded: a lost timer fails */
    uint64_t before = now;
    now += stride;
    tw_advance(wheel_, now, TW_ALL);
    for (size_t i = 0; i < log_len; i++) {
      uint64_t d = deadline[log_[i].id];
      cr_assert(d > before && d <= now,
                "timer %d due %llu fired in (%llu, %llu]", log_[i].id,
                (unsigned long long)d, (unsigned long long)before,
                (unsigned long long)now);
    }
    log_len = 0;
  }
  cr_assert_eq(tw_count(wheel_), 0);
}

/* Rule 3: relative to tw_now, saturating at TW_NEVER - 1. */
Test(wheel, rule3_timeouts_are_relative_and_saturate) {
  static struct probe p[5];
  probes_init(p, 5);
  tw_advance(wheel_, 1000, TW_ALL);
  start(&p[0], 5, 0);
  cr_assert_eq(tw_timer_deadline(&p[0].timer), 1005);
  start(&p[1], UINT64_MAX, 0);
  cr_assert_eq(tw_timer_deadline(&p[1].timer), TW_NEVER - 1);
  start(&p[2], UINT64_MAX - 1000, 0); /* 1000 + that = TW_NEVER exactly */
  cr_assert_eq(tw_timer_deadline(&p[2].timer), TW_NEVER - 1);
  start(&p[3], UINT64_MAX - 999, 0); /* 1000 + that wraps to 0 */
  cr_assert_eq(tw_timer_deadline(&p[3].timer), TW_NEVER - 1);
  start(&p[4], UINT64_MAX - 1001, 0); /* TW_NEVER - 1 itself */
  cr_assert_eq(tw_timer_deadline(&p[4].timer), TW_NEVER - 1);
  cr_assert_eq(tw_count(wheel_), 5);

  cr_assert_eq(tw_advance(wheel_, TW_NEVER - 2, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER - 1);
  cr_assert_eq(tw_advance(wheel_, TW_NEVER - 1, TW_ALL), 4);
  EXPECT_FIRED(1, 2, 3, 4);
}

Test(wheel, rule3_saturated_timer_counts_and_fires_only_at_never_minus_one) {
  static struct probe p;
  tw_wheel_free(wheel_);
  wheel_ = tw_wheel_new(UINT64_MAX - 10);
  probes_init(&p, 1);
  start(&p, 100, 0);
  cr_assert_eq(tw_timer_deadline(&p.timer), TW_NEVER - 1);
  cr_assert_eq(tw_count(wheel_), 1);
  cr_assert_eq(tw_advance(wheel_, TW_NEVER - 2, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, TW_NEVER, TW_ALL), 1);
  EXPECT_FIRED(0);
}

Test(wheel, rule3_repeat_and_again_near_uint64_max_saturate) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 10, UINT64_MAX); /* repeat re-arm saturates */
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 1);
  cr_assert(log_[0].active);
  cr_assert_eq(log_[0].deadline, TW_NEVER - 1);
  cr_assert_eq(tw_timer_get_repeat(&p[0].timer), UINT64_MAX);
  start(&p[1], 5, 0);
  tw_timer_set_repeat(&p[1].timer, UINT64_MAX - 3);
  cr_assert_eq(tw_timer_again(wheel_, &p[1].timer), 0);
  cr_assert_eq(tw_timer_deadline(&p[1].timer), TW_NEVER - 1);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER - 1);
  cr_assert_eq(tw_count(wheel_), 2);
}

Test(wheel, time_at_uint64_max_fires_saturated_timers_and_stays_there) {
  static struct probe p[2];
  probes_init(p, 2);
  start_at(&p[0], UINT64_MAX - 1);
  start(&p[1], UINT64_MAX, 0);
  cr_assert_eq(tw_advance(wheel_, UINT64_MAX, TW_ALL), 2);
  EXPECT_FIRED(0, 1);
  cr_assert_eq(tw_now(wheel_), UINT64_MAX);
  start(&p[0], 1, 0); /* now + 1 saturates below now: due at once */
  cr_assert_eq(tw_timer_deadline(&p[0].timer), TW_NEVER - 1);
  cr_assert_leq(tw_next_expiry(wheel_), tw_now(wheel_));
  cr_assert_eq(tw_advance(wheel_, 5, TW_ALL), 1); /* backwards: clamped */
  cr_assert_eq(tw_now(wheel_), UINT64_MAX);
}

/* A wheel may start at any time, UINT64_MAX included: a timeout then
 * saturates below now, so the timer is due at once and fires at the next
 * advance. */
Test(wheel, a_wheel_created_at_uint64_max_runs_its_timers) {
  static struct probe p[2];
  tw_wheel_free(wheel_);
  wheel_ = tw_wheel_new(UINT64_MAX);
  cr_assert_not_null(wheel_);
  cr_assert_eq(tw_now(wheel_), UINT64_MAX);
  probes_init(p, 2);
  start(&p[0], 1, 0);
  start_at(&p[1], 7);
  cr_assert_eq(tw_timer_deadline(&p[0].timer), TW_NEVER - 1);
  cr_assert_eq(tw_next_expiry(wheel_), 7);
  cr_assert_eq(tw_advance(wheel_, UINT64_MAX, TW_ALL), 2);
  EXPECT_FIRED(1, 0);
  cr_assert_eq(tw_count(wheel_), 0);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
}

Test(wheel, rule3_start_at_never_saturates) {
  static struct probe p;
  probes_init(&p, 1);
  start_at(&p, TW_NEVER);
  cr_assert_eq(tw_timer_deadline(&p.timer), TW_NEVER - 1);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER - 1);
}

Test(wheel,
     rule3_start_at_in_the_past_keeps_deadline_fires_next_advance_in_order) {
  static struct probe p[4];
  probes_init(p, 4);
  tw_advance(wheel_, 500, TW_ALL);
  start_at(&p[0], 400);
  start_at(&p[1], 100);
  start_at(&p[2], 500);
  start_at(&p[3], 100);
  cr_assert_eq(tw_timer_deadline(&p[1].timer), 100);
  cr_assert_eq(tw_next_expiry(wheel_), 100);
  cr_assert_eq(tw_advance(wheel_, 500, TW_ALL), 4); /* same now: still fires */
  EXPECT_FIRED(1, 3, 0, 2);
}

/* Rule 4: starting an active timer forgets the old deadline. */
Test(wheel, rule4_restart_later_forgets_old_deadline) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 100, 0);
  start(&p, 5000, 0);
  cr_assert_eq(tw_count(wheel_), 1);
  cr_assert_eq(tw_timer_deadline(&p.timer), 5000);
  cr_assert_eq(tw_advance(wheel_, 4999, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 5000, TW_ALL), 1);
  cr_assert_eq(tw_advance(wheel_, 100000, TW_ALL), 0);
}

Test(wheel, rule4_restart_earlier_fires_at_new_deadline_only) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 5000, 0);
  start(&p, 70, 0);
  cr_assert_eq(tw_next_expiry(wheel_), 70);
  cr_assert_eq(tw_advance(wheel_, 69, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 70, TW_ALL), 1);
  cr_assert_eq(tw_advance(wheel_, 10000, TW_ALL), 0);
}

static int calls_a, calls_b;
static void count_a(tw_timer *t) {
  (void)t;
  calls_a++;
}
static void count_b(tw_timer *t) {
  (void)t;
  calls_b++;
}

/* Rule 4: every start takes the callback and repeat it is given, whichever
 * path it takes: a stopped timer (the common start), an active one moved
 * earlier (re-filed), an active one moved later (the inline store). */
Test(wheel, rule4_every_start_takes_its_callback_and_repeat) {
  static tw_timer t[3];
  calls_a = calls_b = 0;
  for (int i = 0; i < 3; i++) {
    tw_timer_init(&t[i]);
    cr_assert_eq(tw_timer_start(wheel_, &t[i], count_a, 1000, 7), 0);
  }
  cr_assert_eq(tw_timer_stop(wheel_, &t[0]), 0);
  cr_assert_eq(tw_timer_start(wheel_, &t[0], count_b, 100, 50), 0);
  cr_assert_eq(tw_timer_start(wheel_, &t[1], count_b, 100, 50), 0);
  cr_assert_eq(tw_timer_start(wheel_, &t[2], count_b, 2000, 50), 0);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(tw_timer_get_repeat(&t[i]), 50, "timer %d", i);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), 2);
  cr_assert_eq(tw_advance(wheel_, 150, TW_ALL), 2);
  cr_assert_eq(tw_advance(wheel_, 2000, TW_ALL), 3);
  cr_assert_eq(calls_a, 0);
  cr_assert_eq(calls_b, 7);
  cr_assert_eq(tw_timer_deadline(&t[2]), 2050);
}

/* Rule 4: a reset to a later deadline is a store. The other timers in the
 * same slot, and the timer's own links, are left exactly as they were. */
Test(wheel, rule4_reset_later_touches_no_other_timer) {
  static struct probe p[3];
  tw_timer before[3];
  probes_init(p, 3);
  for (int i = 0; i < 3; i++)
    start(&p[i], 3000, 0); /* one level-1 slot */
  for (int i = 0; i < 3; i++)
    before[i] = p[i].timer;
  start(&p[1], 3010, 0); /* the middle one: both neighbours would change */
  cr_assert(memcmp(&before[0], &p[0].timer, sizeof(tw_timer)) == 0);
  cr_assert(memcmp(&before[2], &p[2].timer, sizeof(tw_timer)) == 0);
  cr_assert(memcmp(&before[1].tw__link, &p[1].timer.tw__link,
                   sizeof p[1].timer.tw__link) == 0);
  cr_assert_eq(tw_timer_deadline(&p[1].timer), 3010);
  cr_assert_eq(tw_advance(wheel_, 3000, TW_ALL), 2);
  EXPECT_FIRED(0, 2);
  cr_assert_eq(tw_advance(wheel_, 3009, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 3010, TW_ALL), 1);
  EXPECT_FIRED(1);
}

/* Rule 4, repeated idle resets: never early, exact at the last deadline. */
Test(wheel, rule4_many_resets_fire_once_at_the_last_deadline) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 30000, 0);
  for (uint64_t now = 10; now <= 20000; now += 10) {
    cr_assert_eq(tw_advance(wheel_, now, TW_ALL), 0);
    start(&p, 30000 + now % 700, 0);
  }
  uint64_t deadline = tw_timer_deadline(&p.timer);
  cr_assert_eq(deadline, 20000 + 30000 + 20000 % 700);
  cr_assert_eq(tw_next_expiry(wheel_), deadline);
  cr_assert_eq(tw_advance(wheel_, deadline - 1, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, deadline, TW_ALL), 1);
}

/* Rule 7: the budget. */
Test(wheel, rule7_budget_limits_callbacks_and_leftovers_fire_first) {
  static struct probe p[6];
  probes_init(p, 6);
  for (int i = 0; i < 5; i++)
    start(&p[i], 10 + (uint64_t)i, 0);
  cr_assert_eq(tw_advance(wheel_, 100, 2), 2);
  EXPECT_FIRED(0, 1);
  cr_assert_leq(tw_next_expiry(wheel_), 100);
  start(&p[5], 0, 0); /* due at 100, started after the leftovers */
  cr_assert_eq(tw_count(wheel_), 4);
  cr_assert_eq(tw_advance(wheel_, 100, 2), 2);
  EXPECT_FIRED(2, 3);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), 2);
  EXPECT_FIRED(4, 5);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
}

Test(wheel, rule7_budget_zero_moves_time_and_runs_nothing) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 10, 0);
  cr_assert_eq(tw_advance(wheel_, 50, 0), 0);
  cr_assert_eq(tw_now(wheel_), 50);
  cr_assert_leq(tw_next_expiry(wheel_), 50);
  cr_assert_eq(tw_advance(wheel_, 50, TW_ALL), 1);
}

Test(wheel, rule7_time_never_runs_backwards) {
  static struct probe p;
  probes_init(&p, 1);
  tw_advance(wheel_, 1000, TW_ALL);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 0);
  cr_assert_eq(tw_now(wheel_), 1000);
  start(&p, 5, 0);
  cr_assert_eq(tw_timer_deadline(&p.timer), 1005);
  cr_assert_eq(tw_advance(wheel_, 1004, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 0, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 1005, TW_ALL), 1);
}

Test(wheel, rule7_now_inside_callbacks_is_the_clamped_advance_time) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 10, 0);
  start(&p[1], 4000, 0);
  tw_advance(wheel_, 9000, TW_ALL);
  cr_assert_eq(log_len, 2);
  cr_assert_eq(log_[0].now, 9000);
  cr_assert_eq(log_[1].now, 9000);
}

/* Rule 8: next expiry is the earliest deadline, TW_NEVER when idle. */
Test(wheel, rule8_next_expiry_is_the_earliest_deadline_across_levels) {
  static struct probe p[4];
  probes_init(p, 4);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
  start(&p[0], 300000, 0); /* level 2 */
  cr_assert_eq(tw_next_expiry(wheel_), 300000);
  start(&p[1], 5000, 0); /* level 1 */
  start(&p[2], 70, 0);   /* level 0 */
  start(&p[3], 4097, 0); /* level 1, earlier than p[1] in the same level */
  cr_assert_eq(tw_next_expiry(wheel_), 70);
  tw_timer_stop(wheel_, &p[2].timer);
  cr_assert_eq(tw_next_expiry(wheel_), 4097);
  tw_timer_stop(wheel_, &p[3].timer);
  cr_assert_eq(tw_next_expiry(wheel_), 5000);
}

Test(wheel, rule8_next_expiry_is_exact_inside_a_slot_not_its_start) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 65536 * 5 + 1234, 0); /* mid-slot at level 2 */
  cr_assert_eq(tw_next_expiry(wheel_), 65536 * 5 + 1234);
  tw_advance(wheel_, 65536 * 5, TW_ALL); /* its block begins: at level 1 */
  cr_assert_eq(tw_next_expiry(wheel_), 65536 * 5 + 1234);
  tw_advance(wheel_, 65536 * 5 + 1024, TW_ALL); /* drained to level 0 */
  cr_assert_eq(tw_next_expiry(wheel_), 65536 * 5 + 1234);
}

Test(wheel, rule8_next_expiry_follows_a_timer_moved_later) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 4100, 0);
  start(&p[1], 9000, 0);
  start(&p[0], 8000, 0); /* stale in its old slot */
  cr_assert_eq(tw_next_expiry(wheel_), 8000);
  start(&p[0], 20000, 0);
  cr_assert_eq(tw_next_expiry(wheel_), 9000);
  cr_assert_eq(tw_advance(wheel_, 9000, TW_ALL), 1);
  EXPECT_FIRED(1);
  cr_assert_eq(tw_next_expiry(wheel_), 20000);
}

/*
 * Rule 8's bound: one tw_next_expiry re-files at most 1,024 timers
 * (TW_EXPIRY_REFILES). 64 timers due at each of ticks 1-60, all reset far
 * later, leave 60 dirty slots in a row, each worth re-filing alone: one
 * call re-files 16 of them; the answer is a bound then (a wasted wakeup),
 * never later than the earliest deadline, and the advances that follow
 * move the timers on and fire none of them early. Without the cap one
 * call re-filed all 3,840.
 */
enum { REFILES = 1024, DIRTY_SLOT = 64 }; /* TW_EXPIRY_REFILES, _RESCAN_LIMIT */

Test(wheel, rule8_one_next_expiry_refiles_at_most_1024_timers) {
  enum { TICKS = 60, PER_TICK = DIRTY_SLOT }; /* fewer firings than LOG_MAX */
  static struct probe p[TICKS * PER_TICK];
  uint64_t moves, at;
  probes_init(p, TICKS * PER_TICK);
  for (size_t i = 0; i < TICKS * PER_TICK; i++)
    start_at(&p[i], 1 + i / PER_TICK);
  for (size_t i = 0; i < TICKS * PER_TICK; i++)
    start_at(&p[i], 100000 + i);
  moves = tw_moves(wheel_);
  at = tw_next_expiry(wheel_);
  cr_assert_eq(tw_moves(wheel_) - moves, REFILES, "one call re-filed %llu",
               (unsigned long long)(tw_moves(wheel_) - moves));
  cr_assert_leq(at, 100000);
  for (int wasted = 0; (at = tw_next_expiry(wheel_)) < 100000; wasted++) {
    cr_assert_lt(wasted, TICKS, "no progress");
    cr_assert_eq(tw_advance(wheel_, at, TW_ALL), 0);
  }
  cr_assert_eq(at, 100000);
  cr_assert_eq(tw_advance(wheel_, 100000 + TICKS * PER_TICK, TW_ALL),
               TICKS * PER_TICK);
  for (size_t i = 0; i < TICKS * PER_TICK; i++)
    cr_assert_eq(log_[i].id, (int)i); /* in deadline order */
  log_len = 0;
}

/* A dirty slot of more than 64 timers is not re-filed whatever the call
 * may still re-file: its bound answers (a wasted wakeup), and the advance
 * at that time moves the timers on. */
Test(wheel, rule8_a_dirty_slot_of_more_than_64_answers_its_bound) {
  enum { N = DIRTY_SLOT + 1 };
  static struct probe p[N];
  uint64_t moves;
  probes_init(p, N);
  for (int i = 0; i < N; i++)
    start_at(&p[i], 50);
  for (int i = 0; i < N; i++)
    start_at(&p[i], 9000 + (uint64_t)i);
  moves = tw_moves(wheel_);
  cr_assert_eq(tw_next_expiry(wheel_), 50);
  cr_assert_eq(tw_moves(wheel_), moves);
  cr_assert_eq(tw_advance(wheel_, 50, TW_ALL), 0);
  cr_assert_eq(tw_next_expiry(wheel_), 9000);
}

/*
 * The same bound when the call first ends a walk a budget paused (helper
 * 38's probe, scaled): 100 timers due at tick 100, walked 36 by a slice
 * (the minimum's holder among them: the slot is dirty), the 64
 * left moved later; and 16 dirty slots of 64 at ticks 150-165, moved
 * later. The walk's end re-files its 64 (with `stale_too`, every timer of
 * tick 100 was moved later first: the walk found none due), and the
 * search then 15 slots: 1,024 in all. Once the walk and the search each
 * had their own budget: 64 more in one call.
 */
enum { PAUSED_A = 100, PAUSED_B = REFILES };
static struct probe paused[PAUSED_A + PAUSED_B];

/* The setup above, then one tw_next_expiry: its answer, once it is checked
 * to have re-filed exactly 1,024 timers. */
static uint64_t next_expiry_after_a_paused_walk(int stale_too) {
  uint64_t moves, at;
  probes_init(paused, PAUSED_A + PAUSED_B);
  for (int i = 0; i < PAUSED_A + PAUSED_B; i++)
    start_at(&paused[i],
             i < PAUSED_A ? 100 : 150 + (uint64_t)(i - PAUSED_A) / DIRTY_SLOT);
  for (int i = stale_too ? 0 : PAUSED_A; i < PAUSED_A + PAUSED_B; i++)
    start_at(&paused[i], 9000 + (uint64_t)i);
  cr_assert_eq(tw_advance_slice(wheel_, 100, 36), 0);
  for (int i = 18; i < 82; i++) /* the 64 tick 100's walk left */
    start_at(&paused[i], 9000 + (uint64_t)i);
  moves = tw_moves(wheel_);
  at = tw_next_expiry(wheel_);
  cr_assert_eq(tw_moves(wheel_) - moves, REFILES, "one call re-filed %llu",
               (unsigned long long)(tw_moves(wheel_) - moves));
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  return at;
}

/* The walk took 36 due timers: they answer, exactly. */
Test(wheel, rule8_one_next_expiry_refiles_at_most_1024_after_a_paused_walk) {
  cr_assert_eq(next_expiry_after_a_paused_walk(0), 100);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), 36);
  log_len = 0;
}

/* The walk found only stale timers (all of tick 100's moved later before
 * the slice): tick 165's dirty slot, the 16th, answers as it is, early
 * (more than 64 are active). */
Test(wheel, rule8_a_paused_walk_s_refilings_count_against_the_search) {
  cr_assert_eq(next_expiry_after_a_paused_walk(1), 165);
  cr_assert_eq(tw_advance(wheel_, 20000, TW_ALL), PAUSED_A + PAUSED_B);
  log_len = 0;
}

/*
 * A timer re-armed earlier stays in its slot while the new deadline is no
 * earlier than the slot's start (wheel.c, stays_in_slot). The slot's
 * minimum must follow it down, whether it held the minimum or not, and a
 * deadline before the slot's start must take it out of the slot.
 */
Test(wheel, rule8_next_expiry_follows_a_timer_moved_earlier_inside_its_slot) {
  static struct probe p[3];
  probes_init(p, 3);
  start_at(&p[0], 1000); /* the level-1 slot [768, 1024); holds the minimum */
  start_at(&p[1], 1010);
  start_at(&p[1], 5000); /* later: stale in its slot */
  start_at(&p[1], 800);  /* earlier, inside the slot */
  cr_assert_eq(tw_next_expiry(wheel_), 800);
  start_at(&p[0], 790); /* the former holder, below the new minimum */
  cr_assert_eq(tw_next_expiry(wheel_), 790);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  start_at(&p[2], 1020);
  start_at(&p[2], 767); /* before the slot's start: filed elsewhere */
  cr_assert_eq(tw_next_expiry(wheel_), 767);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_advance(wheel_, 766, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 767, TW_ALL), 1);
  cr_assert_eq(tw_advance(wheel_, 789, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 790, TW_ALL), 1);
  cr_assert_eq(tw_next_expiry(wheel_), 800);
  cr_assert_eq(tw_advance(wheel_, 800, TW_ALL), 1);
  EXPECT_FIRED(2, 0, 1);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
}

/*
 * A stale timer re-armed earlier but after its slot's minimum (inline: the
 * store of twheel.h, tw__may_store_earlier) or at it (the library) stays,
 * the minimum holds, and it fires at its new deadline in the order of its
 * latest start. Just below the minimum, the minimum follows it. The inline
 * path is told apart in test_uv.c, which counts the library's calls.
 */
Test(wheel,
     rule8_next_expiry_holds_for_restarts_earlier_down_to_the_slot_minimum) {
  static struct probe p[5];
  probes_init(p, 5);
  start_at(&p[0], 1000); /* the level-1 slot [768, 1024); holds the minimum */
  for (int i = 1; i <= 4; i++) {
    start_at(&p[i], 1000 + 5 * (uint64_t)i);
    start_at(&p[i], 5000); /* later: stale in its slot */
  }
  start_at(&p[2], 1005);
  start_at(&p[1], 1005); /* earlier, above the minimum: after p[2] */
  start_at(&p[3], 1000); /* down to the minimum: after p[0] */
  cr_assert_eq(tw_next_expiry(wheel_), 1000);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  start_at(&p[4], 999); /* below it: the new minimum */
  cr_assert_eq(tw_next_expiry(wheel_), 999);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_moves(wheel_), 0);
  cr_assert_eq(tw_advance(wheel_, 998, TW_ALL), 0);
  cr_assert_eq(tw_advance(wheel_, 999, TW_ALL), 1);
  cr_assert_eq(tw_advance(wheel_, 1004, TW_ALL), 2);
  cr_assert_eq(tw_advance(wheel_, 1005, TW_ALL), 2);
  EXPECT_FIRED(4, 0, 3, 2, 1);
}

/*
 * A stop that empties a slot leaves its occupied bit set (wheel.h): the next
 * answer must not read the old minimum, and a timer filed there later, at
 * an earlier deadline than the last one, sets it afresh.
 */
Test(wheel, rule8_next_expiry_is_exact_in_a_slot_a_stop_emptied) {
  static struct probe p[3];
  probes_init(p, 3);
  start_at(&p[0], 5000); /* alone in the level-1 slot [4864, 5120) */
  cr_assert_eq(tw_timer_stop(wheel_, &p[0].timer), 0);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
  start_at(&p[0], 5000);
  cr_assert_eq(tw_timer_stop(wheel_, &p[0].timer), 0);
  start_at(&p[1], 5100); /* the same slot, emptied by the stop */
  cr_assert_eq(tw_next_expiry(wheel_), 5100);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_timer_stop(wheel_, &p[1].timer), 0);
  start_at(&p[2], 4900);
  cr_assert_eq(tw_next_expiry(wheel_), 4900);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_advance(wheel_, 6000, TW_ALL), 1);
  EXPECT_FIRED(2);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
}

/*
 * The same when the slot is the one a budget stopped collecting (at pos):
 * its bit must not outlive the collection, or a timer filed there 512
 * ticks later would be missed by the advances (never lost, rule 1).
 */
Test(wheel, rule1_a_slot_emptied_while_collected_is_refiled_later) {
  static struct probe p[3];
  probes_init(p, 3);
  start_at(&p[0], 10);
  start_at(&p[1], 10);
  cr_assert_eq(tw_advance_slice(wheel_, 10, 1), 0); /* collected p[0] only */
  cr_assert_eq(tw_timer_stop(wheel_, &p[1].timer), 0);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_advance(wheel_, 20, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_advance(wheel_, 300, TW_ALL), 0);
  start_at(&p[2], 522); /* level 0, the same slot as tick 10 */
  cr_assert_null(tw__check(wheel_, 1), "%s", tw__check(wheel_, 1));
  cr_assert_eq(tw_next_expiry(wheel_), 522);
  cr_assert_eq(tw_advance(wheel_, 600, TW_ALL), 1);
  EXPECT_FIRED(2);
}

/* Rule 9: stop is idempotent; again's rules; bad arguments change nothing. */
Test(wheel, rule9_stop_is_idempotent) {
  static struct probe p;
  probes_init(&p, 1);
  cr_assert_eq(tw_timer_stop(wheel_, &p.timer), 0); /* never started */
  start(&p, 10, 0);
  cr_assert_eq(tw_timer_stop(wheel_, &p.timer), 0);
  cr_assert_eq(tw_timer_stop(wheel_, &p.timer), 0);
  cr_assert_eq(tw_count(wheel_), 0);
  cr_assert_not(tw_timer_is_active(&p.timer));
  cr_assert_eq(tw_timer_deadline(&p.timer), TW_NEVER);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), 0);
}

Test(wheel, rule9_again_on_never_started_timer_is_einval) {
  static struct probe p;
  probes_init(&p, 1);
  tw_timer_set_repeat(&p.timer, 10);
  cr_assert_eq(tw_timer_again(wheel_, &p.timer), -EINVAL);
  cr_assert_not(tw_timer_is_active(&p.timer));
  cr_assert_eq(tw_count(wheel_), 0);
}

Test(wheel, rule9_again_with_repeat_zero_does_nothing) {
  static struct probe p[2];
  probes_init(p, 2);
  start(&p[0], 50, 0);
  cr_assert_eq(tw_timer_again(wheel_, &p[0].timer), 0);
  cr_assert_eq(tw_timer_deadline(&p[0].timer), 50); /* still armed as it was */
  start(&p[1], 50, 0);
  tw_timer_stop(wheel_, &p[1].timer);
  cr_assert_eq(tw_timer_again(wheel_, &p[1].timer), 0);
  cr_assert_not(tw_timer_is_active(&p[1].timer)); /* still stopped */
}

Test(wheel, rule9_again_rearms_at_now_plus_repeat) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 1000, 0);
  tw_timer_stop(wheel_, &p.timer);
  tw_timer_set_repeat(&p.timer, 30);
  tw_advance(wheel_, 7, TW_ALL);
  cr_assert_eq(tw_timer_again(wheel_, &p.timer), 0);
  cr_assert_eq(tw_timer_deadline(&p.timer), 37);
  cr_assert_eq(tw_timer_get_repeat(&p.timer), 30);
  cr_assert_eq(tw_advance(wheel_, 37, TW_ALL), 1);
  cr_assert_eq(tw_timer_deadline(&p.timer), 67);
}

Test(wheel, rule9_null_arguments_are_einval_and_change_nothing) {
  static struct probe p;
  probes_init(&p, 1);
  start(&p, 40, 0);
  tw_timer copy = p.timer;
  cr_assert_eq(tw_timer_start(NULL, &p.timer, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start(wheel_, NULL, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start(wheel_, &p.timer, NULL, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(NULL, &p.timer, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel_, NULL, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel_, &p.timer, NULL, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_stop(NULL, &p.timer), -EINVAL);
  cr_assert_eq(tw_timer_stop(wheel_, NULL), -EINVAL);
  cr_assert_eq(tw_timer_again(NULL, &p.timer), -EINVAL);
  cr_assert_eq(tw_timer_again(wheel_, NULL), -EINVAL);
  cr_assert(memcmp(&copy, &p.timer, sizeof copy) == 0);
  cr_assert_eq(tw_count(wheel_), 1);
  cr_assert_eq(tw_next_expiry(wheel_), 40);

  tw_timer_set_repeat(NULL, 5);
  cr_assert_eq(tw_timer_get_repeat(NULL), 0);
  cr_assert_eq(tw_timer_is_active(NULL), 0);
  cr_assert_eq(tw_timer_deadline(NULL), TW_NEVER);
  tw_timer_init(NULL);
  cr_assert_eq(tw_now(NULL), 0);
  cr_assert_eq(tw_count(NULL), 0);
  cr_assert_eq(tw_next_expiry(NULL), TW_NEVER);
  cr_assert_eq(tw_advance(NULL, 100, TW_ALL), 0);
  tw_wheel_free(NULL);
  cr_assert_str_eq(tw_strerror(-EINVAL), "invalid argument");
  cr_assert_str_eq(tw_strerror(0), "success");
  cr_assert_str_eq(tw_strerror(-12345), "unknown error");
}

Test(wheel, rule9_timer_used_before_init_is_einval) {
  tw_timer zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  cr_assert_eq(tw_timer_start(wheel_, &zeroed, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel_, &zeroed, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_stop(wheel_, &zeroed), -EINVAL);
  cr_assert_eq(tw_timer_again(wheel_, &zeroed), -EINVAL);
  cr_assert_not(tw_timer_is_active(&zeroed));
  cr_assert_eq(tw_timer_deadline(&zeroed), TW_NEVER);
  cr_assert_eq(tw_count(wheel_), 0);
  tw_timer_set_repeat(&zeroed, 5);
  cr_assert_eq(tw_timer_get_repeat(&zeroed), 0);
  tw_timer_set_fixed_rate(&zeroed, 1); /* does nothing: still zeroed */
  tw_timer_set_fixed_rate(NULL, 1);
  cr_assert_not(tw_timer_is_fixed_rate(&zeroed));
  for (size_t i = 0; i < sizeof zeroed; i++)
    cr_assert_eq(((const unsigned char *)&zeroed)[i], 0, "byte %zu", i);
  memset(&zeroed, 0x5a, sizeof zeroed); /* garbage, not a valid state */
  cr_assert_eq(tw_timer_start(wheel_, &zeroed, probe_cb, 5, 0), -EINVAL);
  memset(&zeroed, 0xff, sizeof zeroed);
  cr_assert_eq(tw_timer_start(wheel_, &zeroed, probe_cb, 5, 0), -EINVAL);
  /* The state of a waiting timer with no slot's index, the first past the
   * slots and the last: the inline paths that read its slot (an earlier
   * start, a stop) must test the index (an untested one reads past the
   * slots, into the wheel's private fields or past the wheel: caught under
   * ASan, and the stop unlinks NULL links). */
  uint64_t bad_index[] = {TW__SLOT_COUNT, TW__INDEX_MASK};
  for (size_t i = 0; i < sizeof bad_index / sizeof bad_index[0]; i++) {
    memset(&zeroed, 0, sizeof zeroed);
    zeroed.tw__order = TW__IN_SLOT | bad_index[i];
    zeroed.tw__deadline = TW_NEVER - 1;
    cr_assert_eq(tw_timer_start_at(wheel_, &zeroed, probe_cb, 5, 0), -EINVAL);
    cr_assert_eq(tw_timer_stop(wheel_, &zeroed), -EINVAL);
    cr_assert_eq(tw_count(wheel_), 0);
  }
}

/* Rule 10: no cost per tick. Far jumps finish at once (the timeout fails a
 * wheel that walks ticks or empty slots one by one). */
Test(wheel, rule10_advancing_across_2_pow_62_ticks_is_immediate, .timeout = 2) {
  static struct probe p[64];
  probes_init(p, 64);
  for (int i = 0; i < 64; i++)
    start_at(&p[i], (uint64_t)(i + 1) << 56);
  for (uint64_t now = 0; now < ((uint64_t)1 << 62); now += (uint64_t)1 << 50)
    tw_advance(wheel_, now, TW_ALL);
  cr_assert_eq(log_len, 63); /* all but the one due at 2^62 */
  cr_assert_eq(tw_advance(wheel_, (uint64_t)1 << 62, TW_ALL), 1);
  cr_assert_eq(tw_count(wheel_), 0);
}

Test(wheel, rule10_an_hour_of_idle_milliseconds_with_timers_far_away,
     .timeout = 2) {
  enum { N = 10000 };
  static struct probe p[N];
  probes_init(p, N);
  for (int i = 0; i < N; i++)
    start(&p[i], 24ull * 3600 * 1000 + (uint64_t)i, 0);
  for (uint64_t now = 1; now <= 3600 * 1000; now++) /* every ms of an hour */
    cr_assert_eq(tw_advance(wheel_, now, TW_ALL), 0);
  cr_assert_eq(tw_next_expiry(wheel_), 24ull * 3600 * 1000);
}

/* Rule 10 with a budget: draining a backlog 10 callbacks at a time costs
 * the same per timer as draining it at once (no work per waiting timer). */
Test(wheel, rule10_draining_a_backlog_with_a_budget_is_linear, .timeout = 5) {
  enum { N = 200000 };
  static struct probe p[N];
  probes_init(p, N);
  for (int i = 0; i < N; i++)
    start(&p[i], 1 + (uint64_t)(i % 5000), 0);
  size_t fired = 0, advances = 0;
  while (tw_count(wheel_)) {
    fired += tw_advance(wheel_, 10000, 10);
    advances++;
    log_len = 0;
  }
  cr_assert_eq(fired, N);
  cr_assert_eq(advances, N / 10);
}

/* Rule 10 for starts in the past: 200,000 start_at calls with decreasing
 * past deadlines cost O(1) each (the due list is ordered once, when read),
 * and still fire in deadline order. */
Test(wheel, rule10_starts_in_the_past_are_o1_and_fire_in_order, .timeout = 5) {
  enum { N = 200000 };
  static struct probe p[N];
  probes_init(p, N);
  tw_advance(wheel_, 1000000, TW_ALL);
  for (int i = 0; i < N; i++)
    start_at(&p[i], 1000000 - 1 - (uint64_t)i); /* each earlier than the last */
  cr_assert_eq(tw_next_expiry(wheel_), 1000000 - N);
  uint64_t last = 0;
  size_t fired = 0;
  while (tw_count(wheel_)) {
    fired += tw_advance(wheel_, 1000000, 1000);
    for (size_t k = 0; k < log_len; k++) {
      uint64_t d = 1000000 - 1 - (uint64_t)log_[k].id;
      cr_assert_geq(d, last, "out of deadline order");
      last = d;
    }
    log_len = 0;
  }
  cr_assert_eq(fired, N);
}

/* Lifetime: freeing the wheel releases active timers, never calls them. */
Test(wheel, free_with_active_timers_makes_them_inactive) {
  static struct probe p[3];
  probes_init(p, 3);
  start(&p[0], 5, 0);
  start(&p[1], 500000, 7);
  start_at(&p[2], 0);
  tw_wheel_free(wheel_);
  wheel_ = NULL;
  for (int i = 0; i < 3; i++) {
    cr_assert_not(tw_timer_is_active(&p[i].timer));
    cr_assert_eq(tw_timer_deadline(&p[i].timer), TW_NEVER);
  }
  cr_assert_eq(log_len, 0);
  wheel_ = tw_wheel_new(0);
  start(&p[0], 5, 0); /* reusable on another wheel */
  cr_assert_eq(tw_advance(wheel_, 5, TW_ALL), 1);
}

static void free_wheel_then(struct probe *p) {
  (void)p;
  tw_wheel_free(wheel_);
}

Test(wheel, free_from_a_callback_stops_the_advance_and_calls_nothing_more) {
  static struct probe p[3];
  probes_init(p, 3);
  p[0].then = free_wheel_then;
  start(&p[0], 5, 0);
  start(&p[1], 5, 0);
  start(&p[2], 6, 3);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 1);
  EXPECT_FIRED(0);
  cr_assert_not(tw_timer_is_active(&p[1].timer));
  cr_assert_not(tw_timer_is_active(&p[2].timer));
  wheel_ = tw_wheel_new(0); /* the advance freed the old one */
}

static void free_wheel_then_use_it(struct probe *p) {
  struct probe *other = p->arg;
  tw_wheel_free(wheel_);
  cr_assert_eq(tw_timer_start(wheel_, &other->timer, probe_cb, 5, 0), -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel_, &other->timer, probe_cb, 5, 0),
               -EINVAL);
  /* Deadlines far in the future too: the fast path refuses them. */
  cr_assert_eq(tw_timer_start(wheel_, &other->timer, probe_cb, 1000000, 0),
               -EINVAL);
  cr_assert_eq(tw_timer_start_at(wheel_, &other->timer, probe_cb, 1000000, 0),
               -EINVAL);
  cr_assert_eq(tw_now(wheel_), TW_NEVER);
  cr_assert_eq(tw_timer_stop(wheel_, &other->timer), -EINVAL);
  cr_assert_eq(tw_timer_again(wheel_, &p->timer), -EINVAL);
  cr_assert_eq(tw_next_expiry(wheel_), TW_NEVER);
  cr_assert_eq(tw_count(wheel_), 0);
  cr_assert_eq(tw_advance(wheel_, 100, TW_ALL), 0);
  tw_wheel_free(wheel_); /* a second free does nothing */
}

Test(wheel,
     wheel_freed_in_a_callback_refuses_every_use_until_the_advance_returns) {
  static struct probe p[2];
  probes_init(p, 2);
  p[0].then = free_wheel_then_use_it;
  p[0].arg = &p[1];
  start(&p[0], 5, 5);
  start(&p[1], 50, 0);
  cr_assert_eq(tw_advance(wheel_, 10, TW_ALL), 1);
  cr_assert_not(tw_timer_is_active(&p[0].timer));
  cr_assert_not(tw_timer_is_active(&p[1].timer));
  wheel_ = tw_wheel_new(0); /* the advance freed the old one */
}

Test(wheel, stopped_timer_may_be_freed_and_the_wheel_goes_on) {
  tw_timer *heap[50];
  for (int i = 0; i < 50; i++) {
    heap[i] = malloc(sizeof *heap[i]);
    tw_timer_init(heap[i]);
    heap[i]->data = NULL;
    cr_assert_eq(tw_timer_start(wheel_, heap[i], probe_cb,
                                100 + (uint64_t)(i % 3) * 4000, 0),
                 0);
  }
  for (int i = 0; i < 50; i += 2) {
    cr_assert_eq(tw_timer_stop(wheel_, heap[i]), 0);
    free(heap[i]); /* ASan catches any later touch */
  }
  for (int i = 1; i < 50; i += 2)
    tw_timer_stop(wheel_, heap[i]);
  cr_assert_eq(tw_count(wheel_), 0);
  cr_assert_eq(tw_advance(wheel_, 100000, TW_ALL), 0);
  for (int i = 1; i < 50; i += 2)
    free(heap[i]);
}

/* The sizes README.md and the contract (rule 10) state for LP64: a layout
 * change must change them too. */
Test(wheel, sizes_are_what_the_readme_says) {
  if (sizeof(void *) != 8)
    return;
  cr_assert_eq(sizeof(tw_timer), 56);
  cr_assert_eq(tw_wheel_size(), 124800);
}
