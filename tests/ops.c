/*
 * The random-operation interpreter (ops.h): every operation, callback
 * action and operand generator of the differential drivers, once.
 */
#include "ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <twheel.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The one interpreter running: its callbacks find it here. */
static ops *live;

/* ---- Choices ----------------------------------------------------------- */

static uint64_t pick(ops *o, uint64_t n) {
  return o->src->pick(o->src, n);
}

static size_t choose(ops *o, const uint32_t *weight, size_t n) {
  return o->src->choose(o->src, weight, n);
}

/* Yes with probability percent / 100 (for the random driver). */
static int chance(ops *o, unsigned percent) {
  const uint32_t w[] = {100 - percent, percent};
  return choose(o, w, 2) == 1;
}

static uint64_t now_of(const ops *o) {
  return model_now(&o->p->m);
}

/* ---- Timers: which one an operation works on ---------------------------- */

enum { ID_ANY, ID_ACTIVE, ID_INACTIVE, ID_SELF, ID_DUE, ID_MODES };
#define NO_SELF SIZE_MAX

/* Timer i, or the first from i on in the state asked for. */
static size_t find_id(ops *o, unsigned mode) {
  size_t id = (size_t)pick(o, o->n);
  for (int tries = 0; tries < 64 && mode != ID_ANY; tries++) {
    if (model_is_active(&o->p->m, id) == (mode == ID_ACTIVE))
      break;
    id = id + 1 < o->n ? id + 1 : 0;
  }
  return id;
}

/* The first timer from the k-th on that the advance running now collected
 * and that has neither fired nor been stopped or re-armed since; if there
 * is none, timer k % n. */
static size_t find_due(ops *o) {
  const model *m = &o->p->m;
  size_t left = m->firing_len - m->firing_pos;
  size_t k = (size_t)pick(o, left > 256 ? left : 256);
  size_t from = left ? k % left : 0;
  for (size_t i = from; i < left && i < from + 64; i++)
    if (m->timers[m->firing[m->firing_pos + i]].collected) {
      o->stats.stopped_before_turn++;
      return m->firing[m->firing_pos + i];
    }
  return k % o->n;
}

/* ID (ops.h), the modes weighted by w. */
static size_t pick_id(ops *o, const uint32_t w[ID_MODES]) {
  unsigned mode = (unsigned)choose(o, w, ID_MODES);
  if (mode == ID_DUE)
    return find_due(o);
  if (mode == ID_SELF)
    return o->self != NO_SELF ? o->self : find_id(o, ID_ANY);
  return find_id(o, mode);
}

/* ---- Values ------------------------------------------------------------ */

/* Distances at and around the edges of levels and of their blocks. */
static uint64_t gen_edge(ops *o) {
  unsigned b = (unsigned)pick(o, 48);
  uint64_t edge = (uint64_t)(1 + (b / 8) % 2) << (8 * (b % 8));
  return edge + b / 16 - 1;
}

/* The distance from now to a digit rollover of level 1..7, +-1. */
static uint64_t gen_rollover(ops *o) {
  const uint32_t w[] = {90, 10};
  unsigned levels = choose(o, w, 2) ? 7 : o->mix->rollover_levels;
  unsigned digit = 1 + (unsigned)pick(o, levels ? levels : 1);
  unsigned nudge = (unsigned)pick(o, 3);
  return rollover_distance(now_of(o), digit, nudge);
}

/* A random value of random magnitude. */
static uint64_t gen_scaled(ops *o) {
  uint64_t x = pick(o, 0);
  return x >> pick(o, 64);
}

/* One alternative of a value: unit * (base + n:x), where a unit of 0 stands
 * for the wheel's grain (pick(1) reads nothing). */
typedef struct span {
  uint64_t unit, base, n;
} span;
#define GRAIN 0

/*
 * A choice among n alternatives: the first `special` ones are the caller's
 * to draw (their index is returned), the others are spans[i - special],
 * drawn into *v.
 */
static size_t one_of(ops *o, const uint32_t *weight, size_t n, size_t special,
                     const span *spans, uint64_t *v) {
  size_t i = choose(o, weight, n);
  if (i >= special) {
    const span *s = &spans[i - special];
    uint64_t x = s->base + pick(o, s->n);
    *v = (s->unit ? s->unit : o->grain) * x;
  }
  return i;
}

