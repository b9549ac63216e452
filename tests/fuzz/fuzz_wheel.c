/*
 * libFuzzer harness: the wheel against the reference model (tests/model.c).
 * The operations, their operands and the comparisons are tests/ops.c's (on
 * top of tests/pair.c), shared with tests/test_model.c; this file is where
 * their choices come from: the fuzzer's input.
 *
 * Each operation runs on the wheel and on the model; after each one, and
 * after every action inside a callback, tw_now, tw_count, the wheel's
 * invariant (tw__check), every timer's tw_timer_is_active /
 * tw_timer_deadline / tw_timer_get_repeat and (as the input asks)
 * tw_next_expiry must equal the model exactly. Callbacks are checked as
 * they run: the model names the timer that must fire next (rules 1, 2,
 * 5-7). Any difference aborts with a message; ASan and UBSan catch the rest
 * (a timer touched after its memory was freed, a wheel used after it was
 * freed from a callback). TW_FUZZ_TRACE=1 prints the operations as C calls.
 *
 * Input format: the interpreter's choices, in the order tests/ops.h lists
 * them (the wheel's size and personality, then operations until the input
 * ends), each read from the input:
 *
 *   choose among n alternatives   one byte x: alternative x % n, whatever
 *                                 the random driver's weights
 *   pick(n), a number below n     the fewest bytes that hold n - 1 (none
 *                                 for n = 1, 8 for n = 0), little endian,
 *                                 modulo n
 *   reading past the end gives zeros; the operations end with the input.
 *
 * The wheel has 1 to 32 timers. A callback's choices do not come from the
 * input's main stream but from its timer's program, which operation 13
 * sets: after its ID, one byte len (x % 65) and len bytes, the choices
 * each of that timer's callbacks makes (up to 32 action slots, each a
 * choose {skip, act} and for act an operation). A program starts empty,
 * and its end reads as zeros: the remaining slots are skipped.
 *
 * tests/fuzz/make-corpus writes the seed corpus in this format.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <twheel.h>

#include "ops.h"
#include "pair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FZ_MAX_TIMERS 32
#define FZ_PROGRAM_MAX 64

/* A stream of choices read from bytes. */
typedef struct reader {
  ops_source src; /* first: the interpreter's view of it */
  const uint8_t *p, *end;
} reader;

static uint64_t fz_pick(ops_source *src, uint64_t n);
static size_t fz_choose(ops_source *src, const uint32_t *weight, size_t n);
static ops_source *fz_callback(ops_source *src, size_t self);
static void fz_program(ops_source *src, size_t id);

static pair P; /* the wheel and the model, driven together (pair.h) */
static ops O;  /* the interpreter (ops.h) */

static struct fuzz {
  reader in;     /* the input: the top-level operations */
  reader action; /* the program of the callback running now */
  uint8_t program[FZ_MAX_TIMERS][FZ_PROGRAM_MAX];
  size_t program_len[FZ_MAX_TIMERS];
} F = {
    .in = {{fz_pick, fz_choose, fz_callback, fz_program}, NULL, NULL},
    .action = {{fz_pick, fz_choose, NULL, fz_program}, NULL, NULL},
};

/* The fuzzer reads no weights; only the bounds and the action slots. */
static const ops_mix mix = {.min_timers = 1,
                            .max_timers = FZ_MAX_TIMERS,
                            .max_actions = 32,
                            .rollover_levels = 7};

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

/* ---- Choices from bytes ------------------------------------------------ */

static unsigned take_u8(reader *r) {
  return r->p < r->end ? *r->p++ : 0;
}

static uint64_t fz_pick(ops_source *src, uint64_t n) {
  reader *r = (reader *)src;
  uint64_t v = 0;
  unsigned shift = 0;
  for (uint64_t left = n - 1; left; left >>= 8, shift += 8)
    v |= (uint64_t)take_u8(r) << shift;
  return n ? v % n : v;
}

static size_t fz_choose(ops_source *src, const uint32_t *weight, size_t n) {
  (void)weight;
  return take_u8((reader *)src) % n;
}

/* A callback's choices: its timer's program. */
static ops_source *fz_callback(ops_source *src, size_t self) {
  (void)src;
  F.action.p = F.program[self];
  F.action.end = F.program[self] + F.program_len[self];
  return &F.action.src;
}

/* Operation 13: len, then the next len bytes become id's program. From a
 * callback they are read from its program, which may be id's own. */
static void fz_program(ops_source *src, size_t id) {
  reader *r = (reader *)src;
  size_t len = take_u8(r) % (FZ_PROGRAM_MAX + 1);
  if (len > (size_t)(r->end - r->p))
    len = (size_t)(r->end - r->p);
  memmove(F.program[id], r->p, len);
  F.program_len[id] = len;
  r->p += len;
  pair_trace(&P, "/* t[%zu]'s callback runs %zu bytes of actions */", id, len);
}

/* ---- One input --------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *t = getenv("TW_FUZZ_TRACE");
  (void)argc;
  (void)argv;
  P.trace = t && *t && *t != '0';
  P.fail = fail;
  O.p = &P;
  O.src = &F.in.src;
  O.mix = &mix;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  F.in.p = data;
  F.in.end = data + size;
  memset(F.program_len, 0, sizeof F.program_len);

  ops_begin(&O);
  for (P.op = 1; F.in.p < F.in.end; P.op++)
    ops_step(&O);
  ops_end(&O); /* timers still active become inactive, never called */
  return 0;
}
