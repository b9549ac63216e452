/*
 * libFuzzer harness: the wheel against the reference model (tests/model.c).
 * The operations on both sides and the comparisons are tests/pair.c's,
 * shared with tests/test_model.c; this file decodes the operations.
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
 *    15 slice        u8:how TARGET BUDGET: tw_advance_slice to TARGET (how
 *                    even) or to tw_next_wakeup() (how odd), as a loop
 *                    that sleeps until it does
 *
 *   ID     u8 % timers
 *   VALUE  u8 kind (x % 8) then:
 *            0 u8   1 u16   2 u32   3 u64
 *            4 u8 b: (1 << (8 * (b % 8) + (b / 8) % 2)) + (b / 16) % 3 - 1
 *              (level edges: a block, or two)
 *            5 u8 b: UINT64_MAX - b
 *            6 u8 a, u8 b: a << 8 * (b % 8)                   (slot aligned)
 *            7 u8 b: 1000 * b
 *   DEADLINE u8 sel (x % 6): 0 now + VALUE, 1 now - VALUE, 2 VALUE,
 *            3 ID's deadline (now if inactive), 4 TW_NEVER - u8 % 3,
 *            5 now + ROLLOVER
 *   TARGET u8 sel (x % 6): 0 now + VALUE, 1 earliest deadline - 1 + u8 % 3
 *            (now + u8 when nothing is active), 2 now - VALUE (backwards),
 *            3 VALUE, 4 UINT64_MAX - VALUE, 5 now + ROLLOVER
 *   ROLLOVER u8 b: the distance to the next rollover of digit 1 + b % 7,
 *            - 1 + (b / 7) % 3
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

#include "pair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FZ_MAX_TIMERS 32
#define FZ_PROGRAM_MAX 32

typedef struct reader {
  const uint8_t *p, *end;
} reader;

static pair P; /* the wheel and the model, driven together (pair.h) */

static struct fuzz {
  reader in; /* the top-level operations */
  unsigned flags;
  uint8_t program[FZ_MAX_TIMERS][FZ_PROGRAM_MAX];
  size_t program_len[FZ_MAX_TIMERS];
} F;

#define FLAG_EXPIRY_EVERY_OP 1u
#define FLAG_EXPIRY_IN_CALLBACKS 2u

static void fail(const char *fmt, ...) PAIR_PRINTF(1, 2);

static void fail(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr,
          "\ntwheel-fuzz: operation %" PRIu64 "%s (model now %" PRIu64
          ", %zu timers): ",
          P.op, P.in_advance ? ", in a callback" : "", model_now(&P.m), P.n);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n  replay with TW_FUZZ_TRACE=1 to see the operations\n", stderr);
  abort();
}

/* ---- Decoding the input ------------------------------------------------ */

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
  return take_u8(r) % P.n;
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
    return ((uint64_t)1 << (8 * (b % 8) + (b / 8) % 2)) + (b / 16) % 3 - 1;
  case 5:
    return UINT64_MAX - take_u8(r);
  case 6:
    a = take_u8(r);
    b = take_u8(r);
    return (uint64_t)a << (8 * (b % 8));
  default:
    return 1000 * (uint64_t)take_u8(r);
  }
}

/* The distance from now to the next rollover of digit 1..7, +-1. */
static uint64_t take_rollover(reader *r) {
  unsigned b = take_u8(r);
  return rollover_distance(model_now(&P.m), 1 + b % 7, b / 7);
}

static uint64_t take_deadline(reader *r) {
  uint64_t now = model_now(&P.m);
  switch (take_u8(r) % 6) {
  case 0:
    return sat_add(now, take_value(r));
  case 1:
    return sat_sub(now, take_value(r));
  case 2:
    return take_value(r);
  case 3: {
    uint64_t d = model_deadline(&P.m, take_id(r));
    return d == TW_NEVER ? now : d;
  }
  case 4:
    return TW_NEVER - take_u8(r) % 3;
  default:
    return sat_add(now, take_rollover(r));
  }
}