/* A timeout: level edges, rollovers, magnitudes, around saturation, slot
 * aligned; 0, small, coarse, medium, huge, beyond saturation, ms. */
static uint64_t gen_timeout(ops *o) {
  static const uint32_t w[] = {10, 8, 4, 3, 2, 8, 30, 14, 12, 8, 3, 2};
  static const span spans[] = {{1, 0, 1},          {1, 1, 200},
                               {GRAIN, 1, 16},     {1, 0, 1000000},
                               {1, 0, 1000000000}, {1, UINT64_MAX - 7, 8},
                               {1000, 0, 256}};
  uint64_t v = 0, now = now_of(o), a, b;
  switch (one_of(o, w, COUNT(w), 5, spans, &v)) {
  case 0:
    return gen_edge(o);
  case 1:
    return gen_rollover(o);
  case 2:
    return gen_scaled(o);
  case 3: /* exactly around the saturation point TW_NEVER - 1 */
    return sat_sub(TW_NEVER - 1, now) + pick(o, 3) - 1 + (now >= TW_NEVER - 1);
  case 4: /* slot aligned */
    a = 1 + pick(o, 255);
    b = pick(o, 8);
    return a << (8 * b);
  default:
    return v;
  }
}

/* A timeout: from a callback, mostly 0 or soon (rule 5). */
static uint64_t gen_soon(ops *o) {
  static const uint32_t w[2][3] = {{1, 0, 0}, {25, 45, 30}};
  static const span spans[] = {{1, 0, 1}, {1, 1, 300}};
  uint64_t v = 0;
  if (one_of(o, w[o->self != NO_SELF], 3, 1, spans, &v))
    return v;
  return gen_timeout(o);
}

/* A long timeout, as a server's idle timeout: survives many advances. */
static uint64_t gen_long(ops *o) {
  static const uint32_t w[] = {1, 1, 1, 1};
  static const span spans[] = {
      {1, 1000, 100000}, {GRAIN, 100, 1000}, {1, 100000, 100000000}};
  uint64_t v = 0, edge;
  if (one_of(o, w, COUNT(w), 1, spans, &v))
    return v;
  edge = gen_edge(o);
  return sat_add(edge, pick(o, 2));
}

static uint64_t gen_repeat(ops *o) {
  static const span spans[] = {{1, 0, 1},
                               {1, 1, 100},
                               {GRAIN, 1, 8},
                               {1, 1, 1000000000},
                               {1, UINT64_MAX - 1, 2}}; /* re-arms saturate */
  uint32_t r = o->repeating;
  const uint32_t w[] = {10 * r, 100 * (100 - r), 45 * r, 25 * r, 12 * r, 8 * r};
  uint64_t v = 0;
  return one_of(o, w, COUNT(w), 1, spans, &v) ? v : gen_edge(o);
}

/* How far an idle reset moves a deadline later (0: the same deadline, still
 * a new start for the order). */
static uint64_t gen_later(ops *o) {
  static const uint32_t w[] = {10, 15, 35, 20, 15, 5};
  static const span spans[] = {
      {1, 0, 1}, {1, 1, 100}, {GRAIN, 1, 8}, {1, 0, 10000000}, {1, 0, 0}};
  uint64_t v = 0;
  return one_of(o, w, COUNT(w), 1, spans, &v) ? v : gen_edge(o);
}

/* grain * (now / grain + 0..7): equal deadlines on a coarse grid. */
static uint64_t gen_grid(ops *o, uint64_t from) {
  uint64_t g = o->grain, step = pick(o, 8);
  if (from / g > UINT64_MAX / g - 8)
    return TW_NEVER - 1;
  return (from / g + step) * g;
}

/* An absolute deadline: past, now, future, TW_NEVER, on a coarse grid, or
 * another timer's (equal deadlines: rule 2). */
