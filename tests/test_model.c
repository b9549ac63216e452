/*
 * Randomized differential test: the real wheel against the reference model
 * (model.c), driven by the same random operations and compared exactly.
 * The operations, their operands and the comparisons are tests/ops.c's (on
 * top of pair.c), shared with the fuzzer (tests/fuzz/fuzz_wheel.c); this
 * file is where their choices come from: a seeded splitmix64 stream, shaped
 * by each test's mix of operations (ops_mix) and each seed's personality
 * (grain, how often tw_next_expiry is asked, share of repeating timers).
 *
 * After every operation: tw_now, tw_count, tw_next_expiry (rule 8: exact
 * while at most 64 timers are active, TW_NEVER iff nothing is active; some
 * seeds call it rarely, because it re-files lazily moved timers and
 * tw_advance must also cope without it), and tw_timer_is_active,
 * tw_timer_deadline and tw_timer_get_repeat of every timer the operation
 * touched; all timers are compared after every operation while there are
 * at most 255, every 1 + n/256 operations above that, and at the end of a
 * seed. In an advance each callback asks the model which timer must fire
 * next (rules 1, 2, 5-7), so the fired sequence is compared as it happens,
 * then runs random actions on both sides: stop, restart or free timers due
 * in the same advance, start others, tw_next_expiry, a re-entrant
 * tw_advance, tw_wheel_free. tests/ops.h lists every choice.
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

#include "ops.h"
#include "pair.h"

/* ---- The choices: a deterministic PRNG, splitmix64 ---------------------- */

typedef struct rng {
  ops_source src; /* first: the interpreter's view of it */
  uint64_t state;
} rng;

