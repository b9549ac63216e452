/*
 * The wheel and the reference model driven together (pair.h).
 */
#include "pair.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONN_MAGIC UINT64_C(0x74776865656c2121)

struct conn { /* what a server embeds its timer in */
  uint64_t magic;
  size_t id;
  tw_timer timer;
};

#define CONN_OF(t)                                                             \
  ((struct conn *)(void *)((char *)(t)-offsetof(struct conn, timer)))

static struct conn *conn_new(pair *p, size_t id) {
  struct conn *c = malloc(sizeof *c);
  if (!c)
    p->fail("out of memory");
  c->magic = CONN_MAGIC;
  c->id = id;
  tw_timer_init(&c->timer);
  c->timer.data = c;
  return c;
}

void pair_init(pair *p, size_t n, uint64_t start) {
  p->op = 0;
  p->checks = 0;
  p->n = n;
  p->in_advance = 0;
  p->advance_now = 0;
  p->fired_len = 0;
  p->wheel_freed = 0;
  p->w = tw_wheel_new(start);
  if (!p->w || model_init(&p->m, n, start) != 0)
    p->fail("out of memory");
  p->conns = calloc(n, sizeof *p->conns);
  if (!p->conns)
    p->fail("out of memory");
  for (size_t i = 0; i < n; i++)
    p->conns[i] = conn_new(p, i);
}

static void check_all_inactive_after_free(pair *p) {
  for (size_t i = 0; i < p->n; i++)
    if (tw_timer_is_active(pair_timer(p, i)))
      p->fail("timer %zu still active after tw_wheel_free", i);
}

void pair_free(pair *p) {
  tw_wheel_free(p->w);
  p->w = NULL;
  check_all_inactive_after_free(p);
  for (size_t i = 0; i < p->n; i++)
    free(p->conns[i]);
  free(p->conns);
  p->conns = NULL;
  model_free(&p->m);
}

tw_timer *pair_timer(const pair *p, size_t id) {
  return &p->conns[id]->timer;
}