static uint64_t gen_deadline(ops *o) {
  static const uint32_t w[] = {10, 13, 9, 8, 20, 36, 2, 2};
  static const uint64_t back[] = {1, 100, 1000000, UINT64_MAX - 1};
  uint64_t now = now_of(o), d, scale;
  switch (choose(o, w, COUNT(w))) {
  case 0:
    d = model_deadline(&o->p->m, find_id(o, ID_ACTIVE));
    return d == TW_NEVER ? now : d;
  case 1:
    scale = back[pick(o, 4)];
    return sat_sub(now, 1 + pick(o, scale));
  case 2:
    return now;
  case 3:
    return TW_NEVER - pick(o, 3);
  case 4:
    return gen_grid(o, now);
  case 5:
    return sat_add(now, gen_timeout(o));
  case 6:
    return gen_timeout(o);
  default:
    return sat_add(now, gen_rollover(o));
  }
}

/* The target of an advance: small, coarse, exactly at a deadline, at a
 * digit rollover, medium, huge, near the end of time, or backwards. */
static uint64_t gen_target(ops *o) {
  /* Per million: the end of time, then huge and medium jumps, then the
   * rest in the shares of `rest`. */
  static const uint32_t rest[] = {35, 15, 25, 10, 5, 10, 1, 1};
  uint32_t w[3 + COUNT(rest)];
  uint32_t left = 1000000 - 1000 * o->mix->end_of_time;
  uint64_t now = now_of(o), e, x;
  w[0] = 1000 * o->mix->end_of_time;
  w[1] = left / 100 * o->mix->huge;
  left -= w[1];
  w[2] = left / 100 * o->mix->medium;
  left -= w[2];
  for (size_t i = 0; i < COUNT(rest); i++)
    w[3 + i] = left / 100 * rest[i];
  switch (choose(o, w, COUNT(w))) {
  case 0: {
    static const uint32_t end[] = {1, 1, 1, 1};
    switch (choose(o, end, COUNT(end))) {
    case 0:
      return UINT64_MAX;
    case 1:
      return TW_NEVER - 1;
    case 2:
      return TW_NEVER - 2 - pick(o, 100);
    default:
      return UINT64_MAX - pick(o, UINT64_C(1) << 40);
    }
  }
  case 1:
    return sat_add(now, pick(o, 1000000000));
  case 2:
    return sat_add(now, pick(o, 1000000));
  case 3:
    return sat_add(now, pick(o, 101));
  case 4:
    return sat_add(now, o->grain * pick(o, 9));
  case 5:
    e = model_earliest(&o->p->m);
    x = pick(o, 256);
    if (e == TW_NEVER)
      return sat_add(now, x);
    return sat_add(sat_sub(e, 1), x % 3); /* deadline -1, 0, +1 */
  case 6:
    return sat_add(now, gen_rollover(o));
  case 7:
    return now;
  case 8:
    return sat_sub(now, pick(o, 1001)); /* ignored (rule 7) */
  case 9:
    return sat_add(now, gen_timeout(o));
  default:
    return gen_timeout(o);
  }
}

/* A tw_advance budget of callbacks. */
static size_t gen_budget(ops *o) {
  static const span spans[] = {
      {1, 0, 1}, {1, 1, 3}, {1, 4, 30}, {1, TW_ALL, 1}};
  const uint32_t w[] = {4, o->mix->budget, 6, 90 - o->mix->budget};
  uint64_t v = 0;
  one_of(o, w, COUNT(w), 0, spans, &v);
  return (size_t)v;
}

/* A work budget: none, a few units (which stop in the middle of moving
 * and collecting timers), or a slice. */
static size_t gen_work(ops *o) {
  static const uint32_t w[] = {5, 35, 40, 20, 2};
  static const span spans[] = {
      {1, 0, 1}, {1, 1, 4}, {1, 5, 60}, {1, 65, 5000}, {1, TW_ALL, 1}};
  uint64_t v = 0;
  one_of(o, w, COUNT(w), 0, spans, &v);
  return (size_t)v;
}

/* The time a new wheel starts at. */
static uint64_t gen_start(ops *o, uint64_t now) {
  static const uint32_t w[] = {10, 60, 30, 5};
  static const uint64_t starts[16] = {0,
                                      0,
                                      1,
                                      63,
                                      1000,
                                      4095,
                                      65530,
                                      262140,
                                      1000000007,
                                      (UINT64_C(1) << 36) - 1,
                                      (UINT64_C(1) << 48) - 7,
                                      (UINT64_C(1) << 63) - 3,
                                      TW_NEVER - 100000,
                                      TW_NEVER - 1000,
                                      TW_NEVER - 2,
                                      UINT64_MAX};
  switch (choose(o, w, COUNT(w))) {
  case 0:
    return now;
  case 1:
    return starts[pick(o, 16)];
  case 2:
    return gen_scaled(o);
  default:
    return gen_timeout(o);
  }
}

