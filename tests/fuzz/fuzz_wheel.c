/*
 * libFuzzer harness: the wheel against the reference model (tests/model.c).
 *
 * The input is a program of operations on one wheel and up to 32 timers.
 * Each operation runs on the wheel and on the model; after each one, and
 * after every action inside a callback, tw_now, tw_count, every timer's
 * tw_timer_is_active / tw_timer_deadline / tw_timer_get_repeat and (when
 * asked) tw_next_expiry must equal the model exactly. Callbacks are checked
 * as they run: the model names the timer that must fire next (rules 1, 2,
 * 5-7). Any difference aborts with a message; ASan and UBSan catch the rest
 * (a timer touched after its memory was freed, a wheel used after it was
 * freed from a callback). TW_FUZZ_TRACE=1 prints the operations as C calls.
 *
 * Input format (all multi-byte integers little endian; reading past the end
 * gives zeros; the program ends with the input):
 *
 *   header:  u8 timers (1 + x % 32), u8 flags, VALUE start time
 *            flags bit 0: tw_next_expiry after every top-level operation
 *            flags bit 1: tw_next_expiry after every callback action
 *   then operations, each an opcode byte (x % 16) and its operands:
 *     0 start        ID VALUE:timeout VALUE:repeat
 *     1 start_at     ID DEADLINE VALUE:repeat
 *     2 stop         ID
 *     3 again        ID
 *     4 set_repeat   ID VALUE
 *     5 advance      TARGET                      (budget TW_ALL)
 *     6 advance      TARGET BUDGET
 *     7 wakeup       advance to tw_next_expiry()
 *     8 free         ID          stop, free the memory, malloc a new timer
 *     9 init         ID          stop, tw_timer_init on the same memory
 *    10 new wheel    VALUE       tw_wheel_free (timers active) + tw_wheel_new
 *    11 bad input    ID u8:kind  NULL / never-initialised arguments: -EINVAL
 *    12 idle reset   ID u8:how VALUE  re-arm an active timer later
 *    13 program      ID u8:len (x % 33) then len bytes: the actions that
 *                    timer's callback runs each time it fires
 *    14 next_expiry
 *    15 set_repeat   ID 0
 *
 *   ID     u8 % timers
 *   VALUE  u8 kind (x % 8) then:
 *            0 u8   1 u16   2 u32   3 u64
 *            4 u8 b: (1 << 6 * (b % 11)) + (b / 11) % 3 - 1  (level edges)
 *            5 u8 b: UINT64_MAX - b
 *            6 u8 a, u8 b: a << 6 * (b % 11)                  (slot aligned)
 *            7 u8 b: 1000 * b
 *   DEADLINE u8 sel (x % 6): 0 now + VALUE, 1 now - VALUE, 2 VALUE,
 *            3 ID's deadline (now if inactive), 4 TW_NEVER - u8 % 3,
 *            5 now + ROLLOVER
 *   TARGET u8 sel (x % 6): 0 now + VALUE, 1 earliest deadline - 1 + u8 % 3
 *            (now + u8 when nothing is active), 2 now - VALUE (backwards),
 *            3 VALUE, 4 UINT64_MAX - VALUE, 5 now + ROLLOVER
 *   ROLLOVER u8 b: the distance to the next rollover of digit 1 + b % 10,
 *            - 1 + (b / 10) % 3
 *   BUDGET u8 b: b % 8 = 0: 0; 1-3: b % 8; 4: 4 + b / 8; 5-7: TW_ALL
 *
 *   callback actions (a timer's program, run until it ends), u8 % 16:
 *     0 stop a timer due later in this advance   u8:k (k-th still due)
 *     1 restart one                              u8:k VALUE VALUE
 *     2 restart itself                           VALUE:timeout VALUE:repeat
 *     3 stop itself
 *     4 start another                            ID VALUE VALUE
 *     5 start_at another                         ID DEADLINE VALUE
 *     6 again                                    ID
 *     7 set_repeat itself                        VALUE
 *     8 tw_next_expiry
 *     9 re-entrant tw_advance: returns 0         TARGET
 *    10 free itself (stop first if repeating)
 *    11 free another                             ID
 *    12 tw_wheel_free: no further callback; the harness makes a new wheel
 *       at the same now when tw_advance returns
 *    13 stop another                             ID
 *    14 start_at itself                          DEADLINE VALUE
 *    15 idle reset of another                    ID u8:how VALUE
 *
 * tests/fuzz/make-corpus writes the seed corpus in this format.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <twheel.h>

#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FZ_MAX_TIMERS 32
#define FZ_PROGRAM_MAX 32
#define CONN_MAGIC UINT64_C(0x74776865656c2121)

struct conn { /* what a server embeds its timer in */
  uint64_t magic;
  size_t id;
  tw_timer timer;
};