void pair_trace(const pair *p, const char *fmt, ...) {
  va_list ap;
  if (!p->trace)
    return;
  fprintf(stderr, "/* %" PRIu64 " */ %s", p->op, p->in_advance ? "    " : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void touched(pair *p, size_t id) {
  if (p->touched)
    p->touched(id);
}

/* ---- Operations on both sides ------------------------------------------ */

void pair_start(pair *p, size_t id, uint64_t timeout, uint64_t repeat) {
  pair_trace(p, "tw_timer_start(w, &t[%zu], cb, %" PRIu64 "u, %" PRIu64 "u);",
             id, timeout, repeat);
  int rc = tw_timer_start(p->w, pair_timer(p, id), p->on_fire, timeout, repeat);
  if (rc != 0)
    p->fail("tw_timer_start(t%zu, %" PRIu64 ", %" PRIu64 ") returned %d", id,
            timeout, repeat, rc);
  model_start(&p->m, id, timeout, repeat);
  touched(p, id);
}

void pair_start_at(pair *p, size_t id, uint64_t deadline, uint64_t repeat) {
  pair_trace(p,
             "tw_timer_start_at(w, &t[%zu], cb, %" PRIu64 "u, %" PRIu64 "u);",
             id, deadline, repeat);
  int rc =
      tw_timer_start_at(p->w, pair_timer(p, id), p->on_fire, deadline, repeat);
  if (rc != 0)
    p->fail("tw_timer_start_at(t%zu, %" PRIu64 ", %" PRIu64 ") returned %d", id,
            deadline, repeat, rc);
  model_start_at(&p->m, id, deadline, repeat);
  touched(p, id);
}

void pair_stop(pair *p, size_t id) {
  pair_trace(p, "tw_timer_stop(w, &t[%zu]);", id);
  int rc = tw_timer_stop(p->w, pair_timer(p, id));
  if (rc != 0)
    p->fail("tw_timer_stop(t%zu) returned %d", id, rc);
  model_stop(&p->m, id);
  touched(p, id);
}

void pair_again(pair *p, size_t id) {
  pair_trace(p, "tw_timer_again(w, &t[%zu]);", id);
  int rc = tw_timer_again(p->w, pair_timer(p, id));
  int want = model_again(&p->m, id);
  if (rc != want)
    p->fail("tw_timer_again(t%zu) returned %d, model %d", id, rc, want);
  touched(p, id);
}

void pair_set_repeat(pair *p, size_t id, uint64_t repeat) {
  pair_trace(p, "tw_timer_set_repeat(&t[%zu], %" PRIu64 "u);", id, repeat);
  tw_timer_set_repeat(pair_timer(p, id), repeat);
  model_set_repeat(&p->m, id, repeat);
  touched(p, id);
}

void pair_set_fixed_rate(pair *p, size_t id, int fixed_rate) {
  pair_trace(p, "tw_timer_set_fixed_rate(&t[%zu], %d);", id, fixed_rate);
  tw_timer_set_fixed_rate(pair_timer(p, id), fixed_rate);
  model_set_fixed_rate(&p->m, id, fixed_rate);
  touched(p, id);
}

void pair_reinit_timer(pair *p, size_t id) {
  if (model_is_active(&p->m, id))
    pair_stop(p, id);
  pair_trace(p, "tw_timer_init(&t[%zu]);", id);
  tw_timer_init(pair_timer(p, id));
  model_timer_init(&p->m, id);
  touched(p, id);
}

void pair_replace_timer(pair *p, size_t id) {
  struct conn *fresh, *old = p->conns[id];
  if (model_is_active(&p->m, id))
    pair_stop(p, id);
  pair_trace(p, "free(t[%zu]); tw_timer_init(&t[%zu]); /* new memory */", id,
             id);
  fresh = conn_new(p, id);
  memset(old, 0x5a, sizeof *old);
  free(old);
  p->conns[id] = fresh;
  model_timer_init(&p->m, id);
  touched(p, id);
}

void pair_new_wheel(pair *p, uint64_t start) {
  pair_trace(p, "tw_wheel_free(w); w = tw_wheel_new(%" PRIu64 "u);", start);
  tw_wheel_free(p->w);
  check_all_inactive_after_free(p);
  p->w = tw_wheel_new(start);
  if (!p->w)
    p->fail("tw_wheel_new failed");
  model_new_wheel(&p->m, start);
}

void pair_check_null_arguments(pair *p) {
  if (tw_now(NULL) != 0 || tw_count(NULL) != 0 ||
      tw_next_expiry(NULL) != TW_NEVER || tw_advance(NULL, 1, TW_ALL) != 0 ||
      tw_timer_is_active(NULL) || tw_timer_deadline(NULL) != TW_NEVER ||
      tw_timer_get_repeat(NULL) != 0 || tw_timer_again(p->w, NULL) != -EINVAL ||
      tw_timer_stop(p->w, NULL) != -EINVAL ||
      tw_timer_start(p->w, NULL, p->on_fire, 1, 0) != -EINVAL ||
      tw_timer_start_at(p->w, NULL, p->on_fire, 1, 0) != -EINVAL)
    p->fail("a function given NULL did not refuse it");
  tw_timer_set_repeat(NULL, 5);
  tw_wheel_free(NULL);
  tw_timer_init(NULL);
}

/* ---- Advances and callbacks -------------------------------------------- */

/* The callbacks of the advance running now, for messages. */
static const char *fired_so_far(const pair *p) {
  static char buf[256];
  size_t len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < p->fired_len && len + 24 < sizeof buf; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%zu", i ? " " : "",
                            p->fired[i]);
  return buf;
}

/* The trace of an advance, as C: name(w, to, budget);note */
static void trace_advance(const pair *p, const char *name, uint64_t to,
                          size_t budget, const char *note) {
  char arg[24] = "TW_ALL";
  if (!p->trace)
    return;
  if (budget != TW_ALL)
    snprintf(arg, sizeof arg, "%zu", budget);
  pair_trace(p, "%s(w, %" PRIu64 "u, %s);%s", name, to, arg, note);
}

/* An advance of the wheel to `to` begins: the model's too (what it fires is
 * at most max_fire callbacks), and the callbacks may run. */
static void advance_begins(pair *p, uint64_t to, size_t max_fire) {
  model_advance_begin(&p->m, to, max_fire);
  p->advance_now = model_now(&p->m);
  p->in_advance = 1;
  p->fired_len = 0;
}

size_t pair_advance(pair *p, uint64_t to, size_t budget) {
  size_t ran, want, missed;
  trace_advance(p, "tw_advance", to, budget, "");
  advance_begins(p, to, budget);
  ran = tw_advance(p->w, to, budget);
  p->in_advance = 0;
  if (model_advance_next(&p->m, &missed))
    p->fail("advance to %" PRIu64 " returned after %zu callbacks (%s); timer "
            "%zu (deadline %" PRIu64 ") should have fired too",
            to, ran, fired_so_far(p), missed, p->m.last_deadline);
  want = model_advance_end(&p->m);
  if (ran != want)
    p->fail("tw_advance returned %zu, %zu callbacks ran", ran, want);
  return ran;
}

size_t pair_advance_slice(pair *p, uint64_t to, size_t work) {
  size_t ran, want;
  int left;
  trace_advance(p, "tw_advance_slice", to, work, "");
  advance_begins(p, to, TW_ALL);
  ran = tw_advance_slice(p->w, to, work);
  p->in_advance = 0;
  left = model_advance_pending(&p->m);
  want = model_advance_end(&p->m);
  if (ran != want)
    p->fail("tw_advance_slice returned %zu, %zu callbacks ran", ran, want);
  if (ran > work)
    p->fail("tw_advance_slice ran %zu callbacks on a budget of %zu", ran, work);
  if (left && !p->wheel_freed && tw_next_wakeup(p->w) > model_now(&p->m))
    p->fail("tw_advance_slice(%" PRIu64 ", %zu) left due timers, but "
            "tw_next_wakeup says %" PRIu64,
            to, work, tw_next_wakeup(p->w));
  return ran;
}

void pair_replace_freed_wheel(pair *p, uint64_t start) {
  pair_trace(p, "w = tw_wheel_new(%" PRIu64 "u);", start);
  p->wheel_freed = 0;
  p->w = tw_wheel_new(start);
  if (!p->w)
    p->fail("tw_wheel_new failed");
  model_new_wheel(&p->m, start);
}

size_t pair_callback_begins(pair *p, tw_timer *t) {
  struct conn *c = CONN_OF(t);
  const model_timer *mt;
  size_t want;

  if (!p->in_advance)
    p->fail("a callback ran outside tw_advance");
  if (p->wheel_freed)
    p->fail("a callback ran after tw_wheel_free");
  if (c->magic != CONN_MAGIC || c->id >= p->n || p->conns[c->id] != c ||
      t->data != c)
    p->fail("callback with a timer that is not ours (freed?)");
  mt = &p->m.timers[c->id];
  if (!model_advance_next(&p->m, &want))
    p->fail("timer %zu fired (model deadline %" PRIu64 ", active %d), but the "
            "model expected no more callbacks in this advance (%zu ran, "
            "budget %zu; fired: %s)",
            c->id, mt->deadline, mt->active, p->m.ran, p->m.max_fire,
            fired_so_far(p));
  if (want != c->id)
    p->fail("timer %zu fired as callback %zu of this advance, the model "
            "expected timer %zu (deadline %" PRIu64 "); model state of %zu: "
            "deadline %" PRIu64 ", active %d (fired before: %s)",
            c->id, p->m.ran, want, p->m.last_deadline, c->id, mt->deadline,
            mt->active, fired_so_far(p));
  pair_trace(p, "/* callback of t[%zu] */", c->id);
  if (p->fired_len < sizeof p->fired / sizeof p->fired[0])
    p->fired[p->fired_len++] = c->id;
  touched(p, c->id); /* re-armed or inactive before the callback (rule 6) */
  return c->id;
}

void pair_free_wheel_in_callback(pair *p) {
  pair_trace(p, "tw_wheel_free(w);");
  tw_wheel_free(p->w);
  p->wheel_freed = 1;
  model_new_wheel(&p->m, model_now(&p->m));
  pair_check_all_timers(p);
}

void pair_break(pair *p) {
  pair_trace(p, "tw_break(w);");
  tw_break(p->w);
  model_break(&p->m);
}

void pair_reentrant_advance(pair *p, uint64_t to, size_t budget, int slice) {
  const char *name = slice ? "tw_advance_slice" : "tw_advance";
  size_t ran;
  trace_advance(p, name, to, budget, " /* re-entrant: 0 */");
  ran =
      slice ? tw_advance_slice(p->w, to, budget) : tw_advance(p->w, to, budget);
  if (ran != 0)
    p->fail("re-entrant %s ran %zu callbacks", name, ran);
}

/* ---- Comparisons ------------------------------------------------------- */

void pair_check_timer(pair *p, size_t id) {
  const tw_timer *t = pair_timer(p, id);
  int active = tw_timer_is_active(t);
  uint64_t deadline = tw_timer_deadline(t);
  uint64_t repeat = tw_timer_get_repeat(t);

  if (active != model_is_active(&p->m, id))
    p->fail("timer %zu: tw_timer_is_active %d, model %d (model deadline "
            "%" PRIu64 ")",
            id, active, model_is_active(&p->m, id), model_deadline(&p->m, id));
  if (deadline != model_deadline(&p->m, id))
    p->fail("timer %zu: tw_timer_deadline %" PRIu64 ", model %" PRIu64, id,
            deadline, model_deadline(&p->m, id));
  if (repeat != model_repeat(&p->m, id))
    p->fail("timer %zu: tw_timer_get_repeat %" PRIu64 ", model %" PRIu64, id,
            repeat, model_repeat(&p->m, id));
  if (tw_timer_is_fixed_rate(t) != model_fixed_rate(&p->m, id))
    p->fail("timer %zu: tw_timer_is_fixed_rate %d, model %d", id,
            tw_timer_is_fixed_rate(t), model_fixed_rate(&p->m, id));
}

/* src/check.c: the wheel's own invariant (not in the public header). */
const char *tw__check(const tw_wheel *w, int full);

void pair_check_wheel(pair *p) {
  uint64_t now = p->in_advance ? p->advance_now : model_now(&p->m);
  /* The whole invariant after every operation while the wheel holds fewer
   * than 64 timers; above, every 1 + count/64 calls, so that the checks
   * cost about as much as the operations between them. */
  size_t every = 1 + tw_count(p->w) / 64;
  if (p->checks++ % every == 0) {
    const char *broken = tw__check(p->w, p->checks % 256 == 1);
    if (broken)
      p->fail("wheel invariant: %s", broken);
  }
  if (tw_now(p->w) != now)
    p->fail("tw_now %" PRIu64 ", model %" PRIu64, tw_now(p->w), now);
  if (tw_count(p->w) != model_count(&p->m))
    p->fail("tw_count %zu, model %zu", tw_count(p->w), model_count(&p->m));
}

void pair_check_all_timers(pair *p) {
  if (!model_check_count(&p->m))
    p->fail("the model's own count is wrong (a bug in model.c)");
  for (size_t i = 0; i < p->n; i++)
    pair_check_timer(p, i);
}

uint64_t pair_check_next_expiry(pair *p, int allow_early, uint64_t *earliest) {
  uint64_t want = model_earliest(&p->m);
  uint64_t got = tw_next_expiry(p->w);

  pair_trace(p, "tw_next_expiry(w); /* %" PRIu64 "u, earliest %" PRIu64 "u */",
             got, want);
  if (earliest)
    *earliest = want;
  if (want == TW_NEVER) {
    if (got != TW_NEVER)
      p->fail("tw_next_expiry %" PRIu64 " but no timer is active", got);
  } else if (got > want) {
    p->fail("tw_next_expiry %" PRIu64
            " is later than the earliest deadline %" PRIu64,
            got, want);
  } else if (got < want && !allow_early) {
    p->fail("tw_next_expiry %" PRIu64
            " is earlier than the earliest deadline %" PRIu64
            " (a wasted wakeup)",
            got, want);
  }
  return got;
}

uint64_t pair_check_next_wakeup(pair *p) {
  uint64_t want = model_earliest(&p->m);
  uint64_t got = tw_next_wakeup(p->w);

  pair_trace(p, "tw_next_wakeup(w); /* %" PRIu64 "u, earliest %" PRIu64 "u */",
             got, want);
  if ((want == TW_NEVER) != (got == TW_NEVER))
    p->fail("tw_next_wakeup %" PRIu64 ", earliest deadline %" PRIu64, got,
            want);
  if (got > want)
    p->fail("tw_next_wakeup %" PRIu64
            " is later than the earliest deadline %" PRIu64,
            got, want);
  return got;
}

/* ---- Values the drivers aim at ----------------------------------------- */

uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

uint64_t sat_sub(uint64_t a, uint64_t b) {
  return b > a ? 0 : a - b;
}

uint64_t rollover_distance(uint64_t now, unsigned digit, unsigned nudge) {
  uint64_t mask = (UINT64_C(1) << (8 * digit)) - 1;
  uint64_t next = (now | mask) == UINT64_MAX ? UINT64_MAX : (now | mask) + 1;
  uint64_t distance = next - now;
  switch (nudge % 3) {
  case 0:
    return sat_sub(distance, 1);
  case 1:
    return distance;
  default:
    return sat_add(distance, 1);
  }
}