/* ---- Comparisons (pair.h), and what they count ------------------------- */

static void touch(size_t id) {
  ops *o = live;
  if (!o->touched_mark[id]) {
    o->touched_mark[id] = 1;
    o->touched[o->touched_len++] = id;
  }
}

static void check_wheel(ops *o) {
  pair_check_wheel(o->p);
  if (!o->p->in_advance)
    o->stats.active_sum += model_count(&o->p->m);
}

static void check_touched(ops *o) {
  for (size_t i = 0; i < o->touched_len; i++) {
    pair_check_timer(o->p, o->touched[i]);
    o->touched_mark[o->touched[i]] = 0;
  }
  o->touched_len = 0;
}

static void sweep(ops *o) {
  o->stats.sweeps++;
  pair_check_all_timers(o->p);
}

/*
 * Rule 8: never later than the earliest deadline. Exact while no slot can
 * hold more than TW_RESCAN_LIMIT (64) timers, i.e. with at most 64 active:
 * above that the wheel may answer a stale slot minimum (src/wheel.h), and
 * such early answers are counted. *exact says whether it was held to exact.
 */
static uint64_t check_expiry(ops *o, int *exact) {
  uint64_t earliest;
  int may_be_early = o->allow_early || model_count(&o->p->m) > 64;
  uint64_t got = pair_check_next_expiry(o->p, may_be_early, &earliest);
  o->stats.expiry_checks++;
  if (earliest != TW_NEVER) {
    o->stats.expiry_active++;
    if (got < earliest)
      o->stats.expiry_early++;
  }
  if (exact)
    *exact = !may_be_early;
  return got;
}

/* ---- Operations, each applied to the wheel and to the model ------------- */

static void on_fire(tw_timer *t);

static void do_start(ops *o, size_t id, uint64_t timeout) {
  uint64_t repeat = gen_repeat(o);
  pair_start(o->p, id, timeout, repeat);
}

static void do_start_at(ops *o, size_t id) {
  uint64_t deadline = gen_deadline(o);
  uint64_t repeat = gen_repeat(o);
  pair_start_at(o->p, id, deadline, repeat);
}

/* Rule 4, the idle reset: restart an active timer at a later deadline
 * (through start or start_at), or earlier, or at the same deadline. An
 * inactive one is reset from now. */
static void do_idle_reset(ops *o, size_t id) {
  static const uint32_t how_w[] = {15, 21, 43, 21}, via_w[] = {60, 40};
  static const uint32_t keep_w[] = {80, 20};
  uint64_t now = now_of(o);
  uint64_t old = model_deadline(&o->p->m, id);
  uint64_t repeat =
      choose(o, keep_w, 2) ? gen_repeat(o) : model_repeat(&o->p->m, id);
  uint64_t deadline, other, grid, x;
  size_t via;

  if (old == TW_NEVER) /* not active: as if it were due now */
    old = now;
  switch (choose(o, how_w, COUNT(how_w))) {
  case 0: /* a fresh timeout */
    pair_start(o->p, id, gen_timeout(o), repeat);
    return;
  case 1: /* onto another timer's deadline, or a grid point */
    other = model_deadline(&o->p->m, find_id(o, ID_ACTIVE));
    grid = gen_grid(o, old);
    if (other == TW_NEVER || other < old)
      other = grid;
    deadline = other < old ? old : other;
    break;
  case 2:
    deadline = sat_add(old, gen_later(o));
    break;
  default:
    x = pick(o, 0);
    if (old > now) /* earlier, still not due */
      deadline = now + x % (old - now);
    else /* a due timer, earlier still */
      deadline = sat_sub(old, x % 10);
    break;
  }
  if (old > now && deadline >= old)
    o->stats.later_resets++; /* a store (so are some earlier ones) */
  via = choose(o, via_w, 2);
  if (deadline >= now && via == 0)
    pair_start(o->p, id, deadline - now, repeat); /* saturates as start_at */
  else
    pair_start_at(o->p, id, deadline, repeat);
}

