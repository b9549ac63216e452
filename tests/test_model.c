/*
 * Randomized differential test: the real wheel against the reference model
 * (model.c), driven by the same random operations and compared exactly.
 * The operations on both sides and the comparisons are pair.c's, shared with
 * the fuzzer (tests/fuzz/fuzz_wheel.c); this file draws the operations.
 *
 * After every operation: tw_now, tw_count, tw_next_expiry (rule 8: exact,
 * TW_NEVER iff nothing is active; some seeds call it rarely, because it
 * re-files lazily moved timers and tw_advance must also cope without it),
 * and tw_timer_is_active, tw_timer_deadline and tw_timer_get_repeat of every
 * timer the operation touched; all timers are compared after every operation
 * while there are at most 255, every 1 + n/256 operations above that, and at
 * the end of a seed.
 * In an advance each callback asks the model which timer must fire next
 * (rules 1, 2, 5-7), so the fired sequence is compared as it happens, then
 * runs random actions on both sides: stop, restart or free timers due in the
 * same advance, start others, tw_next_expiry, a re-entrant tw_advance,
 * tw_wheel_free.
 *
 * The random stream depends only on the seed and the model (the wheel's
 * answers only steer it where they must equal the model's), so a seed
 * replays the same operations on any compiler and build.
 * A failure (or a crash, or a sanitizer report) names the seed and the
 * operation and prints the command that replays it.
 *
 * Environment:
 *   TW_MODEL_OPS=N         operations per seed (a longer run)
 *   TW_MODEL_SEED=S        run only seed S
 *   TW_MODEL_TRACE=1       print every operation to stderr, as C calls
 *   TW_MODEL_SWEEP=1       compare every timer after every operation
 *   TW_MODEL_ALLOW_EARLY=1 accept tw_next_expiry below the earliest deadline
 *                          (still never later) at any size, and count it
 *
 * Each test prints its counts to stderr, the runner the total for the run
 * (operations, and the share of tw_next_expiry calls earlier than the true
 * earliest deadline); meson keeps them in its test log.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define MODEL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MODEL_ASAN 1
#endif
#endif
#ifdef MODEL_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#include <twheel.h>

#include "pair.h"

/* ---- A deterministic PRNG: splitmix64 ---------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void) {
  uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in 0..n-1 (n > 0; the modulo bias is irrelevant here). */
static uint64_t below(uint64_t n) {
  return rnd() % n;
}

/* A random value of random magnitude. */
static uint64_t rnd_scaled(void) {
  uint64_t x = rnd();
  return x >> below(64);
}

