/*
 * Randomized differential test: the real wheel against the reference model
 * (model.c), driven by the same random operations and compared exactly.
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
 *                          (still never later) and only count it
 *
 * Each test prints its counts to stderr, the runner the total for the run
 * (operations, and the share of tw_next_expiry calls earlier than the true
 * earliest deadline). With --tap Criterion sends stderr to /dev/null: run
 * ./tests/test-model directly to see them.
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

#include "model.h"

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

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

static uint64_t sat_sub(uint64_t a, uint64_t b) {
  return b > a ? 0 : a - b;
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

#define CONN_MAGIC UINT64_C(0x74776865656c2121)

struct conn { /* what a server embeds its timer in */
  uint64_t magic;
  size_t id;
  tw_timer timer;
};

#define CONN_OF(t)                                                             \
  ((struct conn *)(void *)((char *)(t)-offsetof(struct conn, timer)))

static struct run {
  const profile *p;
  personality per;
  uint64_t seed;
  uint64_t op; /* index of the operation running now */
  int trace, sweep_always, allow_early;

  tw_wheel *w;
  model m;
  struct conn **conns;
  size_t n;

  /* The advance running now. */
  int in_advance;
  uint64_t adv_now; /* its clamped now */
  size_t fired[16]; /* its first callbacks, for messages */
  size_t fired_len;
  int wheel_freed; /* a callback called tw_wheel_free */
  size_t active;   /* tw_count after the last operation */

  /* Timers touched by the operation running now (compared after it). */
  size_t *touched;
  size_t touched_len;
  unsigned char *touched_mark;
} R;

static struct stats {
  uint64_t ops, advances, callbacks, actions, expiry_checks, expiry_active;
  uint64_t expiry_early, empty_wakeups, wakeups, seeds, sweeps;
  uint64_t later_resets, stopped_before_turn, wheel_frees_in_callback;
  uint64_t active_sum; /* of tw_count after each operation */
} S;

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
                 R.p->name, R.seed, R.op, model_now(&R.m), R.n,
                 R.in_advance ? ", inside an advance" : "", msg, R.seed,
                 R.op + 1, R.p->name);
}

/* The callbacks of the advance running now, for messages. */
static const char *fired_so_far(void) {
  static char buf[256];
  size_t len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < R.fired_len && len + 24 < sizeof buf; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%zu", i ? " " : "",
                            R.fired[i]);
  return buf;
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
  if (!R.p)
    return;
  put_str("\nmodel/");
  put_str(R.p->name);
  put_str(": died in seed ");
  put_u64(R.seed);
  put_str(" op ");
  put_u64(R.op);
  put_str("\n  reproduce: TW_MODEL_SEED=");
  put_u64(R.seed);
  put_str(" TW_MODEL_OPS=");
  put_u64(R.op + 1);
  put_str(" TW_MODEL_TRACE=1 ./tests/test-model --filter 'model/");
  put_str(R.p->name);
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