/* Rule 9: bad input is refused and changes nothing (compared after it). */
static void do_bad_input(ops *o, size_t id) {
  static const unsigned char junk_bytes[] = {0, 0x5a, 0xff};
  static const int errs[] = {0, -EINVAL, -ENOMEM, -12345};
  pair *p = o->p;
  tw_timer junk, *t = pair_timer(p, id);
  unsigned kind = (unsigned)pick(o, 8);
  int rc;

  /* Never initialised: zeroed, or garbage in the state bytes. */
  memset(&junk, junk_bytes[pick(o, 3)], sizeof junk);
  pair_trace(p, "/* bad input %u on t[%zu]: -EINVAL */", kind, id);
  switch (kind) {
  case 0:
    rc = tw_timer_start(p->w, t, NULL, 1, 0);
    break;
  case 1:
    rc = tw_timer_start(NULL, t, on_fire, 1, 0);
    break;
  case 2:
    rc = tw_timer_start_at(p->w, t, NULL, 1, 0);
    break;
  case 3:
    rc = tw_timer_stop(NULL, t);
    break;
  case 4:
    rc = tw_timer_again(NULL, t);
    break;
  case 5:
    rc = tw_timer_start(p->w, &junk, on_fire, 1, 0);
    break;
  case 6:
    rc = tw_timer_start_at(p->w, &junk, on_fire, 1, 0);
    if (rc == -EINVAL)
      rc = tw_timer_stop(p->w, &junk);
    if (rc == -EINVAL)
      rc = tw_timer_again(p->w, &junk);
    tw_timer_set_repeat(&junk, 7);
    if (tw_timer_get_repeat(&junk) != 0)
      p->fail("tw_timer_set_repeat changed an uninitialised timer");
    if (tw_timer_is_active(&junk) || tw_timer_deadline(&junk) != TW_NEVER)
      p->fail("an uninitialised timer looks initialised");
    break;
  default:
    rc = tw_timer_start_at(p->w, NULL, on_fire, 1, 0);
    break;
  }
  if (rc != -EINVAL)
    p->fail("bad input %u on t%zu returned %d, not -EINVAL", kind, id, rc);
  pair_check_null_arguments(p);
  for (size_t i = 0; i < COUNT(errs); i++)
    if (!tw_strerror(errs[i]) || !*tw_strerror(errs[i]))
      p->fail("tw_strerror(%d) gave no message", errs[i]);
  touch(id);
}

/* A new wheel where a callback's tw_wheel_free took effect. */
static void replace_freed_wheel(ops *o) {
  if (o->p->wheel_freed)
    pair_replace_freed_wheel(o->p, gen_start(o, now_of(o)));
}

/* tw_advance, or tw_advance_slice; from a callback, re-entrant: refused. */
static size_t do_advance(ops *o, uint64_t to, size_t budget, int slice) {
  size_t ran;
  if (o->self != NO_SELF) {
    pair_reentrant_advance(o->p, to, budget, slice);
    return 0;
  }
  o->stats.advances++;
  o->stats.slices += slice ? 1 : 0;
  ran = slice ? pair_advance_slice(o->p, to, budget)
              : pair_advance(o->p, to, budget);
  replace_freed_wheel(o);
  return ran;
}

/* An advance to what tw_next_expiry says, as a loop would: where the answer
 * must be exact, something fires (rule 8); else count the wasted wakeup. */
static void do_wakeup(ops *o) {
  int exact;
  uint64_t at = check_expiry(o, &exact);
  if (at == TW_NEVER || o->self != NO_SELF) {
    if (at != TW_NEVER)
      do_advance(o, at, TW_ALL, 0);
    return;
  }
  o->stats.wakeups++;
  if (do_advance(o, at, TW_ALL, 0) == 0) {
    o->stats.empty_wakeups++;
    if (exact)
      o->p->fail("a wakeup at tw_next_expiry() %" PRIu64 " fired nothing", at);
  }
}

/* A loop that sleeps until tw_next_wakeup and advances a slice at a time,
 * as the adapters do: every wakeup is before or at the earliest deadline. */