static uint64_t take_target(reader *r) {
  uint64_t now = model_now(&P.m);
  switch (take_u8(r) % 6) {
  case 0:
    return sat_add(now, take_value(r));
  case 1: {
    uint64_t e = model_earliest(&P.m);
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

/* ---- Comparisons (pair.h) ---------------------------------------------- */

/* Everything but tw_next_expiry (which may re-file timers: called only when
 * the input asks, so that advances also meet slots it did not clean). */
static void check_all(void) {
  pair_check_wheel(&P);
  pair_check_all_timers(&P);
}

/* Rule 8, exact: the earliest deadline, TW_NEVER iff nothing is active. */
static uint64_t check_expiry(void) {
  return pair_check_next_expiry(&P, 0, NULL);
}

/* ---- Operations, decoded and applied to the wheel and to the model ------ */

static void on_fire(tw_timer *t);

/* Operands VALUE:timeout VALUE:repeat. */
static void take_and_start(reader *r, size_t id) {
  uint64_t timeout = take_value(r);
  uint64_t repeat = take_value(r);
  pair_start(&P, id, timeout, repeat);
}

/* Operands DEADLINE VALUE:repeat. */
static void take_and_start_at(reader *r, size_t id) {
  uint64_t deadline = take_deadline(r);
  uint64_t repeat = take_value(r);
  pair_start_at(&P, id, deadline, repeat);
}

/* Rule 4, the idle reset: an active timer re-armed at or after its deadline,
 * through start or start_at, keeping its period or not. An inactive one is
 * simply started. */
static void do_idle_reset(reader *r, size_t id) {
  unsigned how = take_u8(r);
  uint64_t later = take_value(r);
  uint64_t now = model_now(&P.m);
  uint64_t old = model_deadline(&P.m, id);
  uint64_t repeat = how & 2 ? 0 : model_repeat(&P.m, id);
  uint64_t deadline;

  if (old == TW_NEVER) {
    pair_start(&P, id, later, repeat);
    return;
  }
  deadline = sat_add(old, later);
  if (how & 1 && deadline >= now)
    pair_start(&P, id, deadline - now, repeat);
  else
    pair_start_at(&P, id, deadline, repeat);
}

/* Rule 9: bad input is refused and changes nothing (check_all after it). */
static void do_bad_input(size_t id, unsigned kind) {
  tw_timer junk;
  tw_timer *t = pair_timer(&P, id);
  int rc;
  pair_trace(&P, "/* bad input %u on t[%zu]: -EINVAL */", kind % 8, id);
  /* Never initialised: zeroed, or garbage below or above the state bytes. */
  memset(&junk, kind & 8 ? 0x5a : kind & 16 ? 0xff : 0, sizeof junk);
  switch (kind % 8) {
  case 0:
    rc = tw_timer_start(P.w, t, NULL, 1, 0);
    break;
  case 1:
    rc = tw_timer_start(NULL, t, on_fire, 1, 0);
    break;
  case 2:
    rc = tw_timer_start_at(P.w, t, NULL, 1, 0);
    break;
  case 3:
    rc = tw_timer_stop(NULL, t);
    break;
  case 4:
    rc = tw_timer_again(NULL, t);
    break;
  case 5:
    rc = tw_timer_start(P.w, &junk, on_fire, 1, 0);
    break;
  case 6:
    rc = tw_timer_start_at(P.w, &junk, on_fire, 1, 0);
    if (rc == -EINVAL)
      rc = tw_timer_stop(P.w, &junk);
    if (rc == -EINVAL)
      rc = tw_timer_again(P.w, &junk);
    tw_timer_set_repeat(&junk, 7);
    if (tw_timer_get_repeat(&junk) != 0)
      fail("tw_timer_set_repeat changed an uninitialised timer");
    if (tw_timer_is_active(&junk) || tw_timer_deadline(&junk) != TW_NEVER ||
        tw_timer_get_repeat(&junk) != 0)
      fail("an uninitialised timer looks initialised");
    break;
  default:
    rc = tw_timer_start_at(P.w, NULL, on_fire, 1, 0);
    pair_check_null_arguments(&P);
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

static size_t do_advance(uint64_t to, size_t budget) {
  size_t ran = pair_advance(&P, to, budget);
  if (P.wheel_freed) /* a callback's tw_wheel_free took effect */
    pair_replace_freed_wheel(&P, model_now(&P.m));
  return ran;
}

/* tw_advance_slice to TARGET, or to tw_next_wakeup() (never later than the
 * earliest deadline) when `how` is odd. */
static void do_slice(reader *r) {
  unsigned how = take_u8(r);
  uint64_t to = take_target(r);
  size_t work = take_budget(r);
  if (how % 2) {
    to = pair_check_next_wakeup(&P);
    if (to == TW_NEVER)
      return;
  }
  pair_advance_slice(&P, to, work);
  if (P.wheel_freed)
    pair_replace_freed_wheel(&P, model_now(&P.m));
}

/* The k-th timer collected by this advance that has not fired (nor been
 * stopped or re-armed) yet. */
static int pick_still_due(unsigned k, size_t *id) {
  const model *m = &P.m;
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

/* A wheel freed in a callback, until the advance returns: it refuses to be
 * used (as src/timer.c's usable() and tw_next_expiry intend), and a second
 * free is a no-op (ASan would report a double free). */
static void check_freed_wheel_refuses(size_t self) {
  tw_timer *t = pair_timer(&P, self);
  pair_trace(&P, "/* the freed wheel refuses start, stop, again; a second "
                 "free */");
  if (tw_timer_start(P.w, t, on_fire, 1, 0) != -EINVAL ||
      tw_timer_start_at(P.w, t, on_fire, 1, 0) != -EINVAL ||
      tw_timer_stop(P.w, t) != -EINVAL || tw_timer_again(P.w, t) != -EINVAL ||
      tw_next_expiry(P.w) != TW_NEVER || tw_count(P.w) != 0 ||
      tw_advance(P.w, TW_NEVER, TW_ALL) != 0)
    fail("a wheel freed in a callback accepted a call");
  tw_wheel_free(P.w);
  pair_check_all_timers(&P);
}

/* One action of a callback; returns 0 when the wheel is gone. */
static int callback_action(reader *r, size_t self) {
  size_t id;

  switch (take_u8(r) % 16) {
  case 0: /* stop a timer due later in this advance: it must not fire */
    if (pick_still_due(take_u8(r), &id))
      pair_stop(&P, id);
    break;
  case 1: /* restart one: it waits for the next advance (rule 5) */
    if (pick_still_due(take_u8(r), &id))
      take_and_start(r, id);
    break;
  case 2: /* restart itself, 0 included (rule 5) */
    take_and_start(r, self);
    break;
  case 3:
    pair_stop(&P, self);
    break;
  case 4:
    take_and_start(r, take_id(r));
    break;
  case 5:
    take_and_start_at(r, take_id(r));
    break;
  case 6:
    pair_again(&P, take_id(r));
    break;
  case 7:
    pair_set_repeat(&P, self, take_value(r));
    break;
  case 8:
    check_expiry();
    break;
  case 9: /* re-entrant advance: 0, nothing changes */
    pair_reentrant_advance(&P, take_target(r));
    break;
  case 10:
    pair_replace_timer(&P, self);
    break;
  case 11:
    pair_replace_timer(&P, take_id(r));
    break;
  case 12: /* every timer inactive at once, no further callback */
    pair_free_wheel_in_callback(&P);
    check_freed_wheel_refuses(self);
    return 0;
  case 13:
    pair_stop(&P, take_id(r));
    break;
  case 14:
    take_and_start_at(r, self);
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
  size_t self = pair_callback_begins(&P, t);
  uint8_t program[FZ_PROGRAM_MAX];
  reader r;

  check_all(); /* rules 6, 7: re-armed or inactive; tw_now is the advance's */

  /* A copy: the program may outlive nothing it reads. */
  memcpy(program, F.program[self], F.program_len[self]);
  r.p = program;
  r.end = program + F.program_len[self];
  while (r.p < r.end)
    if (!callback_action(&r, self))
      break;
}

/* ---- One input --------------------------------------------------------- */

static void one_op(reader *r) {
  size_t id;

  switch (take_u8(r) % 16) {
  case 0:
    take_and_start(r, take_id(r));
    break;
  case 1:
    take_and_start_at(r, take_id(r));
    break;
  case 2:
    pair_stop(&P, take_id(r));
    break;
  case 3:
    pair_again(&P, take_id(r));
    break;
  case 4:
    id = take_id(r);
    pair_set_repeat(&P, id, take_value(r));
    break;
  case 5:
    do_advance(take_target(r), TW_ALL);
    break;
  case 6: {
    uint64_t to = take_target(r);
    do_advance(to, take_budget(r));
    break;
  }
  case 7: { /* a loop's wakeup: rule 8 says something fires */
    uint64_t at = check_expiry();
    if (at != TW_NEVER && do_advance(at, TW_ALL) == 0)
      fail("a wakeup at tw_next_expiry() %" PRIu64 " fired nothing", at);
    break;
  }
  case 8:
    pair_replace_timer(&P, take_id(r));
    break;
  case 9:
    pair_reinit_timer(&P, take_id(r));
    break;
  case 10:
    pair_new_wheel(&P, take_value(r));
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
    pair_trace(&P, "/* t[%zu]'s callback runs %zu bytes of actions */", id,
               len);
    break;
  }
  case 14:
    check_expiry();
    break;
  default:
    do_slice(r);
    break;
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *t = getenv("TW_FUZZ_TRACE");
  (void)argc;
  (void)argv;
  P.trace = t && *t && *t != '0';
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader *r = &F.in;
  size_t n;
  uint64_t start;

  r->p = data;
  r->end = data + size;
  n = 1 + take_u8(r) % FZ_MAX_TIMERS;
  F.flags = take_u8(r);
  start = take_value(r);

  memset(F.program_len, 0, sizeof F.program_len);
  P.fail = fail;
  P.on_fire = on_fire;
  pair_init(&P, n, start);
  pair_trace(&P, "/* %zu timers, flags %u */ w = tw_wheel_new(%" PRIu64 "u);",
             n, F.flags, start);
  check_all();

  for (P.op = 1; r->p < r->end; P.op++) {
    one_op(r);
    check_all();
    if (F.flags & FLAG_EXPIRY_EVERY_OP)
      check_expiry();
  }
  check_expiry();

  /* With timers still active: they become inactive, never called. */
  pair_free(&P);
  return 0;
}