static void trace(const char *fmt, ...) {
  va_list ap;
  if (!R.trace)
    return;
  fprintf(stderr, "/* %" PRIu64 " */ %s", R.op, R.in_advance ? "    " : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static tw_timer *timer_of(size_t id) {
  return &R.conns[id]->timer;
}

static void touch(size_t id) {
  if (!R.touched_mark[id]) {
    R.touched_mark[id] = 1;
    R.touched[R.touched_len++] = id;
  }
}

/* ---- Comparisons ------------------------------------------------------- */

static void check_timer(size_t id) {
  const tw_timer *t = timer_of(id);
  int active = tw_timer_is_active(t);
  uint64_t deadline = tw_timer_deadline(t);
  uint64_t repeat = tw_timer_get_repeat(t);

  if (active != model_is_active(&R.m, id))
    fail("timer %zu: tw_timer_is_active %d, model %d (model deadline %" PRIu64
         ")",
         id, active, model_is_active(&R.m, id), model_deadline(&R.m, id));
  if (deadline != model_deadline(&R.m, id))
    fail("timer %zu: tw_timer_deadline %" PRIu64 ", model %" PRIu64, id,
         deadline, model_deadline(&R.m, id));
  if (repeat != model_repeat(&R.m, id))
    fail("timer %zu: tw_timer_get_repeat %" PRIu64 ", model %" PRIu64, id,
         repeat, model_repeat(&R.m, id));
}

static void check_wheel(void) {
  uint64_t now = R.in_advance ? R.adv_now : model_now(&R.m);
  if (tw_now(R.w) != now)
    fail("tw_now %" PRIu64 ", model %" PRIu64, tw_now(R.w), now);
  size_t count = model_count(&R.m);
  if (tw_count(R.w) != count)
    fail("tw_count %zu, model %zu", tw_count(R.w), count);
  if (!R.in_advance) {
    S.active_sum += count;
    R.active = count;
  }
}

/* Rule 8: never later than the earliest deadline, TW_NEVER iff nothing is
 * active; exact unless TW_MODEL_ALLOW_EARLY (then early ones are counted). */
static uint64_t check_expiry(void) {
  uint64_t want = model_earliest(&R.m);
  uint64_t got = tw_next_expiry(R.w);

  trace("tw_next_expiry(w); /* %" PRIu64 "u, earliest %" PRIu64 "u */", got,
        want);
  S.expiry_checks++;
  if (want == TW_NEVER) {
    if (got != TW_NEVER)
      fail("tw_next_expiry %" PRIu64 " but no timer is active", got);
    return got;
  }
  S.expiry_active++;
  if (got > want)
    fail("tw_next_expiry %" PRIu64
         " is later than the earliest deadline %" PRIu64,
         got, want);
  if (got < want) {
    S.expiry_early++;
    if (!R.allow_early)
      fail("tw_next_expiry %" PRIu64
           " is earlier than the earliest deadline %" PRIu64
           " (a wasted wakeup)",
           got, want);
  }
  return got;
}

static void check_all_timers(void) {
  S.sweeps++;
  if (!model_check_count(&R.m))
    fail("the model's own count is wrong (a bug in model.c)");
  for (size_t i = 0; i < R.n; i++)
    check_timer(i);
}

static void check_touched(void) {
  for (size_t i = 0; i < R.touched_len; i++) {
    check_timer(R.touched[i]);
    R.touched_mark[R.touched[i]] = 0;
  }
  R.touched_len = 0;
}

/* ---- Random values ----------------------------------------------------- */

static const uint64_t level_edges[] = {
    1,
    62,
    63,
    64,
    65,
    127,
    128,
    4095,
    4096,
    4097,
    262143,
    262144,
    262145,
    (UINT64_C(1) << 24) - 1,
    UINT64_C(1) << 24,
    UINT64_C(1) << 30,
    (UINT64_C(1) << 36) - 1,
    UINT64_C(1) << 36,
    (UINT64_C(1) << 42) + 1,
    (UINT64_C(1) << 48) - 1,
    UINT64_C(1) << 48,
    UINT64_C(1) << 54,
    UINT64_C(1) << 60,
    (UINT64_C(1) << 63) + 1,
};
#define N_EDGES (sizeof level_edges / sizeof level_edges[0])

/* The distance from now to a digit rollover of level 1..10, +-1. */
static uint64_t to_rollover(uint64_t now) {
  unsigned levels = chance(10) ? 10 : R.p->rollover_levels;
  unsigned bits = 6 * (1 + (unsigned)below(levels));
  uint64_t mask = (UINT64_C(1) << bits) - 1;
  uint64_t next = (now | mask) == UINT64_MAX ? UINT64_MAX : (now | mask) + 1;
  uint64_t d = next - now;
  switch (below(3)) {
  case 0:
    return d > 0 ? d - 1 : 0;
  case 1:
    return d;
  default:
    return sat_add(d, 1);
  }
}

/* A timeout: 0, small, level edges, coarse, medium, huge, saturating. */
static uint64_t gen_timeout(void) {
  uint64_t now = model_now(&R.m);
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
  uint64_t now = model_now(&R.m);
  uint64_t r = below(100);
  if (r < 10) {
    uint64_t other = model_deadline(&R.m, pick_active());
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
  uint64_t now = model_now(&R.m);
  uint64_t r = below(1000);
  if (r < R.p->end_of_time) {
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
  if (r < R.p->huge)
    return sat_add(now, below(1000000000));
  r = below(100);
  if (r < R.p->medium)
    return sat_add(now, below(1000000));
  r = below(100);
  if (r < 35)
    return sat_add(now, below(101));
  if (r < 50)
    return sat_add(now, R.per.grain * below(9));
  if (r < 75) {
    uint64_t e = model_earliest(&R.m);
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
  if (r < 4 + R.p->budget)
    return (size_t)(1 + below(3));
  if (r < 10 + R.p->budget)
    return (size_t)(4 + below(30));
  return TW_ALL;
}

/* An active timer when one is found quickly, else any timer. */
static size_t pick_active(void) {
  size_t id = (size_t)below(R.n);
  for (int tries = 0; tries < 32 && !model_is_active(&R.m, id); tries++)
    id = (size_t)below(R.n);
  return id;
}

static size_t pick_inactive(void) {
  size_t id = (size_t)below(R.n);
  for (int tries = 0; tries < 16 && model_is_active(&R.m, id); tries++)
    id = (size_t)below(R.n);
  return id;
}

/* ---- Operations, each applied to the wheel and to the model ------------- */

static void on_fire(tw_timer *t);

static void do_start(size_t id, uint64_t timeout, uint64_t repeat) {
  trace("tw_timer_start(w, &t[%zu], cb, %" PRIu64 "u, %" PRIu64 "u);", id,
        timeout, repeat);
  int rc = tw_timer_start(R.w, timer_of(id), on_fire, timeout, repeat);
  if (rc != 0)
    fail("tw_timer_start(t%zu, %" PRIu64 ", %" PRIu64 ") returned %d", id,
         timeout, repeat, rc);
  model_start(&R.m, id, timeout, repeat);
  touch(id);
}

static void do_start_at(size_t id, uint64_t deadline, uint64_t repeat) {
  trace("tw_timer_start_at(w, &t[%zu], cb, %" PRIu64 "u, %" PRIu64 "u);", id,
        deadline, repeat);
  int rc = tw_timer_start_at(R.w, timer_of(id), on_fire, deadline, repeat);
  if (rc != 0)
    fail("tw_timer_start_at(t%zu, %" PRIu64 ", %" PRIu64 ") returned %d", id,
         deadline, repeat, rc);
  model_start_at(&R.m, id, deadline, repeat);
  touch(id);
}

static void do_stop(size_t id) {
  trace("tw_timer_stop(w, &t[%zu]);", id);
  int rc = tw_timer_stop(R.w, timer_of(id));
  if (rc != 0)
    fail("tw_timer_stop(t%zu) returned %d", id, rc);
  model_stop(&R.m, id);
  touch(id);
}

static void do_again(size_t id) {
  trace("tw_timer_again(w, &t[%zu]);", id);
  int rc = tw_timer_again(R.w, timer_of(id));
  int want = model_again(&R.m, id);
  if (rc != want)
    fail("tw_timer_again(t%zu) returned %d, model %d", id, rc, want);
  touch(id);
}

static void do_set_repeat(size_t id, uint64_t repeat) {
  trace("tw_timer_set_repeat(&t[%zu], %" PRIu64 "u);", id, repeat);
  tw_timer_set_repeat(timer_of(id), repeat);
  model_set_repeat(&R.m, id, repeat);
  touch(id);
}

/* Rule 4, the idle reset: restart an active timer at a later deadline
 * (through start or start_at), or earlier, or at the same deadline. */
static void do_restart(size_t id) {
  uint64_t now = model_now(&R.m);
  uint64_t old = model_deadline(&R.m, id);
  uint64_t repeat = chance(80) ? model_repeat(&R.m, id) : gen_repeat();
  uint64_t deadline;

  if (old == TW_NEVER || chance(15)) { /* not active, or a fresh timeout */
    do_start(id, gen_timeout(), repeat);
    return;
  }
  if (chance(25)) { /* onto another timer's deadline, or a grid point */
    uint64_t other = model_deadline(&R.m, pick_active());
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
    do_start(id, deadline - now, repeat); /* saturates where start_at does */
  else
    do_start_at(id, deadline, repeat);
}

/* Free the user's struct and reuse the memory for a fresh timer. Rule 6:
 * the wheel must not touch a stopped timer again (ASan would see it). */
static void do_free(size_t id) {
  if (model_is_active(&R.m, id))
    do_stop(id);
  trace("tw_timer_init(&t[%zu]); /* freed and reused */", id);
  if (chance(50)) { /* tw_timer_init on the same memory */
    tw_timer_init(timer_of(id));
  } else {
    struct conn *c = malloc(sizeof *c);
    if (!c)
      fail("out of memory");
    memset(R.conns[id], 0x5a, sizeof *R.conns[id]);
    free(R.conns[id]);
    c->magic = CONN_MAGIC;
    c->id = id;
    tw_timer_init(&c->timer);
    c->timer.data = c;
    R.conns[id] = c;
  }
  model_timer_init(&R.m, id);
  touch(id);
}

/* Rule 9: bad input is refused and changes nothing. */
static void do_bad_input(size_t id) {
  tw_timer fresh;
  int rc;
  memset(&fresh, 0, sizeof fresh); /* never initialised */
  trace("/* bad input on t[%zu]: -EINVAL */", id);
  switch (below(6)) {
  case 0:
    rc = tw_timer_start(R.w, timer_of(id), NULL, below(100), 0);
    break;
  case 1:
    rc = tw_timer_start(NULL, timer_of(id), on_fire, below(100), 0);
    break;
  case 2:
    rc = tw_timer_start_at(R.w, timer_of(id), NULL, below(100), 0);
    break;
  case 3:
    rc = tw_timer_stop(NULL, timer_of(id));
    break;
  case 4:
    rc = tw_timer_again(NULL, timer_of(id));
    break;
  default:
    rc = tw_timer_start(R.w, &fresh, on_fire, below(100), 0);
    break;
  }
  if (rc != -EINVAL)
    fail("bad input on t%zu returned %d, not -EINVAL", id, rc);
  if (tw_now(NULL) != 0 || tw_count(NULL) != 0 ||
      tw_next_expiry(NULL) != TW_NEVER || tw_advance(NULL, 1, TW_ALL) != 0 ||
      tw_timer_is_active(NULL) || tw_timer_deadline(NULL) != TW_NEVER ||
      tw_timer_get_repeat(NULL) != 0 || tw_timer_again(R.w, NULL) != -EINVAL ||
      tw_timer_stop(R.w, NULL) != -EINVAL ||
      tw_timer_start_at(R.w, NULL, on_fire, 1, 0) != -EINVAL)
    fail("a function given NULL did not refuse it");
  tw_timer_set_repeat(NULL, 5);
  tw_wheel_free(NULL);
  tw_timer_init(NULL);
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
  trace("tw_wheel_free(w); w = tw_wheel_new(%" PRIu64 "u);", start);
  tw_wheel_free(R.w);
  R.w = tw_wheel_new(start);
  if (!R.w)
    fail("tw_wheel_new failed");
  model_new_wheel(&R.m, start);
  check_all_timers();
}

/* ---- Advance and callbacks --------------------------------------------- */

/* A timer collected by the advance running now that has not fired yet. */
static int pick_still_due(size_t *id) {
  const model *m = &R.m;
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

/* tw_wheel_free from a callback: every timer inactive at once, no further
 * callback in this advance; the memory goes when tw_advance returns. */
static void free_wheel_in_callback(void) {
  trace("tw_wheel_free(w);");
  tw_wheel_free(R.w);
  R.wheel_freed = 1;
  S.wheel_frees_in_callback++;
  model_new_wheel(&R.m, model_now(&R.m));
  check_all_timers();
}

static void callback_action(size_t self) {
  size_t id;
  uint64_t r = below(100);

  if (R.wheel_freed)
    return;
  S.actions++;
  if (below(100000) < 2 * (uint64_t)R.p->new_wheel) {
    free_wheel_in_callback();
    return;
  }
  if (r < 20) { /* stop a timer due later in this advance: it must not fire */
    if (pick_still_due(&id)) {
      S.stopped_before_turn++;
      do_stop(id);
    }
  } else if (r < 35) { /* restart one: it waits for the next advance */
    if (pick_still_due(&id)) {
      S.stopped_before_turn++;
      if (chance(50)) {
        uint64_t timeout = chance(50) ? 0 : below(100);
        do_start(id, timeout, gen_repeat());
      } else {
        do_start_at(id, gen_deadline(), 0);
      }
    }
  } else if (r < 45) { /* restart itself, 0 included (rule 5) */
    uint64_t timeout = chance(40) ? 0 : gen_timeout();
    do_start(self, timeout, gen_repeat());
  } else if (r < 52) {
    do_stop(self);
  } else if (r < 65) { /* start another, maybe already due */
    id = pick_inactive();
    if (chance(50)) {
      uint64_t timeout = chance(50) ? 0 : below(300);
      do_start(id, timeout, gen_repeat());
    } else {
      uint64_t deadline = gen_deadline();
      do_start_at(id, deadline, gen_repeat());
    }
  } else if (r < 70) {
    do_again(chance(50) ? self : (size_t)below(R.n));
  } else if (r < 75) {
    do_set_repeat(self, chance(50) ? 0 : gen_repeat());
  } else if (r < 83) {
    check_expiry();
  } else if (r < 87) { /* re-entrant advance: 0, nothing changes */
    uint64_t to = gen_advance_to();
    trace("tw_advance(w, %" PRIu64 "u, TW_ALL); /* re-entrant: 0 */", to);
    size_t ran = tw_advance(R.w, to, TW_ALL);
    if (ran != 0)
      fail("re-entrant tw_advance ran %zu callbacks", ran);
  } else if (r < 93) { /* free itself or another, stopping it first */
    do_free(chance(50) ? self : (size_t)below(R.n));
  } else { /* the idle reset of any timer, from a callback */
    do_restart(pick_active());
  }
  check_wheel();
  check_touched();
}

static void on_fire(tw_timer *t) {
  struct conn *c = CONN_OF(t);
  size_t want;

  S.callbacks++;
  if (!R.in_advance)
    fail("a callback ran outside tw_advance");
  if (R.wheel_freed)
    fail("a callback ran after tw_wheel_free");
  if (c->magic != CONN_MAGIC || c->id >= R.n || R.conns[c->id] != c ||
      t->data != c)
    fail("callback with a timer that is not ours (freed?)");
  if (!model_advance_next(&R.m, &want))
    fail("timer %zu fired (model deadline %" PRIu64 ", active %d), but the "
         "model expected no more callbacks in this advance (%zu ran, budget "
         "%zu; fired: %s)",
         c->id, R.m.timers[c->id].deadline, R.m.timers[c->id].active, R.m.ran,
         R.m.max_fire, fired_so_far());
  if (want != c->id)
    fail("timer %zu fired as callback %zu of this advance, the model expected "
         "timer %zu (deadline %" PRIu64
         "); model state of %zu: deadline %" PRIu64
         ", active %d (fired before: %s)",
         c->id, R.m.ran, want, R.m.last_deadline, c->id,
         R.m.timers[c->id].deadline, R.m.timers[c->id].active, fired_so_far());
  trace("/* callback of t[%zu] */", c->id);
  if (R.fired_len < sizeof R.fired / sizeof R.fired[0])
    R.fired[R.fired_len++] = c->id;
  touch(c->id);
  check_wheel();   /* rule 7: tw_now is the advance's clamped now */
  check_touched(); /* rule 6: re-armed or inactive before the callback */

  for (int slot = 0; slot < 3; slot++)
    if (chance(R.p->actions))
      callback_action(want);
}

static void do_advance(uint64_t to, size_t budget) {
  size_t ran, want, missed;
  if (budget == TW_ALL)
    trace("tw_advance(w, %" PRIu64 "u, TW_ALL);", to);
  else
    trace("tw_advance(w, %" PRIu64 "u, %zu);", to, budget);
  S.advances++;
  model_advance_begin(&R.m, to, budget);
  R.adv_now = model_now(&R.m);
  R.in_advance = 1;
  R.fired_len = 0;
  ran = tw_advance(R.w, to, budget);
  R.in_advance = 0;
  if (model_advance_next(&R.m, &missed))
    fail("advance to %" PRIu64 " returned after %zu callbacks (%s); timer %zu "
         "(deadline %" PRIu64 ") should have fired too",
         to, ran, fired_so_far(), missed, R.m.last_deadline);
  want = model_advance_end(&R.m);
  if (ran != want)
    fail("tw_advance returned %zu, %zu callbacks ran", ran, want);
  if (R.wheel_freed) { /* the callback's tw_wheel_free took effect */
    uint64_t start = rnd_scaled();
    trace("w = tw_wheel_new(%" PRIu64 "u);", start);
    R.wheel_freed = 0;
    R.w = tw_wheel_new(start);
    if (!R.w)
      fail("tw_wheel_new failed");
    model_new_wheel(&R.m, start);
  }
}

/* An advance to what tw_next_expiry says, as a loop would: counts wakeups
 * that fire nothing (rule 8's "every wakeup should fire something"). */
static void do_wakeup(void) {
  uint64_t at = check_expiry();
  if (at == TW_NEVER)
    return;
  S.wakeups++;
  do_advance(at, TW_ALL);
  if (R.m.ran == 0)
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
  if (R.active * 100 < R.p->fill * R.n && chance(50)) {
    unsigned k = 1 + (unsigned)below(256); /* connections arriving */
    for (unsigned i = 0; i < k; i++) {
      size_t id = pick_inactive();
      uint64_t timeout = gen_long_timeout();
      do_start(id, timeout, chance(90) ? 0 : gen_repeat());
    }
  } else if (r < (uint64_t)R.p->restarts) {
    do_restart(pick_active());
  } else if (r < 35) {
    size_t id = (size_t)below(R.n);
    uint64_t timeout = gen_timeout();
    do_start(id, timeout, gen_repeat());
  } else if (r < 43) {
    size_t id = chance(60) ? pick_active() : (size_t)below(R.n);
    uint64_t deadline = gen_deadline();
    do_start_at(id, deadline, gen_repeat());
  } else if (r < 51) {
    do_stop(chance(70) ? pick_active() : (size_t)below(R.n));
  } else if (r < 55) {
    do_again(chance(50) ? pick_active() : (size_t)below(R.n));
  } else if (r < 57) {
    size_t id = pick_active();
    do_set_repeat(id, gen_repeat());
  } else if (r < 59) {
    unsigned k = 1 + (unsigned)below(64); /* a burst of starts */
    for (unsigned i = 0; i < k; i++) {
      size_t id = (size_t)below(R.n);
      uint64_t timeout = gen_timeout();
      do_start(id, timeout, gen_repeat());
    }
  } else if (r < 61) {
    do_free(chance(50) ? pick_inactive() : (size_t)below(R.n));
  } else if (r < 62) {
    do_bad_input((size_t)below(R.n));
  } else if (r < 67) {
    do_wakeup();
  } else {
    uint64_t to = gen_advance_to();
    do_advance(to, gen_budget());
  }

  /* Back from the end of time now and then, and rarely from anywhere. */
  if ((model_now(&R.m) > TW_NEVER / 2 && chance(3)) ||
      below(100000) < R.p->new_wheel)
    do_new_wheel();
}

static void run_seed(const profile *p, uint64_t seed, uint64_t ops) {
  static const uint64_t grains[] = {1, 1, 2, 8, 10, 64, 100, 1000, 4096};
  static const uint64_t starts[] = {
      0, 0, 1, 1000, 4094, 262140, (UINT64_C(1) << 48) - 7};

  R.p = p;
  R.seed = seed;
  R.op = 0;
  R.wheel_freed = 0;
  R.active = 0;
  rng_state = seed;
  uint64_t r;
  R.n = (size_t)(p->min_timers + below(p->max_timers - p->min_timers + 1));
  R.per.grain = grains[below(sizeof grains / sizeof grains[0])];
  /* Most seeds call tw_next_expiry after every operation; some rarely, so
   * that advances also meet slots its re-filing would have cleaned. */
  r = below(100);
  R.per.expiry_check = r < 60 ? 100 : r < 85 ? (unsigned)(5 + below(60)) : 1;
  R.per.repeating = (unsigned)(5 + below(30));
  uint64_t start = chance(60) ? starts[below(sizeof starts / sizeof starts[0])]
                              : rnd_scaled();

  R.w = tw_wheel_new(start);
  if (!R.w || model_init(&R.m, R.n, start) != 0)
    fail("out of memory");
  R.conns = calloc(R.n, sizeof *R.conns);
  R.touched = calloc(R.n, sizeof *R.touched);
  R.touched_mark = calloc(R.n, 1);
  if (!R.conns || !R.touched || !R.touched_mark)
    fail("out of memory");
  R.touched_len = 0;
  for (size_t i = 0; i < R.n; i++) {
    R.conns[i] = malloc(sizeof *R.conns[i]);
    if (!R.conns[i])
      fail("out of memory");
    R.conns[i]->magic = CONN_MAGIC;
    R.conns[i]->id = i;
    tw_timer_init(&R.conns[i]->timer);
    R.conns[i]->timer.data = R.conns[i];
  }
  trace("/* seed %" PRIu64 ": %zu timers, grain %" PRIu64 " */ "
        "w = tw_wheel_new(%" PRIu64 "u);",
        seed, R.n, R.per.grain, start);

  /* Full sweeps cost O(timers): every operation for small wheels, about
   * every n/256 operations for large ones (touched timers always). */
  uint64_t sweep_every = R.sweep_always ? 1 : 1 + R.n / 256;

  for (R.op = 0; R.op < ops; R.op++) {
    one_op();
    check_wheel();
    check_touched();
    if (chance(R.per.expiry_check))
      check_expiry();
    if (R.op % sweep_every == 0)
      check_all_timers();
    S.ops++;
  }
  check_all_timers();
  check_expiry();

  tw_wheel_free(R.w); /* with timers still active: they become inactive */
  for (size_t i = 0; i < R.n; i++) {
    if (tw_timer_is_active(timer_of(i)))
      fail("timer %zu still active after tw_wheel_free", i);
    free(R.conns[i]);
  }
  free(R.conns);
  free(R.touched);
  free(R.touched_mark);
  model_free(&R.m);
  R.w = NULL;
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
      "their turn, %" PRIu64 " wheels freed in a callback\n"
      "model/%s: tw_next_expiry earlier than the earliest deadline in %" PRIu64
      " of %" PRIu64 " calls with timers active (wasted wakeups "
      "%.4f%%); %" PRIu64 " of %" PRIu64
      " advances to tw_next_expiry fired nothing\n",
      p->name, S.ops, S.seeds, secs, S.advances, S.callbacks, S.actions,
      S.ops ? (double)S.active_sum / (double)S.ops : 0.0, S.later_resets,
      S.stopped_before_turn, S.wheel_frees_in_callback, p->name, S.expiry_early,
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
  R.trace = (int)env_u64("TW_MODEL_TRACE", 0, NULL);
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
                            .actions = 35,
                            .new_wheel = 50,
                            .rollover_levels = 4};
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
                            .actions = 70,
                            .new_wheel = 20,
                            .rollover_levels = 4};
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
                            .actions = 30,
                            .new_wheel = 5,
                            .fill = 50,
                            .rollover_levels = 3};
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
                            .actions = 30,
                            .new_wheel = 20,
                            .fill = 30,
                            .rollover_levels = 10};
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
                            .actions = 25,
                            .new_wheel = 2,
                            .fill = 70,
                            .rollover_levels = 3};
  run_profile(&p);
}