static void do_sliced_wakeup(ops *o) {
  size_t work = gen_work(o);
  uint64_t at = pair_check_next_wakeup(o->p);
  if (at == TW_NEVER)
    return;
  o->stats.sliced_wakeups += o->self == NO_SELF ? 1 : 0;
  do_advance(o, at < now_of(o) ? now_of(o) : at, work, 1);
}

/* A wheel freed in a callback, until the advance returns: it refuses to be
 * used, and a second free is a no-op (ASan would see a double free). */
static void check_freed_wheel_refuses(ops *o) {
  pair *p = o->p;
  tw_timer *t = pair_timer(p, o->self);
  pair_trace(p, "/* the freed wheel refuses start, stop, again; a second "
                "free */");
  if (tw_timer_start(p->w, t, on_fire, 1, 0) != -EINVAL ||
      tw_timer_start_at(p->w, t, on_fire, 1, 0) != -EINVAL ||
      tw_timer_stop(p->w, t) != -EINVAL || tw_timer_again(p->w, t) != -EINVAL ||
      tw_next_expiry(p->w) != TW_NEVER || tw_count(p->w) != 0 ||
      tw_advance(p->w, TW_NEVER, TW_ALL) != 0)
    p->fail("a wheel freed in a callback accepted a call");
  tw_wheel_free(p->w);
  pair_check_all_timers(p);
}

/* tw_wheel_free with timers active, every one becomes inactive, never
 * called; then a new wheel at START. Returns 0 from a callback: the wheel
 * is gone until tw_advance returns, and the callback's caller makes the new
 * one. */
static int do_free_wheel(ops *o) {
  if (o->self != NO_SELF) {
    o->stats.wheel_frees_in_callback++;
    pair_free_wheel_in_callback(o->p);
    check_freed_wheel_refuses(o);
    return 0;
  }
  pair_new_wheel(o->p, gen_start(o, now_of(o)));
  sweep(o);
  return 1;
}

/* ---- The operations ---------------------------------------------------- */

enum {
  START,
  START_AT,
  STOP,
  AGAIN,
  SET_REPEAT,
  ADVANCE,
  BURST,
  WAKEUP,
  FREE,
  INIT,
  FREE_WHEEL,
  BAD_INPUT,
  IDLE_RESET,
  PROGRAM,
  EXPIRY,
  SLICE,
  SLICED_WAKEUP,
  ARRIVALS,
  FIXED_RATE,
  BREAK,
  N_OPS
};

/* How each operation chooses its timers (ID), at the top level and in a
 * callback: any, active, inactive, itself, still due in this advance. */
static const uint32_t id_weights[N_OPS][2][ID_MODES] = {
    [START] = {{1}, {1300, 0, 5200, 10000, 7500}},
    [START_AT] = {{40, 60}, {1300, 0, 5200, 1000, 7500}},
    [STOP] = {{30, 70}, {500, 500, 0, 7000, 20000}},
    [AGAIN] = {{50, 50}, {50, 0, 0, 50}},
    [SET_REPEAT] = {{0, 1}, {0, 0, 0, 1}},
    [BURST] = {{1}, {1}},
    [FREE] = {{50, 0, 50}, {50, 0, 0, 50}},
    [INIT] = {{50, 0, 50}, {50, 0, 0, 50}},
    [BAD_INPUT] = {{1}, {1}},
    [IDLE_RESET] = {{0, 1}, {0, 1}},
    [PROGRAM] = {{1}, {1}},
    [ARRIVALS] = {{0, 0, 1}, {0, 0, 1}},
    [FIXED_RATE] = {{1, 1}, {1, 0, 0, 2, 1}},
};