static uint64_t rnd(rng *g) {
  uint64_t z = (g->state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Uniform in 0..n-1 (the modulo bias is irrelevant here); n = 0: any. */
static uint64_t rng_pick(ops_source *src, uint64_t n) {
  uint64_t x = rnd((rng *)src);
  return n ? x % n : x;
}

/* Alternative i with probability weight[i] / the sum of the weights. */
static size_t rng_choose(ops_source *src, const uint32_t *weight, size_t n) {
  uint64_t total = 0, r;
  for (size_t i = 0; i < n; i++)
    total += weight[i];
  r = rng_pick(src, total);
  for (size_t i = 0; i < n; i++) {
    if (r < weight[i])
      return i;
    r -= weight[i];
  }
  return 0; /* all weights 0: the first */
}

/* ---- What a test varies ------------------------------------------------ */

typedef struct profile {
  const char *name; /* the Criterion test, for the reproduce line */
  uint64_t salt;    /* seeds are drawn from it */
  unsigned seeds;   /* fixed seeds per run */
  uint64_t ops;     /* operations per seed */
  ops_mix mix;      /* what the operations are, how often (ops.h) */
} profile;

/* ---- The run: globals, since the callbacks need them -------------------- */

static pair P; /* the wheel and the model, driven together (pair.h) */
static ops O;  /* the interpreter (ops.h) */
static rng G = {{rng_pick, rng_choose, NULL, NULL}, 0};

static struct run {
  const profile *profile;
  uint64_t seed, seeds;
} R;

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

/* ---- One seed ---------------------------------------------------------- */

static void run_seed(const profile *p, uint64_t seed, uint64_t ops) {
  R.profile = p;
  R.seed = seed;
  G.state = seed;
  O.p = &P;
  O.src = &G.src;
  O.mix = &p->mix;
  if (P.trace)
    fprintf(stderr, "/* seed %" PRIu64 " */\n", seed);
  ops_begin(&O);
  for (P.op = 0; P.op < ops; P.op++)
    ops_step(&O);
  ops_end(&O);
  R.seeds++;
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
      p->name, O.stats.ops, R.seeds, secs, O.stats.advances, O.stats.callbacks,
      O.stats.actions,
      O.stats.ops ? (double)O.stats.active_sum / (double)O.stats.ops : 0.0,
      O.stats.later_resets, O.stats.stopped_before_turn,
      O.stats.wheel_frees_in_callback, O.stats.slices, O.stats.sliced_wakeups,
      p->name, O.stats.expiry_early, O.stats.expiry_active,
      percent(O.stats.expiry_early, O.stats.expiry_active),
      O.stats.empty_wakeups, O.stats.wakeups);
  if (path && *path) {
    FILE *f = fopen(path, "a");
    if (f) {
      fprintf(f,
              "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
              O.stats.ops, O.stats.expiry_active, O.stats.expiry_early,
              O.stats.wakeups, O.stats.empty_wakeups);
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

  memset(&O.stats, 0, sizeof O.stats);
  R.seeds = 0;
  report_crashes();
  P.fail = fail;
  P.trace = (int)env_u64("TW_MODEL_TRACE", 0, NULL);
  O.sweep_always = (int)env_u64("TW_MODEL_SWEEP", 0, NULL);
  O.allow_early = (int)env_u64("TW_MODEL_ALLOW_EARLY", 0, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (one_seed) {
    run_seed(p, only, ops);
  } else {
    uint64_t seeds[64];
    G.state = p->salt;
    cr_assert(p->seeds <= 64);
    for (unsigned i = 0; i < p->seeds; i++)
      seeds[i] = rnd(&G);
    for (unsigned i = 0; i < p->seeds; i++)
      run_seed(p, seeds[i], ops);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  report_profile(p, (double)(t1.tv_sec - t0.tv_sec) +
                        (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  if (!one_seed)
    cr_assert_geq(O.stats.ops, (uint64_t)p->seeds * ops);
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
                            .mix = {.min_timers = 8,
                                    .max_timers = 64,
                                    .restarts = 20,
                                    .huge = 3,
                                    .medium = 10,
                                    .end_of_time = 2,
                                    .budget = 15,
                                    .slices = 20,
                                    .actions = 35,
                                    .max_actions = 3,
                                    .new_wheel = 50,
                                    .rollover_levels = 3}};
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
                            .mix = {.min_timers = 16,
                                    .max_timers = 256,
                                    .restarts = 20,
                                    .huge = 2,
                                    .medium = 10,
                                    .end_of_time = 1,
                                    .budget = 60,
                                    .slices = 60,
                                    .actions = 70,
                                    .max_actions = 3,
                                    .new_wheel = 20,
                                    .rollover_levels = 3}};
  run_profile(&p);
}

/* Rule 4: re-arming active timers later (the idle reset, a store) and
 * earlier dominates; tw_next_expiry must stay exact through it. */
Test(model, matches_model_idle_resets) {
  static const profile p = {.name = "matches_model_idle_resets",
                            .salt = 0x1d1e,
                            .seeds = 8,
                            .ops = 12500,
                            .mix = {.min_timers = 256,
                                    .max_timers = 4096,
                                    .restarts = 30,
                                    .huge = 1,
                                    .medium = 3,
                                    .end_of_time = 1,
                                    .budget = 10,
                                    .slices = 20,
                                    .actions = 30,
                                    .max_actions = 3,
                                    .new_wheel = 5,
                                    .fill = 50,
                                    .rollover_levels = 2}};
  run_profile(&p);
}

/* Rules 1, 3, 10: jumps up to 1e9 and to the end of time, saturation at
 * TW_NEVER - 1, time running backwards. */
Test(model, matches_model_huge_jumps) {
  static const profile p = {.name = "matches_model_huge_jumps",
                            .salt = 0x6a9e,
                            .seeds = 16,
                            .ops = 12500,
                            .mix = {.min_timers = 64,
                                    .max_timers = 1024,
                                    .restarts = 20,
                                    .huge = 30,
                                    .medium = 20,
                                    .end_of_time = 15,
                                    .budget = 10,
                                    .slices = 30,
                                    .actions = 30,
                                    .max_actions = 3,
                                    .new_wheel = 20,
                                    .fill = 30,
                                    .rollover_levels = 7}};
  run_profile(&p);
}

/* A populated wheel: 10,000 timers, cascades through every level. */
Test(model, matches_model_10000_timers) {
  static const profile p = {.name = "matches_model_10000_timers",
                            .salt = 0x10000,
                            .seeds = 4,
                            .ops = 25000,
                            .mix = {.min_timers = 10000,
                                    .max_timers = 10000,
                                    .restarts = 25,
                                    .huge = 1,
                                    .medium = 3,
                                    .end_of_time = 1,
                                    .budget = 10,
                                    .slices = 20,
                                    .actions = 25,
                                    .max_actions = 3,
                                    .new_wheel = 2,
                                    .fill = 70,
                                    .rollover_levels = 2}};
  run_profile(&p);
}