#define CONN_OF(t)                                                             \
  ((struct conn *)(void *)((char *)(t)-offsetof(struct conn, timer)))

typedef struct reader {
  const uint8_t *p, *end;
} reader;

static struct fuzz {
  int trace;
  reader in; /* the top-level operations */
  uint64_t op;
  unsigned flags;

  tw_wheel *w;
  model m;
  size_t n;
  struct conn *conns[FZ_MAX_TIMERS];
  uint8_t program[FZ_MAX_TIMERS][FZ_PROGRAM_MAX];
  size_t program_len[FZ_MAX_TIMERS];

  int in_advance;
  int wheel_freed; /* a callback called tw_wheel_free */
} F;

#define FLAG_EXPIRY_EVERY_OP 1u
#define FLAG_EXPIRY_IN_CALLBACKS 2u

static void fail(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "\ntwheel-fuzz: operation %" PRIu64 "%s (model now %" PRIu64
                  ", %zu timers): ",
          F.op, F.in_advance ? ", in a callback" : "", model_now(&F.m), F.n);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n  replay with TW_FUZZ_TRACE=1 to see the operations\n", stderr);
  abort();
}

static void trace(const char *fmt, ...) {
  va_list ap;
  if (!F.trace)
    return;
  fprintf(stderr, "/* %" PRIu64 " */ %s", F.op, F.in_advance ? "    " : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ---- Decoding the input ------------------------------------------------ */

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

static uint64_t sat_sub(uint64_t a, uint64_t b) {
  return b > a ? 0 : a - b;
}

static unsigned take_u8(reader *r) {
  return r->p < r->end ? *r->p++ : 0;
}

static uint64_t take_le(reader *r, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; i++)
    v |= (uint64_t)take_u8(r) << (8 * i);
  return v;
}

static size_t take_id(reader *r) {
  return take_u8(r) % F.n;
}

static uint64_t take_value(reader *r) {
  unsigned b, a;
  switch (take_u8(r) % 8) {
  case 0:
    return take_u8(r);
  case 1:
    return take_le(r, 2);
  case 2:
    return take_le(r, 4);
  case 3:
    return take_le(r, 8);
  case 4:
    b = take_u8(r);
    return ((uint64_t)1 << (6 * (b % 11))) + (b / 11) % 3 - 1;
  case 5:
    return UINT64_MAX - take_u8(r);
  case 6:
    a = take_u8(r);
    b = take_u8(r);
    return (uint64_t)a << (6 * (b % 11));
  default:
    return 1000 * (uint64_t)take_u8(r);
  }
}

/* The distance from now to the next rollover of digit 1..10, +-1. */
static uint64_t take_rollover(reader *r) {
  unsigned b = take_u8(r);
  unsigned bits = 6 * (1 + b % 10);
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  uint64_t now = model_now(&F.m);
  uint64_t next = (now | mask) == UINT64_MAX ? UINT64_MAX : (now | mask) + 1;
  uint64_t d = next - now;
  switch ((b / 10) % 3) {
  case 0:
    return sat_sub(d, 1);
  case 1:
    return d;
  default:
    return sat_add(d, 1);
  }
}

static uint64_t take_deadline(reader *r) {
  uint64_t now = model_now(&F.m);
  switch (take_u8(r) % 6) {
  case 0:
    return sat_add(now, take_value(r));
  case 1:
    return sat_sub(now, take_value(r));
  case 2:
    return take_value(r);
  case 3: {
    uint64_t d = model_deadline(&F.m, take_id(r));
    return d == TW_NEVER ? now : d;
  }
  case 4:
    return TW_NEVER - take_u8(r) % 3;
  default:
    return sat_add(now, take_rollover(r));
  }
}

static uint64_t take_target(reader *r) {
  uint64_t now = model_now(&F.m);
  switch (take_u8(r) % 6) {
  case 0:
    return sat_add(now, take_value(r));
  case 1: {
    uint64_t e = model_earliest(&F.m);
    unsigned b = take_u8(r);
    if (e == TW_NEVER)
      return sat_add(now, b);
    return sat_add(sat_sub(e, 1), b % 3);
  }
  case 2:
    return sat_sub(now, take_value(r));
  case 3:
    return take_value(r);
  case 4:
    return sat_sub(UINT64_MAX, take_value(r));
  default:
    return sat_add(now, take_rollover(r));
  }
}

static size_t take_budget(reader *r) {
  unsigned b = take_u8(r);
  switch (b % 8) {
  case 0:
    return 0;
  case 1:
  case 2:
  case 3:
    return b % 8;
  case 4:
    return 4 + b / 8;
  default:
    return TW_ALL;
  }
}

/* ---- Comparisons ------------------------------------------------------- */

static tw_timer *timer_of(size_t id) {
  return &F.conns[id]->timer;
}

static void check_timer(size_t id) {
  const tw_timer *t = timer_of(id);
  int active = tw_timer_is_active(t);
  uint64_t deadline = tw_timer_deadline(t);
  uint64_t repeat = tw_timer_get_repeat(t);

  if (active != model_is_active(&F.m, id))
    fail("timer %zu: tw_timer_is_active %d, model %d (model deadline %" PRIu64
         ")",
         id, active, model_is_active(&F.m, id), model_deadline(&F.m, id));
  if (deadline != model_deadline(&F.m, id))
    fail("timer %zu: tw_timer_deadline %" PRIu64 ", model %" PRIu64, id,
         deadline, model_deadline(&F.m, id));
  if (repeat != model_repeat(&F.m, id))
    fail("timer %zu: tw_timer_get_repeat %" PRIu64 ", model %" PRIu64, id,
         repeat, model_repeat(&F.m, id));
}

/* Everything but tw_next_expiry (which may re-file timers: called only when
 * the input asks, so that advances also meet slots it did not clean). */
static void check_all(void) {
  if (!model_check_count(&F.m))
    fail("the model's own count is wrong (a bug in model.c)");
  if (tw_now(F.w) != model_now(&F.m))
    fail("tw_now %" PRIu64 ", model %" PRIu64, tw_now(F.w), model_now(&F.m));
  if (tw_count(F.w) != model_count(&F.m))
    fail("tw_count %zu, model %zu", tw_count(F.w), model_count(&F.m));
  for (size_t i = 0; i < F.n; i++)
    check_timer(i);
}

/* Rule 8, exact: the earliest deadline, TW_NEVER iff nothing is active. */
static uint64_t check_expiry(void) {
  uint64_t want = model_earliest(&F.m);
  uint64_t got = tw_next_expiry(F.w);
  trace("tw_next_expiry(w); /* %" PRIu64 "u, model %" PRIu64 "u */", got, want);
  if (got != want)
    fail("tw_next_expiry %" PRIu64 ", earliest deadline %" PRIu64 "%s", got,
         want, want == TW_NEVER ? " (no timer active)" : "");
  return got;
}

/* ---- Operations, each applied to the wheel and to the model ------------- */

static void on_fire(tw_timer *t);

static void do_start(size_t id, uint64_t timeout, uint64_t repeat) {
  trace("tw_timer_start(w, &t[%zu], cb, %" PRIu64 "u, %" PRIu64 "u);", id,
        timeout, repeat);
  int rc = tw_timer_start(F.w, timer_of(id), on_fire, timeout, repeat);
  if (rc != 0)
    fail("tw_timer_start(t%zu) returned %d", id, rc);
  model_start(&F.m, id, timeout, repeat);
}

static void do_start_at(size_t id, uint64_t deadline, uint64_t repeat) {
  trace("tw_timer_start_at(w, &t[%zu], cb, %" PRIu64 "u, %" PRIu64 "u);", id,
        deadline, repeat);
  int rc = tw_timer_start_at(F.w, timer_of(id), on_fire, deadline, repeat);
  if (rc != 0)
    fail("tw_timer_start_at(t%zu) returned %d", id, rc);
  model_start_at(&F.m, id, deadline, repeat);
}

static void do_stop(size_t id) {
  trace("tw_timer_stop(w, &t[%zu]);", id);
  int rc = tw_timer_stop(F.w, timer_of(id));
  if (rc != 0)
    fail("tw_timer_stop(t%zu) returned %d", id, rc);
  model_stop(&F.m, id);
}

static void do_again(size_t id) {
  trace("tw_timer_again(w, &t[%zu]);", id);
  int rc = tw_timer_again(F.w, timer_of(id));
  int want = model_again(&F.m, id);
  if (rc != want)
    fail("tw_timer_again(t%zu) returned %d, model %d", id, rc, want);
}

static void do_set_repeat(size_t id, uint64_t repeat) {
  trace("tw_timer_set_repeat(&t[%zu], %" PRIu64 "u);", id, repeat);
  tw_timer_set_repeat(timer_of(id), repeat);
  model_set_repeat(&F.m, id, repeat);
}

/* Rule 4, the idle reset: an active timer re-armed at or after its deadline,
 * through start or start_at, keeping its period or not. An inactive one is
 * simply started. */
static void do_idle_reset(reader *r, size_t id) {
  unsigned how = take_u8(r);
  uint64_t later = take_value(r);
  uint64_t now = model_now(&F.m);
  uint64_t old = model_deadline(&F.m, id);
  uint64_t repeat = how & 2 ? 0 : model_repeat(&F.m, id);
  uint64_t deadline;

  if (old == TW_NEVER) {
    do_start(id, later, repeat);
    return;
  }
  deadline = sat_add(old, later);
  if (how & 1 && deadline >= now)
    do_start(id, deadline - now, repeat);
  else
    do_start_at(id, deadline, repeat);
}

/* Free the user's struct (stopping the timer first) and put a fresh timer in
 * new memory: the wheel must never touch the old one again (ASan). */
static void do_free(size_t id) {
  struct conn *c, *old = F.conns[id];
  if (model_is_active(&F.m, id))
    do_stop(id);
  trace("free(t[%zu]); tw_timer_init(&t[%zu]); /* new memory */", id, id);
  c = malloc(sizeof *c);
  if (!c)
    fail("out of memory");
  memset(old, 0x5a, sizeof *old);
  free(old);
  c->magic = CONN_MAGIC;
  c->id = id;
  tw_timer_init(&c->timer);
  c->timer.data = c;
  F.conns[id] = c;
  model_timer_init(&F.m, id);
}

static void do_init(size_t id) {
  if (model_is_active(&F.m, id))
    do_stop(id);
  trace("tw_timer_init(&t[%zu]);", id);
  tw_timer_init(timer_of(id));
  model_timer_init(&F.m, id);
}

static void do_new_wheel(uint64_t start) {
  trace("tw_wheel_free(w); w = tw_wheel_new(%" PRIu64 "u);", start);
  tw_wheel_free(F.w);
  for (size_t i = 0; i < F.n; i++)
    if (tw_timer_is_active(timer_of(i)))
      fail("timer %zu still active after tw_wheel_free", i);
  F.w = tw_wheel_new(start);
  if (!F.w)
    fail("tw_wheel_new failed");
  model_new_wheel(&F.m, start);
}

/* Rule 9: bad input is refused and changes nothing (check_all after it). */
static void do_bad_input(size_t id, unsigned kind) {
  tw_timer junk;
  int rc;
  trace("/* bad input %u on t[%zu]: -EINVAL */", kind % 8, id);
  /* Never initialised: zeroed, or garbage below or above the state bytes. */
  memset(&junk, kind & 8 ? 0x5a : kind & 16 ? 0xff : 0, sizeof junk);
  switch (kind % 8) {
  case 0:
    rc = tw_timer_start(F.w, timer_of(id), NULL, 1, 0);
    break;
  case 1:
    rc = tw_timer_start(NULL, timer_of(id), on_fire, 1, 0);
    break;
  case 2:
    rc = tw_timer_start_at(F.w, timer_of(id), NULL, 1, 0);
    break;
  case 3:
    rc = tw_timer_stop(NULL, timer_of(id));
    break;
  case 4:
    rc = tw_timer_again(NULL, timer_of(id));
    break;
  case 5:
    rc = tw_timer_start(F.w, &junk, on_fire, 1, 0);
    break;
  case 6:
    rc = tw_timer_start_at(F.w, &junk, on_fire, 1, 0);
    if (rc == -EINVAL)
      rc = tw_timer_stop(F.w, &junk);
    if (rc == -EINVAL)
      rc = tw_timer_again(F.w, &junk);
    tw_timer_set_repeat(&junk, 7);
    if (tw_timer_get_repeat(&junk) != 0)
      fail("tw_timer_set_repeat changed an uninitialised timer");
    if (tw_timer_is_active(&junk) || tw_timer_deadline(&junk) != TW_NEVER ||
        tw_timer_get_repeat(&junk) != 0)
      fail("an uninitialised timer looks initialised");
    break;
  default:
    rc = tw_timer_start_at(F.w, NULL, on_fire, 1, 0);
    if (tw_now(NULL) != 0 || tw_count(NULL) != 0 ||
        tw_next_expiry(NULL) != TW_NEVER || tw_advance(NULL, 1, TW_ALL) != 0 ||
        tw_timer_is_active(NULL) || tw_timer_deadline(NULL) != TW_NEVER ||
        tw_timer_get_repeat(NULL) != 0 ||
        tw_timer_again(F.w, NULL) != -EINVAL ||
        tw_timer_stop(F.w, NULL) != -EINVAL ||
        tw_timer_start(F.w, NULL, on_fire, 1, 0) != -EINVAL)
      fail("a function given NULL did not refuse it");
    tw_timer_set_repeat(NULL, 5);
    tw_wheel_free(NULL);
    tw_timer_init(NULL);
    break;
  }
  if (rc != -EINVAL)
    fail("bad input %u on t%zu returned %d, not -EINVAL", kind % 8, id, rc);
  {
    static const int errs[] = {0, -EINVAL, -ENOMEM, -12345};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
      if (!tw_strerror(errs[i]) || !*tw_strerror(errs[i]))
        fail("tw_strerror(%d) gave no message", errs[i]);
  }
}

/* ---- Advance and callbacks --------------------------------------------- */

static void do_advance(uint64_t to, size_t budget) {
  size_t ran, want, missed;
  if (budget == TW_ALL)
    trace("tw_advance(w, %" PRIu64 "u, TW_ALL);", to);
  else
    trace("tw_advance(w, %" PRIu64 "u, %zu);", to, budget);
  model_advance_begin(&F.m, to, budget);
  F.in_advance = 1;
  ran = tw_advance(F.w, to, budget);
  F.in_advance = 0;
  if (model_advance_next(&F.m, &missed))
    fail("tw_advance(%" PRIu64 ") returned after %zu callbacks; timer %zu "
         "(deadline %" PRIu64 ") should have fired too",
         to, ran, missed, F.m.last_deadline);
  want = model_advance_end(&F.m);
  if (ran != want)
    fail("tw_advance returned %zu, %zu callbacks ran", ran, want);
  if (F.wheel_freed) { /* the callback's tw_wheel_free took effect */
    F.wheel_freed = 0;
    trace("w = tw_wheel_new(%" PRIu64 "u);", model_now(&F.m));
    F.w = tw_wheel_new(model_now(&F.m));
    if (!F.w)
      fail("tw_wheel_new failed");
    model_new_wheel(&F.m, model_now(&F.m));
  }
}

/* The k-th timer collected by this advance that has not fired (nor been
 * stopped or re-armed) yet. */
static int pick_still_due(unsigned k, size_t *id) {
  const model *m = &F.m;
  size_t left = 0;
  for (size_t i = m->firing_pos; i < m->firing_len; i++)
    left += m->timers[m->firing[i]].collected ? 1 : 0;
  if (!left)
    return 0;
  k %= (unsigned)left;
  for (size_t i = m->firing_pos; i < m->firing_len; i++)
    if (m->timers[m->firing[i]].collected && k-- == 0) {
      *id = m->firing[i];
      return 1;
    }
  return 0;
}

/* One action of a callback; returns 0 when the wheel is gone. */
static int callback_action(reader *r, size_t self) {
  size_t id;
  uint64_t a, b;

  switch (take_u8(r) % 16) {
  case 0: /* stop a timer due later in this advance: it must not fire */
    if (pick_still_due(take_u8(r), &id))
      do_stop(id);
    break;
  case 1: /* restart one: it waits for the next advance (rule 5) */
    if (pick_still_due(take_u8(r), &id)) {
      a = take_value(r);
      b = take_value(r);
      do_start(id, a, b);
    }
    break;
  case 2: /* restart itself, 0 included (rule 5) */
    a = take_value(r);
    b = take_value(r);
    do_start(self, a, b);
    break;
  case 3:
    do_stop(self);
    break;
  case 4:
    id = take_id(r);
    a = take_value(r);
    b = take_value(r);
    do_start(id, a, b);
    break;
  case 5:
    id = take_id(r);
    a = take_deadline(r);
    b = take_value(r);
    do_start_at(id, a, b);
    break;
  case 6:
    do_again(take_id(r));
    break;
  case 7:
    do_set_repeat(self, take_value(r));
    break;
  case 8:
    check_expiry();
    break;
  case 9: { /* re-entrant advance: 0, nothing changes */
    uint64_t to = take_target(r);
    trace("tw_advance(w, %" PRIu64 "u, TW_ALL); /* re-entrant: 0 */", to);
    size_t ran = tw_advance(F.w, to, TW_ALL);
    if (ran != 0)
      fail("re-entrant tw_advance ran %zu callbacks", ran);
    break;
  }
  case 10:
    do_free(self);
    break;
  case 11:
    do_free(take_id(r));
    break;
  case 12: /* every timer inactive at once, no further callback */
    trace("tw_wheel_free(w);");
    tw_wheel_free(F.w);
    F.wheel_freed = 1;
    model_new_wheel(&F.m, model_now(&F.m));
    for (size_t i = 0; i < F.n; i++)
      check_timer(i);
    /* Until this advance returns, the wheel refuses to be used (as
     * src/timer.c's usable() and tw_next_expiry intend), and a second free
     * is a no-op (ASan would report a double free). */
    trace("/* the freed wheel refuses start, stop, again; a second free */");
    if (tw_timer_start(F.w, timer_of(self), on_fire, 1, 0) != -EINVAL ||
        tw_timer_start_at(F.w, timer_of(self), on_fire, 1, 0) != -EINVAL ||
        tw_timer_stop(F.w, timer_of(self)) != -EINVAL ||
        tw_timer_again(F.w, timer_of(self)) != -EINVAL ||
        tw_next_expiry(F.w) != TW_NEVER || tw_count(F.w) != 0 ||
        tw_advance(F.w, TW_NEVER, TW_ALL) != 0)
      fail("a wheel freed in a callback accepted a call");
    tw_wheel_free(F.w);
    for (size_t i = 0; i < F.n; i++)
      check_timer(i);
    return 0;
  case 13:
    do_stop(take_id(r));
    break;
  case 14:
    a = take_deadline(r);
    b = take_value(r);
    do_start_at(self, a, b);
    break;
  default:
    id = take_id(r);
    do_idle_reset(r, id);
    break;
  }
  check_all();
  if (F.flags & FLAG_EXPIRY_IN_CALLBACKS)
    check_expiry();
  return 1;
}

static void on_fire(tw_timer *t) {
  struct conn *c = CONN_OF(t);
  size_t want, id;
  uint8_t program[FZ_PROGRAM_MAX];
  reader r;

  if (!F.in_advance)
    fail("a callback ran outside tw_advance");
  if (F.wheel_freed)
    fail("a callback ran after tw_wheel_free");
  if (c->magic != CONN_MAGIC || c->id >= F.n || F.conns[c->id] != c ||
      t->data != c)
    fail("callback with a timer that is not ours (freed?)");
  id = c->id;
  if (!model_advance_next(&F.m, &want))
    fail("timer %zu fired (model deadline %" PRIu64 ", active %d), but the "
         "model expected no more callbacks (%zu ran, budget %zu)",
         id, F.m.timers[id].deadline, F.m.timers[id].active, F.m.ran,
         F.m.max_fire);
  if (want != id)
    fail("timer %zu fired as callback %zu of this advance, the model expected "
         "timer %zu (deadline %" PRIu64 "); model state of %zu: deadline "
         "%" PRIu64 ", active %d",
         id, F.m.ran, want, F.m.last_deadline, id, F.m.timers[id].deadline,
         F.m.timers[id].active);
  trace("/* callback of t[%zu] */", id);
  check_all(); /* rules 6, 7: re-armed or inactive; tw_now is the advance's */

  /* A copy: the program may outlive nothing it reads. */
  memcpy(program, F.program[id], F.program_len[id]);
  r.p = program;
  r.end = program + F.program_len[id];
  while (r.p < r.end)
    if (!callback_action(&r, id))
      break;
}

/* ---- One input --------------------------------------------------------- */

static void one_op(reader *r) {
  size_t id;
  uint64_t a, b;

  switch (take_u8(r) % 16) {
  case 0:
    id = take_id(r);
    a = take_value(r);
    b = take_value(r);
    do_start(id, a, b);
    break;
  case 1:
    id = take_id(r);
    a = take_deadline(r);
    b = take_value(r);
    do_start_at(id, a, b);
    break;
  case 2:
    do_stop(take_id(r));
    break;
  case 3:
    do_again(take_id(r));
    break;
  case 4:
    id = take_id(r);
    do_set_repeat(id, take_value(r));
    break;
  case 5:
    do_advance(take_target(r), TW_ALL);
    break;
  case 6:
    a = take_target(r);
    do_advance(a, take_budget(r));
    break;
  case 7: { /* a loop's wakeup: rule 8 says something fires */
    uint64_t at = check_expiry();
    if (at != TW_NEVER) {
      do_advance(at, TW_ALL);
      if (F.m.ran == 0)
        fail("a wakeup at tw_next_expiry() %" PRIu64 " fired nothing", at);
    }
    break;
  }
  case 8:
    do_free(take_id(r));
    break;
  case 9:
    do_init(take_id(r));
    break;
  case 10:
    do_new_wheel(take_value(r));
    break;
  case 11:
    id = take_id(r);
    do_bad_input(id, take_u8(r));
    break;
  case 12:
    id = take_id(r);
    do_idle_reset(r, id);
    break;
  case 13: {
    size_t len;
    id = take_id(r);
    len = take_u8(r) % (FZ_PROGRAM_MAX + 1);
    if (len > (size_t)(r->end - r->p))
      len = (size_t)(r->end - r->p);
    memcpy(F.program[id], r->p, len);
    F.program_len[id] = len;
    r->p += len;
    trace("/* t[%zu]'s callback runs %zu bytes of actions */", id, len);
    break;
  }
  case 14:
    check_expiry();
    break;
  default:
    do_set_repeat(take_id(r), 0);
    break;
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *t = getenv("TW_FUZZ_TRACE");
  (void)argc;
  (void)argv;
  F.trace = t && *t && *t != '0';
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader *r = &F.in;
  uint64_t start;

  r->p = data;
  r->end = data + size;
  F.op = 0;
  F.in_advance = 0;
  F.wheel_freed = 0;
  F.n = 1 + take_u8(r) % FZ_MAX_TIMERS;
  F.flags = take_u8(r);
  start = take_value(r);

  memset(F.program_len, 0, sizeof F.program_len);
  if (model_init(&F.m, F.n, start) != 0)
    fail("out of memory");
  F.w = tw_wheel_new(start);
  if (!F.w)
    fail("tw_wheel_new failed");
  for (size_t i = 0; i < F.n; i++) {
    struct conn *c = malloc(sizeof *c);
    if (!c)
      fail("out of memory");
    c->magic = CONN_MAGIC;
    c->id = i;
    tw_timer_init(&c->timer);
    c->timer.data = c;
    F.conns[i] = c;
  }
  trace("/* %zu timers, flags %u */ w = tw_wheel_new(%" PRIu64 "u);", F.n,
        F.flags, start);
  check_all();

  for (F.op = 1; r->p < r->end; F.op++) {
    one_op(r);
    check_all();
    if (F.flags & FLAG_EXPIRY_EVERY_OP)
      check_expiry();
  }
  check_expiry();

  /* With timers still active: they become inactive, never called. */
  do_new_wheel(0);
  tw_wheel_free(F.w);
  F.w = NULL;
  for (size_t i = 0; i < F.n; i++) {
    free(F.conns[i]);
    F.conns[i] = NULL;
  }
  model_free(&F.m);
  return 0;
}