/* The next operation, per 100,000 at the top level or in a callback. */
static size_t choose_op(ops *o) {
  const ops_mix *mix = o->mix;
  uint32_t w[N_OPS] = {0};
  if (o->self != NO_SELF) { /* in a callback; ADVANCE etc. re-enter */
    w[START] = 24000;
    w[START_AT] = 15000;
    w[STOP] = 28000;
    w[AGAIN] = w[SET_REPEAT] = 5000;
    w[ADVANCE] = 2000;
    w[SLICE] = w[WAKEUP] = w[SLICED_WAKEUP] = 500;
    w[BURST] = w[ARRIVALS] = 100;
    w[FREE] = w[INIT] = 3000;
    w[FREE_WHEEL] = 2 * mix->new_wheel;
    w[BAD_INPUT] = 500;
    w[IDLE_RESET] = 7000;
    w[EXPIRY] = 8000;
    w[FIXED_RATE] = 2000;
    w[BREAK] = 1500;
    return choose(o, w, N_OPS);
  }
  w[START] = 1000 * (35 - mix->restarts);
  w[START_AT] = w[STOP] = 8000;
  w[AGAIN] = 4000;
  w[SET_REPEAT] = w[BURST] = 2000;
  w[ADVANCE] = 22000 + 80 * (100 - mix->slices);
  w[WAKEUP] = 3000;
  w[FREE] = w[INIT] = w[BAD_INPUT] = 1000;
  /* Rarely, and back from the end of time now and then. */
  w[FREE_WHEEL] = mix->new_wheel + (now_of(o) > TW_NEVER / 2 ? 3000 : 0);
  w[IDLE_RESET] = 1000 * mix->restarts;
  w[SLICE] = 80 * mix->slices;
  w[SLICED_WAKEUP] = 5000;
  w[FIXED_RATE] = 2000;
  /* Connections arriving, half of the time, while below the fill. */
  if (model_count(&o->p->m) * 100 < mix->fill * o->n)
    w[ARRIVALS] = 100000;
  return choose(o, w, N_OPS);
}

/* One operation, at the top level or as a callback's action. Returns 0
 * when a callback freed the wheel (its actions end there). */
static int one_op(ops *o) {
  size_t op = choose_op(o), id, k;
  const uint32_t *idw = id_weights[op][o->self != NO_SELF];
  pair *p = o->p;
  uint64_t to;

  switch (op) {
  case START: /* restarting a timer due in this advance: it waits for the
                 next (rule 5), as does a callback's own, 0 included */
    id = pick_id(o, idw);
    do_start(o, id, gen_soon(o));
    break;
  case START_AT:
    do_start_at(o, pick_id(o, idw));
    break;
  case STOP: /* a timer due later in this advance must not fire */
    pair_stop(p, pick_id(o, idw));
    break;
  case AGAIN:
    pair_again(p, pick_id(o, idw));
    break;
  case SET_REPEAT:
    id = pick_id(o, idw);
    pair_set_repeat(p, id, gen_repeat(o));
    break;
  case ADVANCE:
    to = gen_target(o);
    do_advance(o, to, gen_budget(o), 0);
    break;
  case BURST: /* a burst of starts */
    for (k = 1 + (size_t)pick(o, 64); k > 0; k--) {
      id = pick_id(o, idw);
      do_start(o, id, gen_timeout(o));
    }
    break;
  case WAKEUP:
    do_wakeup(o);
    break;
  case FREE: /* rule 6: the wheel never touches the old memory (ASan) */
    pair_replace_timer(p, pick_id(o, idw));
    break;
  case INIT:
    pair_reinit_timer(p, pick_id(o, idw));
    break;
  case FREE_WHEEL:
    return do_free_wheel(o);
  case BAD_INPUT:
    do_bad_input(o, pick_id(o, idw));
    break;
  case IDLE_RESET:
    do_idle_reset(o, pick_id(o, idw));
    break;
  case PROGRAM:
    id = pick_id(o, idw);
    if (o->src->program)
      o->src->program(o->src, id);
    break;
  case EXPIRY:
    check_expiry(o, NULL);
    break;
  case SLICE:
    to = gen_target(o);
    do_advance(o, to, gen_work(o), 1);
    break;
  case SLICED_WAKEUP:
    do_sliced_wakeup(o);
    break;
  case FIXED_RATE: /* rule 6: repeat from the deadline (libevent) */
    id = pick_id(o, idw);
    pair_set_fixed_rate(p, id, (int)pick(o, 3) != 0);
    break;
  case BREAK: /* only in a callback: the advance ends after it */
    pair_break(p);
    break;
  default: /* ARRIVALS: long timeouts on inactive timers */
    for (k = 1 + (size_t)pick(o, 256); k > 0; k--) {
      static const uint32_t rw[] = {90, 10};
      uint64_t timeout;
      id = pick_id(o, idw);
      timeout = gen_long(o);
      pair_start(p, id, timeout, choose(o, rw, 2) ? gen_repeat(o) : 0);
    }
    break;
  }
  return 1;
}