/* 1 with probability percent/100. */
static int chance(unsigned percent) {
  return below(100) < percent;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

/* ---- What a test varies ------------------------------------------------ */

typedef struct profile {
  const char *name;  /* the Criterion test, for the reproduce line */
  uint64_t salt;     /* seeds are drawn from it */
  unsigned seeds;    /* fixed seeds per run */
  uint64_t ops;      /* operations per seed */
  size_t min_timers; /* timers per seed, drawn in [min, max] */
  size_t max_timers;
  unsigned restarts;    /* weight of start on an active timer */
  unsigned huge;        /* percent of advances that jump up to 1e9 */
  unsigned medium;      /* percent of the others that jump up to 1e6 */
  unsigned end_of_time; /* per mille of advances that jump near UINT64_MAX */
  unsigned budget;      /* percent of advances with a budget of 1..3 */
  unsigned slices; /* percent chance that an advance has a work budget */
  unsigned actions;     /* percent chance of each of 3 callback action slots */
  unsigned new_wheel; /* per 100,000 operations: free and recreate the wheel */
  unsigned fill;      /* percent of the timers kept active by start bursts */
  unsigned rollover_levels; /* jumps to digit rollovers: of levels 1..this */
} profile;

/* A seed's own character, drawn from the seed. */
typedef struct personality {
  uint64_t grain;        /* coarse time step: makes equal deadlines common */
  unsigned expiry_check; /* percent of operations followed by tw_next_expiry */
  unsigned repeating;    /* percent of starts with a period */
} personality;

/* ---- The run: globals, since the callbacks need them -------------------- */

static pair P; /* the wheel and the model, driven together (pair.h) */

static struct run {
  const profile *profile;
  personality per;
  uint64_t seed;
  int sweep_always, allow_early;
  size_t active; /* tw_count after the last operation */

  /* Timers touched by the operation running now (compared after it). */
  size_t *touched;
  size_t touched_len;
  unsigned char *touched_mark;
} R;

static struct stats {
  uint64_t ops, advances, callbacks, actions, expiry_checks, expiry_active;
  uint64_t expiry_early, empty_wakeups, wakeups, seeds, sweeps;
  uint64_t later_resets, stopped_before_turn, wheel_frees_in_callback;
  uint64_t slices, sliced_wakeups;
  uint64_t active_sum; /* of tw_count after each operation */
} S;

static void fail(const char *fmt, ...) PAIR_PRINTF(1, 2);

static void fail(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cr_assert_fail("model/%s seed %" PRIu64 " op %" PRIu64 " (now %" PRIu64
                 ", %zu timers%s): %s\n"
                 "  reproduce: TW_MODEL_SEED=%" PRIu64 " TW_MODEL_OPS=%" PRIu64
                 " TW_MODEL_TRACE=1 ./tests/test-model --filter 'model/%s'",
                 R.profile->name, R.seed, P.op, model_now(&P.m), P.n,
                 P.in_advance ? ", inside an advance" : "", msg, R.seed,
                 P.op + 1, R.profile->name);
}

/* A crash (or a sanitizer report) must name the seed and operation too;
 * this runs in a signal handler, so it only uses write(). */
static void put_str(const char *str) {
  ssize_t ignored = write(2, str, strlen(str));
  (void)ignored;
}

static void put_u64(uint64_t v) {
  char buf[24], *p = buf + sizeof buf;
  *--p = 0;
  do
    *--p = (char)('0' + v % 10);
  while (v /= 10);
  put_str(p);
}

static void report_where(void) {
  if (!R.profile)
    return;
  put_str("\nmodel/");
  put_str(R.profile->name);
  put_str(": died in seed ");
  put_u64(R.seed);
  put_str(" op ");
  put_u64(P.op);
  put_str("\n  reproduce: TW_MODEL_SEED=");
  put_u64(R.seed);
  put_str(" TW_MODEL_OPS=");
  put_u64(P.op + 1);
  put_str(" TW_MODEL_TRACE=1 ./tests/test-model --filter 'model/");
  put_str(R.profile->name);
  put_str("'\n");
}

static void on_crash(int sig) {
  report_where();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void report_crashes(void) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    signal(sigs[i], on_crash);
#ifdef MODEL_ASAN
  __sanitizer_set_death_callback(report_where);
#endif
}

/* P.touched: every operation on a timer reports it here. */
static void touch(size_t id) {
  if (!R.touched_mark[id]) {
    R.touched_mark[id] = 1;
    R.touched[R.touched_len++] = id;
  }
}

/* ---- Comparisons (pair.h), and what they count ------------------------- */

static void check_wheel(void) {
  pair_check_wheel(&P);
  if (!P.in_advance) {
    R.active = model_count(&P.m);
    S.active_sum += R.active;
  }
}

/*
 * Rule 8: never later than the earliest deadline. Exact while no slot can
 * hold more than TW_RESCAN_LIMIT (64) timers, i.e. with at most 64 active:
 * above that the wheel may answer a stale slot minimum (src/wheel.h), and
 * such early answers are counted and reported.
 */
static uint64_t check_expiry(void) {
  uint64_t earliest;
  int may_be_early = R.allow_early || model_count(&P.m) > 64;
  uint64_t got = pair_check_next_expiry(&P, may_be_early, &earliest);
  S.expiry_checks++;
  if (earliest != TW_NEVER) {
    S.expiry_active++;
    if (got < earliest)
      S.expiry_early++;
  }
  return got;
}

static void check_all_timers(void) {
  S.sweeps++;
  pair_check_all_timers(&P);
}

static void check_touched(void) {
  for (size_t i = 0; i < R.touched_len; i++) {
    pair_check_timer(&P, R.touched[i]);
    R.touched_mark[R.touched[i]] = 0;
  }
  R.touched_len = 0;
}

/* ---- Random values ----------------------------------------------------- */

/* Offsets at and around level edges. Draws index it, so its length and order
 * are part of every seed's operations: test_wheel.c keeps its own list. */
static const uint64_t level_edges[] = {
    1,
    254,
    255,
    256,
    257,
    511,
    512,
    513,
    65535,
    65536,
    65537,
    (UINT64_C(1) << 17) - 1,
    UINT64_C(1) << 17,
    (UINT64_C(1) << 24) - 1,
    UINT64_C(1) << 24,
    (UINT64_C(1) << 25) + 1,
    UINT64_C(1) << 30,
    (UINT64_C(1) << 32) - 1,
    UINT64_C(1) << 40,
    (UINT64_C(1) << 41) + 1,
    (UINT64_C(1) << 48) - 1,
    UINT64_C(1) << 56,
    UINT64_C(1) << 60,
    (UINT64_C(1) << 63) + 1,
};
#define N_EDGES (sizeof level_edges / sizeof level_edges[0])

/* The distance from now to a digit rollover of level 1..7, +-1. */
static uint64_t to_rollover(uint64_t now) {
  unsigned levels = chance(10) ? 7 : R.profile->rollover_levels;
  unsigned digit = 1 + (unsigned)below(levels);
  unsigned nudge = (unsigned)below(3);
  return rollover_distance(now, digit, nudge);
}

/* A timeout: 0, small, level edges, coarse, medium, huge, saturating. */
static uint64_t gen_timeout(void) {
  uint64_t now = model_now(&P.m);
  uint64_t r = below(100);
  if (r < 8)
    return 0;
  if (r < 38)
    return 1 + below(200);
  if (r < 48)
    return level_edges[below(N_EDGES)];
  if (r < 56)
    return to_rollover(now);
  if (r < 70)
    return R.per.grain * (1 + below(16));
  if (r < 82)
    return below(1000000);
  if (r < 90)
    return below(1000000000);
  if (r < 94)
    return rnd_scaled();
  if (r < 97)
    return UINT64_MAX - below(3); /* beyond saturation */
  /* exactly around the saturation point TW_NEVER - 1 */
  return sat_sub(TW_NEVER - 1, now) + below(3) - 1 + (now >= TW_NEVER - 1);
}

static size_t pick_active(void);

/* An absolute deadline: past, now, future, TW_NEVER, on a coarse grid, or
 * another timer's (equal deadlines: rule 2). */
static uint64_t gen_deadline(void) {
  uint64_t now = model_now(&P.m);
  uint64_t r = below(100);
  if (r < 10) {
    uint64_t other = model_deadline(&P.m, pick_active());
    if (other != TW_NEVER)
      return other;
  }
  r = below(100);
  if (r < 15) {
    static const uint64_t back[] = {1, 100, 1000000, UINT64_MAX};
    return sat_sub(now, 1 + below(min_u64(back[below(4)], UINT64_MAX - 1)));
  }
  if (r < 25)
    return now;
  if (r < 30)
    return TW_NEVER;
  if (r < 33)
    return TW_NEVER - 1 - below(2);
  if (r < 55) {
    uint64_t g = R.per.grain;
    uint64_t base = now / g;
    if (base > (UINT64_MAX / g) - 8)
      return TW_NEVER;
    return (base + below(8)) * g;
  }
  return sat_add(now, gen_timeout());
}

static uint64_t gen_repeat(void) {
  uint64_t r;
  if (!chance(R.per.repeating))
    return 0;
  r = below(100);
  if (r < 45)
    return 1 + below(100);
  if (r < 70)
    return R.per.grain * (1 + below(8));
  if (r < 80)
    return level_edges[below(N_EDGES)];
  if (r < 92)
    return 1 + below(1000000000);
  return UINT64_MAX - below(2); /* every re-arm saturates */
}

/* How far an idle reset moves a deadline later. */
static uint64_t gen_later(void) {
  uint64_t r = below(100);
  if (r < 15)
    return 0; /* same deadline: still a new start for the order */
  if (r < 50)
    return 1 + below(100);
  if (r < 70)
    return R.per.grain * (1 + below(8));
  if (r < 80)
    return level_edges[below(N_EDGES)];
  if (r < 95)
    return below(10000000);
  return rnd();
}

/* The target of an advance: small, coarse, exactly at a deadline, at a
 * digit rollover, medium, huge, near the end of time, or backwards. */
static uint64_t gen_advance_to(void) {
  uint64_t now = model_now(&P.m);
  uint64_t r = below(1000);
  if (r < R.profile->end_of_time) {
    switch (below(4)) {
    case 0:
      return UINT64_MAX;
    case 1:
      return TW_NEVER - 1;
    case 2:
      return TW_NEVER - 2 - below(100);
    default:
      return sat_sub(UINT64_MAX, below(UINT64_C(1) << 40));
    }
  }
  r = below(100);
  if (r < R.profile->huge)
    return sat_add(now, below(1000000000));
  r = below(100);
  if (r < R.profile->medium)
    return sat_add(now, below(1000000));
  r = below(100);
  if (r < 35)
    return sat_add(now, below(101));
  if (r < 50)
    return sat_add(now, R.per.grain * below(9));
  if (r < 75) {
    uint64_t e = model_earliest(&P.m);
    if (e == TW_NEVER)
      return sat_add(now, below(1000));
    return sat_add(sat_sub(e, 1), below(3)); /* deadline -1, 0, +1 */
  }
  if (r < 85)
    return sat_add(now, to_rollover(now));
  if (r < 90)
    return now;
  return sat_sub(now, below(1 + min_u64(now, 1000))); /* ignored */
}

static size_t gen_budget(void) {
  uint64_t r = below(100);
  if (r < 4)
    return 0;
  if (r < 4 + R.profile->budget)
    return (size_t)(1 + below(3));
  if (r < 10 + R.profile->budget)
    return (size_t)(4 + below(30));
  return TW_ALL;
}

/* An active timer when one is found quickly, else any timer. */
static size_t pick_active(void) {
  size_t id = (size_t)below(P.n);
  for (int tries = 0; tries < 32 && !model_is_active(&P.m, id); tries++)
    id = (size_t)below(P.n);
  return id;
}

static size_t pick_inactive(void) {
  size_t id = (size_t)below(P.n);
  for (int tries = 0; tries < 16 && model_is_active(&P.m, id); tries++)
    id = (size_t)below(P.n);
  return id;
}

/* ---- Operations, each applied to the wheel and to the model ------------- */

static void on_fire(tw_timer *t);

/* Rule 4, the idle reset: restart an active timer at a later deadline
 * (through start or start_at), or earlier, or at the same deadline. */
static void do_restart(size_t id) {
  uint64_t now = model_now(&P.m);
  uint64_t old = model_deadline(&P.m, id);
  uint64_t repeat = chance(80) ? model_repeat(&P.m, id) : gen_repeat();
  uint64_t deadline;

  if (old == TW_NEVER || chance(15)) { /* not active, or a fresh timeout */
    pair_start(&P, id, gen_timeout(), repeat);
    return;
  }
  if (chance(25)) { /* onto another timer's deadline, or a grid point */
    uint64_t other = model_deadline(&P.m, pick_active());
    uint64_t g = R.per.grain;
    if (other == TW_NEVER || other < old)
      other = old / g > UINT64_MAX / g - 8 ? TW_NEVER - 1
                                           : (old / g + below(8)) * g;
    deadline = other < old ? old : other;
  } else if (chance(67))
    deadline = sat_add(old, gen_later());
  else if (old > now)
    deadline = now + below(old - now); /* earlier, still not due */
  else
    deadline = sat_sub(old, below(10)); /* a due timer, earlier still */
  if (old > now && deadline >= old)
    S.later_resets++; /* the store path, unless the timer is due already */
  if (deadline >= now && chance(60))
    pair_start(&P, id, deadline - now,
               repeat); /* saturates where start_at does */
  else
    pair_start_at(&P, id, deadline, repeat);
}

/* Free the user's struct and reuse the memory for a fresh timer, or init
 * the same memory again. Rule 6: the wheel must not touch a stopped timer
 * again (ASan would see it). */
static void do_free(size_t id) {
  if (chance(50))
    pair_reinit_timer(&P, id);
  else
    pair_replace_timer(&P, id);
}

/* Rule 9: bad input is refused and changes nothing. */
static void do_bad_input(size_t id) {
  tw_timer fresh;
  int rc;
  memset(&fresh, 0, sizeof fresh); /* never initialised */
  pair_trace(&P, "/* bad input on t[%zu]: -EINVAL */", id);
  switch (below(6)) {
  case 0:
    rc = tw_timer_start(P.w, pair_timer(&P, id), NULL, below(100), 0);
    break;
  case 1:
    rc = tw_timer_start(NULL, pair_timer(&P, id), on_fire, below(100), 0);
    break;
  case 2:
    rc = tw_timer_start_at(P.w, pair_timer(&P, id), NULL, below(100), 0);
    break;
  case 3:
    rc = tw_timer_stop(NULL, pair_timer(&P, id));
    break;
  case 4:
    rc = tw_timer_again(NULL, pair_timer(&P, id));
    break;
  default:
    rc = tw_timer_start(P.w, &fresh, on_fire, below(100), 0);
    break;
  }
  if (rc != -EINVAL)
    fail("bad input on t%zu returned %d, not -EINVAL", id, rc);
  pair_check_null_arguments(&P);
  touch(id);
}

/* tw_wheel_free with active timers: all become inactive, never called. */
static void do_new_wheel(void) {
  static const uint64_t starts[] = {0,
                                    1,
                                    63,
                                    4095,
                                    262143,
                                    1000000007,
                                    (UINT64_C(1) << 36) - 1,
                                    (UINT64_C(1) << 63) - 3,
                                    TW_NEVER - 100000};
  uint64_t start = chance(70) ? starts[below(sizeof starts / sizeof starts[0])]
                              : rnd_scaled();
  pair_new_wheel(&P, start);
  check_all_timers();
}

/* ---- Advance and callbacks --------------------------------------------- */

/* A timer collected by the advance running now that has not fired yet. */
static int pick_still_due(size_t *id) {
  const model *m = &P.m;
  size_t left = m->firing_len - m->firing_pos;
  if (!left)
    return 0;
  for (int tries = 0; tries < 4; tries++) {
    size_t i = m->firing[m->firing_pos + below(left)];
    if (m->timers[i].collected) {
      *id = i;
      return 1;
    }
  }
  return 0;
}

static void callback_action(size_t self) {
  size_t id;
  uint64_t r = below(100);

  if (P.wheel_freed)
    return;
  S.actions++;
  if (below(100000) < 2 * (uint64_t)R.profile->new_wheel) {
    pair_free_wheel_in_callback(&P);
    S.wheel_frees_in_callback++;
    return;
  }
  if (r < 20) { /* stop a timer due later in this advance: it must not fire */
    if (pick_still_due(&id)) {
      S.stopped_before_turn++;
      pair_stop(&P, id);
    }
  } else if (r < 35) { /* restart one: it waits for the next advance */
    if (pick_still_due(&id)) {
      S.stopped_before_turn++;
      if (chance(50)) {
        uint64_t timeout = chance(50) ? 0 : below(100);
        pair_start(&P, id, timeout, gen_repeat());
      } else {
        pair_start_at(&P, id, gen_deadline(), 0);
      }
    }
  } else if (r < 45) { /* restart itself, 0 included (rule 5) */
    uint64_t timeout = chance(40) ? 0 : gen_timeout();
    pair_start(&P, self, timeout, gen_repeat());
  } else if (r < 52) {
    pair_stop(&P, self);
  } else if (r < 65) { /* start another, maybe already due */
    id = pick_inactive();
    if (chance(50)) {
      uint64_t timeout = chance(50) ? 0 : below(300);
      pair_start(&P, id, timeout, gen_repeat());
    } else {
      uint64_t deadline = gen_deadline();
      pair_start_at(&P, id, deadline, gen_repeat());
    }
  } else if (r < 70) {
    pair_again(&P, chance(50) ? self : (size_t)below(P.n));
  } else if (r < 75) {
    pair_set_repeat(&P, self, chance(50) ? 0 : gen_repeat());
  } else if (r < 83) {
    check_expiry();
  } else if (r < 87) { /* re-entrant advance: 0, nothing changes */
    pair_reentrant_advance(&P, gen_advance_to());
  } else if (r < 93) { /* free itself or another, stopping it first */
    do_free(chance(50) ? self : (size_t)below(P.n));
  } else { /* the idle reset of any timer, from a callback */
    do_restart(pick_active());
  }
  check_wheel();
  check_touched();
}

static void on_fire(tw_timer *t) {
  size_t self;

  S.callbacks++;
  self = pair_callback_begins(&P, t);
  check_wheel();   /* rule 7: tw_now is the advance's clamped now */
  check_touched(); /* rule 6: re-armed or inactive before the callback */

  for (int slot = 0; slot < 3; slot++)
    if (chance(R.profile->actions))
      callback_action(self);
}

static size_t do_advance(uint64_t to, size_t budget) {
  size_t ran;
  S.advances++;
  ran = pair_advance(&P, to, budget);
  if (P.wheel_freed) /* the callback's tw_wheel_free took effect */
    pair_replace_freed_wheel(&P, rnd_scaled());
  return ran;
}

/* A work budget: none, a few units (which stop in the middle of moving
 * and collecting timers), or a slice. */
static size_t gen_work(void) {
  uint64_t r = below(100);
  if (r < 5)
    return 0;
  if (r < 40)
    return (size_t)(1 + below(4));
  if (r < 80)
    return (size_t)(5 + below(60));
  return (size_t)(65 + below(5000));
}

static size_t do_advance_slice(uint64_t to, size_t work) {
  size_t ran;
  S.advances++;
  S.slices++;
  ran = pair_advance_slice(&P, to, work);
  if (P.wheel_freed)
    pair_replace_freed_wheel(&P, rnd_scaled());
  return ran;
}

/* A loop that sleeps until tw_next_wakeup and advances a slice at a time,
 * as the adapters do: every wakeup is before or at the earliest deadline. */
static void do_sliced_wakeup(void) {
  uint64_t at = pair_check_next_wakeup(&P);
  if (at == TW_NEVER)
    return;
  S.sliced_wakeups++;
  do_advance_slice(at < model_now(&P.m) ? model_now(&P.m) : at, gen_work());
}

/* An advance to what tw_next_expiry says, as a loop would: counts wakeups
 * that fire nothing (rule 8's "every wakeup should fire something"). */
static void do_wakeup(void) {
  uint64_t at = check_expiry();
  if (at == TW_NEVER)
    return;
  S.wakeups++;
  if (do_advance(at, TW_ALL) == 0)
    S.empty_wakeups++;
}

/* ---- One seed ---------------------------------------------------------- */

/* A long timeout, as a server's idle timeout: survives many advances. */
static uint64_t gen_long_timeout(void) {
  switch (below(4)) {
  case 0:
    return 1000 + below(100000);
  case 1:
    return R.per.grain * (100 + below(1000));
  case 2: {
    uint64_t edge = level_edges[below(N_EDGES)];
    return edge + below(2);
  }
  default:
    return 100000 + below(100000000);
  }
}

static void one_op(void) {
  uint64_t r = below(100);
  if (R.active * 100 < R.profile->fill * P.n && chance(50)) {
    unsigned k = 1 + (unsigned)below(256); /* connections arriving */
    for (unsigned i = 0; i < k; i++) {
      size_t id = pick_inactive();
      uint64_t timeout = gen_long_timeout();
      pair_start(&P, id, timeout, chance(90) ? 0 : gen_repeat());
    }
  } else if (r < (uint64_t)R.profile->restarts) {
    do_restart(pick_active());
  } else if (r < 35) {
    size_t id = (size_t)below(P.n);
    uint64_t timeout = gen_timeout();
    pair_start(&P, id, timeout, gen_repeat());
  } else if (r < 43) {
    size_t id = chance(60) ? pick_active() : (size_t)below(P.n);
    uint64_t deadline = gen_deadline();
    pair_start_at(&P, id, deadline, gen_repeat());
  } else if (r < 51) {
    pair_stop(&P, chance(70) ? pick_active() : (size_t)below(P.n));
  } else if (r < 55) {
    pair_again(&P, chance(50) ? pick_active() : (size_t)below(P.n));
  } else if (r < 57) {
    size_t id = pick_active();
    pair_set_repeat(&P, id, gen_repeat());
  } else if (r < 59) {
    unsigned k = 1 + (unsigned)below(64); /* a burst of starts */
    for (unsigned i = 0; i < k; i++) {
      size_t id = (size_t)below(P.n);
      uint64_t timeout = gen_timeout();
      pair_start(&P, id, timeout, gen_repeat());
    }
  } else if (r < 61) {
    do_free(chance(50) ? pick_inactive() : (size_t)below(P.n));
  } else if (r < 62) {
    do_bad_input((size_t)below(P.n));
  } else if (r < 65) {
    do_wakeup();
  } else if (r < 70) {
    do_sliced_wakeup();
  } else if (r < 78 && chance(R.profile->slices)) {
    do_advance_slice(gen_advance_to(), gen_work());
  } else {
    uint64_t to = gen_advance_to();
    do_advance(to, gen_budget());
  }

  /* Back from the end of time now and then, and rarely from anywhere. */
  if ((model_now(&P.m) > TW_NEVER / 2 && chance(3)) ||
      below(100000) < R.profile->new_wheel)
    do_new_wheel();
}

static void run_seed(const profile *p, uint64_t seed, uint64_t ops) {
  static const uint64_t grains[] = {1, 1, 2, 8, 10, 64, 100, 1000, 4096};
  static const uint64_t starts[] = {
      0, 0, 1, 1000, 65530, 262140, (UINT64_C(1) << 48) - 7};

  R.profile = p;
  R.seed = seed;
  R.active = 0;
  rng_state = seed;
  uint64_t r;
  size_t n = (size_t)(p->min_timers + below(p->max_timers - p->min_timers + 1));
  R.per.grain = grains[below(sizeof grains / sizeof grains[0])];
  /* Most seeds call tw_next_expiry after every operation; some rarely, so
   * that advances also meet slots its re-filing would have cleaned. */
  r = below(100);
  R.per.expiry_check = r < 60 ? 100 : r < 85 ? (unsigned)(5 + below(60)) : 1;
  R.per.repeating = (unsigned)(5 + below(30));
  uint64_t start = chance(60) ? starts[below(sizeof starts / sizeof starts[0])]
                              : rnd_scaled();

  pair_init(&P, n, start);
  R.touched = calloc(n, sizeof *R.touched);
  R.touched_mark = calloc(n, 1);
  if (!R.touched || !R.touched_mark)
    fail("out of memory");
  R.touched_len = 0;
  pair_trace(&P,
             "/* seed %" PRIu64 ": %zu timers, grain %" PRIu64 " */ "
             "w = tw_wheel_new(%" PRIu64 "u);",
             seed, n, R.per.grain, start);

  /* Full sweeps cost O(timers): every operation for small wheels, about
   * every n/256 operations for large ones (touched timers always). */
  uint64_t sweep_every = R.sweep_always ? 1 : 1 + n / 256;

  for (P.op = 0; P.op < ops; P.op++) {
    one_op();
    check_wheel();
    check_touched();
    if (chance(R.per.expiry_check))
      check_expiry();
    if (P.op % sweep_every == 0)
      check_all_timers();
    S.ops++;
  }
  check_all_timers();
  check_expiry();

  pair_free(&P); /* with timers still active: they become inactive */
  free(R.touched);
  free(R.touched_mark);
  S.seeds++;
}

static double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* One line per test on stderr, and its numbers appended to the file the
 * runner named (see the report hooks below) for the total. Note: with --tap
 * Criterion sends the tests' stderr to /dev/null; run the binary directly
 * to see these lines. */
static void report_profile(const profile *p, double secs) {
  const char *path = getenv("TW_MODEL_STATS_FILE");
  fprintf(
      stderr,
      "model/%s: %" PRIu64 " operations, %" PRIu64 " seeds, %.2f s; "
      "%" PRIu64 " advances, %" PRIu64 " callbacks (%" PRIu64
      " actions in them); %.0f timers active on average; %" PRIu64
      " later resets, %" PRIu64 " due timers stopped or restarted before "
      "their turn, %" PRIu64 " wheels freed in a callback; %" PRIu64
      " advances with a work budget (%" PRIu64 " at tw_next_wakeup)\n"
      "model/%s: tw_next_expiry earlier than the earliest deadline in %" PRIu64
      " of %" PRIu64 " calls with timers active (wasted wakeups "
      "%.4f%%); %" PRIu64 " of %" PRIu64
      " advances to tw_next_expiry fired nothing\n",
      p->name, S.ops, S.seeds, secs, S.advances, S.callbacks, S.actions,
      S.ops ? (double)S.active_sum / (double)S.ops : 0.0, S.later_resets,
      S.stopped_before_turn, S.wheel_frees_in_callback, S.slices,
      S.sliced_wakeups, p->name, S.expiry_early,
      S.expiry_active, percent(S.expiry_early, S.expiry_active),
      S.empty_wakeups, S.wakeups);
  if (path && *path) {
    FILE *f = fopen(path, "a");
    if (f) {
      fprintf(
          f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
          S.ops, S.expiry_active, S.expiry_early, S.wakeups, S.empty_wakeups);
      fclose(f);
    }
  }
}

static uint64_t env_u64(const char *name, uint64_t fallback, int *set) {
  const char *s = getenv(name);
  if (set)
    *set = 0;
  if (!s || !*s)
    return fallback;
  if (set)
    *set = 1;
  return strtoull(s, NULL, 0);
}

static void run_profile(const profile *p) {
  int one_seed;
  uint64_t ops = env_u64("TW_MODEL_OPS", p->ops, NULL);
  uint64_t only = env_u64("TW_MODEL_SEED", 0, &one_seed);
  struct timespec t0, t1;

  memset(&S, 0, sizeof S);
  report_crashes();
  P.fail = fail;
  P.on_fire = on_fire;
  P.touched = touch;
  P.trace = (int)env_u64("TW_MODEL_TRACE", 0, NULL);
  R.sweep_always = (int)env_u64("TW_MODEL_SWEEP", 0, NULL);
  R.allow_early = (int)env_u64("TW_MODEL_ALLOW_EARLY", 0, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (one_seed) {
    run_seed(p, only, ops);
  } else {
    rng_state = p->salt;
    uint64_t seeds[64];
    cr_assert(p->seeds <= 64);
    for (unsigned i = 0; i < p->seeds; i++)
      seeds[i] = rnd();
    for (unsigned i = 0; i < p->seeds; i++)
      run_seed(p, seeds[i], ops);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  report_profile(p, (double)(t1.tv_sec - t0.tv_sec) +
                        (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  if (!one_seed)
    cr_assert_geq(S.ops, (uint64_t)p->seeds * ops);
}

/* ---- The suite: together at least 1,000,000 operations per run --------- */

/* The tests run in child processes: the runner names a file for their
 * numbers and prints the total for the whole run at its end. */
static char stats_path[512];

ReportHook(PRE_ALL)(struct criterion_test_set *set) {
  const char *dir = getenv("TMPDIR");
  int fd;
  (void)set;
  snprintf(stats_path, sizeof stats_path, "%s/twheel-model-XXXXXX",
           dir && *dir ? dir : "/tmp");
  fd = mkstemp(stats_path);
  if (fd < 0) {
    stats_path[0] = 0;
    return;
  }
  close(fd);
  setenv("TW_MODEL_STATS_FILE", stats_path, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
  uint64_t total[5] = {0}, v[5];
  unsigned tests = 0;
  FILE *f;
  (void)stats;
  if (!stats_path[0])
    return;
  f = fopen(stats_path, "r");
  while (f &&
         fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
    for (int i = 0; i < 5; i++)
      total[i] += v[i];
    tests++;
  }
  if (f)
    fclose(f);
  unlink(stats_path);
  if (tests)
    fprintf(stderr,
            "model: %" PRIu64 " operations in %u tests; tw_next_expiry "
            "earlier than the earliest deadline in %" PRIu64 " of %" PRIu64
            " calls (wasted wakeups %.4f%%); %" PRIu64 " of %" PRIu64
            " advances to tw_next_expiry fired nothing\n",
            total[0], tests, total[2], total[1], percent(total[2], total[1]),
            total[4], total[3]);
}

TestSuite(model, .timeout = 600);

/* Few timers, coarse time: equal deadlines and collisions everywhere
 * (rule 2's FIFO by latest start), every timer compared after each op. */
Test(model, matches_model_small_wheels) {
  static const profile p = {.name = "matches_model_small_wheels",
                            .salt = 0x5ea11,
                            .seeds = 32,
                            .ops = 12800,
                            .min_timers = 8,
                            .max_timers = 64,
                            .restarts = 20,
                            .huge = 3,
                            .medium = 10,
                            .end_of_time = 2,
                            .budget = 15,
                            .slices = 20,
                            .actions = 35,
                            .new_wheel = 50,
                            .rollover_levels = 3};
  run_profile(&p);
}

/* Rules 5-7: small budgets and callbacks that stop, restart, start and free
 * timers due in the same advance. */
Test(model, matches_model_budget_and_reentrant_callbacks) {
  static const profile p = {.name =
                                "matches_model_budget_and_reentrant_callbacks",
                            .salt = 0xb0d6e7,
                            .seeds = 16,
                            .ops = 12500,
                            .min_timers = 16,
                            .max_timers = 256,
                            .restarts = 20,
                            .huge = 2,
                            .medium = 10,
                            .end_of_time = 1,
                            .budget = 60,
                            .slices = 60,
                            .actions = 70,
                            .new_wheel = 20,
                            .rollover_levels = 3};
  run_profile(&p);
}

/* Rule 4: re-arming active timers later (the idle reset, a store) and
 * earlier dominates; tw_next_expiry must stay exact through it. */
Test(model, matches_model_idle_resets) {
  static const profile p = {.name = "matches_model_idle_resets",
                            .salt = 0x1d1e,
                            .seeds = 8,
                            .ops = 12500,
                            .min_timers = 256,
                            .max_timers = 4096,
                            .restarts = 30,
                            .huge = 1,
                            .medium = 3,
                            .end_of_time = 1,
                            .budget = 10,
                            .slices = 20,
                            .actions = 30,
                            .new_wheel = 5,
                            .fill = 50,
                            .rollover_levels = 2};
  run_profile(&p);
}

/* Rules 1, 3, 10: jumps up to 1e9 and to the end of time, saturation at
 * TW_NEVER - 1, time running backwards. */
Test(model, matches_model_huge_jumps) {
  static const profile p = {.name = "matches_model_huge_jumps",
                            .salt = 0x6a9e,
                            .seeds = 16,
                            .ops = 12500,
                            .min_timers = 64,
                            .max_timers = 1024,
                            .restarts = 20,
                            .huge = 30,
                            .medium = 20,
                            .end_of_time = 15,
                            .budget = 10,
                            .slices = 30,
                            .actions = 30,
                            .new_wheel = 20,
                            .fill = 30,
                            .rollover_levels = 7};
  run_profile(&p);
}

/* A populated wheel: 10,000 timers, cascades through every level. */
Test(model, matches_model_10000_timers) {
  static const profile p = {.name = "matches_model_10000_timers",
                            .salt = 0x10000,
                            .seeds = 4,
                            .ops = 25000,
                            .min_timers = 10000,
                            .max_timers = 10000,
                            .restarts = 25,
                            .huge = 1,
                            .medium = 3,
                            .end_of_time = 1,
                            .budget = 10,
                            .slices = 20,
                            .actions = 25,
                            .new_wheel = 2,
                            .fill = 70,
                            .rollover_levels = 2};
  run_profile(&p);
}