/* ---- Callbacks --------------------------------------------------------- */

/* The comparisons inside a callback: every timer while there are few. */
static void check_in_callback(ops *o) {
  check_wheel(o);
  check_touched(o);
  if (o->sweep_always || o->n <= 64)
    sweep(o);
}

/* Every callback: the model names the timer that must fire, then up to
 * max_actions operations run from the callback, each compared. */
static void on_fire(tw_timer *t) {
  ops *o = live;
  ops_source *outer = o->src;

  o->stats.callbacks++;
  o->self = pair_callback_begins(o->p, t);
  check_in_callback(o); /* rules 6, 7: re-armed or inactive; tw_now */

  if (outer->callback)
    o->src = outer->callback(outer, o->self);
  for (unsigned slot = 0; slot < o->mix->max_actions; slot++) {
    if (!chance(o, o->mix->actions))
      continue;
    o->stats.actions++;
    if (!one_op(o))
      break;
    check_in_callback(o);
    if (o->expiry_in_callbacks)
      check_expiry(o, NULL);
  }
  o->src = outer;
  o->self = NO_SELF;
}

/* ---- A wheel's life ---------------------------------------------------- */

void ops_begin(ops *o) {
  static const uint64_t grains[] = {1, 2, 8, 10, 64, 100, 1000, 4096};
  static const uint32_t grain_w[] = {2, 1, 1, 1, 1, 1, 1, 1};
  static const uint32_t expiry_w[] = {60, 25, 15, 0};
  const ops_mix *mix = o->mix;
  uint64_t start;

  live = o;
  o->self = NO_SELF;
  o->n =
      mix->min_timers + (size_t)pick(o, mix->max_timers - mix->min_timers + 1);
  o->grain = grains[choose(o, grain_w, COUNT(grain_w))];
  /* Most wheels call tw_next_expiry after every operation; some rarely or
   * never, so that advances also meet slots its re-filing would have
   * cleaned. */
  switch (choose(o, expiry_w, COUNT(expiry_w))) {
  case 0:
    o->expiry_check = 100;
    break;
  case 1:
    o->expiry_check = 5 + (unsigned)pick(o, 60);
    break;
  case 2:
    o->expiry_check = 1;
    break;
  default:
    o->expiry_check = 0;
    break;
  }
  o->repeating = 5 + (unsigned)pick(o, 30);
  {
    /* model_earliest scans every timer: only on small wheels */
    const uint32_t w[] = {90, o->n <= 256 ? 10 : 0};
    o->expiry_in_callbacks = (int)choose(o, w, 2);
  }
  start = gen_start(o, 0);

  o->p->on_fire = on_fire;
  o->p->touched = touch;
  pair_init(o->p, o->n, start);
  o->touched = calloc(o->n, sizeof *o->touched);
  o->touched_mark = calloc(o->n, 1);
  if (!o->touched || !o->touched_mark)
    o->p->fail("out of memory");
  o->touched_len = 0;
  /* Full sweeps cost O(timers): every operation for small wheels, about
   * every n/256 operations for large ones (touched timers always). */
  o->sweep_every = o->sweep_always ? 1 : 1 + o->n / 256;
  pair_trace(o->p,
             "/* %zu timers, grain %" PRIu64 ", tw_next_expiry after %u%% of "
             "operations%s */ w = tw_wheel_new(%" PRIu64 "u);",
             o->n, o->grain, o->expiry_check,
             o->expiry_in_callbacks ? " and every callback action" : "", start);
  check_wheel(o);
  sweep(o);
}

void ops_step(ops *o) {
  one_op(o);
  check_wheel(o);
  check_touched(o);
  if (o->expiry_check == 100 ||
      (o->expiry_check > 0 && chance(o, o->expiry_check)))
    check_expiry(o, NULL);
  if (o->p->op % o->sweep_every == 0)
    sweep(o);
  o->stats.ops++;
}

void ops_end(ops *o) {
  sweep(o);
  check_expiry(o, NULL);
  pair_free(o->p); /* with timers still active: they become inactive */
  free(o->touched);
  free(o->touched_mark);
  o->touched = NULL;
  o->touched_mark = NULL;
  live = NULL;
}
