/*
 * The wheel and the reference model (model.h) driven together. The
 * interpreter tests/ops.c, shared by the two differential drivers
 * (tests/test_model.c: a seeded random stream; tests/fuzz/fuzz_wheel.c: the
 * fuzzer's input), runs every operation through the functions below.
 *
 * Each pair_* operation runs on the wheel and on the model and checks what
 * the wheel returned; the pair_check_* functions compare the wheel and its
 * timers with the model exactly. A difference goes to the driver's fail
 * function with a message naming the call and both values; the driver adds
 * where it happened (seed and operation, or the fuzzer's input) and does not
 * return (it aborts, or fails the Criterion test).
 *
 * Timers are named by their index 0..n-1, as in the model. Each is embedded
 * in a struct the pair allocates, as a server embeds it in a connection; a
 * callback with a timer that is not one of these (freed memory) is reported.
 */
#ifndef TW_TEST_PAIR_H
#define TW_TEST_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include <twheel.h>

#include "model.h"

#if defined(__GNUC__) || defined(__clang__)
#define PAIR_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PAIR_PRINTF(fmt, args)
#endif

struct conn;

typedef struct pair {
  /* Set by the driver before pair_init (pair_init keeps them). */
  void (*fail)(const char *fmt, ...) PAIR_PRINTF(1, 2); /* never returns */
  tw_timer_cb on_fire;        /* the callback every start passes */
  void (*touched)(size_t id); /* told of each timer an operation changed;
                                 may be NULL */
  int trace;                  /* print every operation to stderr, as C */
  uint64_t checks;            /* pair_check_wheel calls, to pace tw__check */
  uint64_t op;                /* the driver's operation index, for traces */

  tw_wheel *w;
  model m;
  size_t n;
  struct conn **conns; /* timer i lives in conns[i] */

  /* The advance running now. */
  int in_advance;
  uint64_t advance_now; /* its clamped now: tw_now in every callback */
  size_t fired[16];     /* its first callbacks, for messages */
  size_t fired_len;
  int wheel_freed; /* a callback called tw_wheel_free */
} pair;

/* A wheel and a model at `start`, n timers never started. */
void pair_init(pair *p, size_t n, uint64_t start);

/* tw_wheel_free with timers still active: each must become inactive. Then
 * frees the timers and the model. */
void pair_free(pair *p);

tw_timer *pair_timer(const pair *p, size_t id);

/* One line on stderr when p->trace: the operation index, indented inside a
 * callback. */
void pair_trace(const pair *p, const char *fmt, ...) PAIR_PRINTF(2, 3);

/* ---- Operations on both sides ------------------------------------------ */

void pair_start(pair *p, size_t id, uint64_t timeout, uint64_t repeat);
void pair_start_at(pair *p, size_t id, uint64_t deadline, uint64_t repeat);
void pair_stop(pair *p, size_t id);
void pair_again(pair *p, size_t id); /* the model says 0 or -EINVAL */
void pair_set_repeat(pair *p, size_t id, uint64_t repeat);
void pair_set_fixed_rate(pair *p, size_t id, int fixed_rate);

/* Stop the timer if active, then tw_timer_init on the same memory. */
void pair_reinit_timer(pair *p, size_t id);

/* Stop the timer if active, poison and free its memory, and put a fresh
 * timer in new memory: the wheel must never touch the old one (ASan). */
void pair_replace_timer(pair *p, size_t id);

/* tw_wheel_free with timers active (each must become inactive), then
 * tw_wheel_new(start). */
void pair_new_wheel(pair *p, uint64_t start);

/* Rule 9: every function refuses a NULL wheel or timer. */
void pair_check_null_arguments(pair *p);

/* ---- Advances and callbacks -------------------------------------------- */

/* tw_advance(to, budget) against the model: each callback must call
 * pair_callback_begins first; afterwards no timer may be left that should
 * have fired, and the count returned must be the callbacks that ran.
 * Returns that count. If a callback freed the wheel (p->wheel_freed), the
 * caller makes a new one with pair_replace_freed_wheel. */
size_t pair_advance(pair *p, uint64_t to, size_t budget);

/* tw_advance_slice(to, work) against the model: the callbacks that run are
 * the model's, in its order, at most `work` of them; it may stop before all
 * that is due has run, and then tw_next_wakeup must be <= now (come back).
 * Returns the count of callbacks. */
size_t pair_advance_slice(pair *p, uint64_t to, size_t work);

void pair_replace_freed_wheel(pair *p, uint64_t start);

/* The start of every callback: it must run inside pair_advance, on one of
 * the pair's timers, and that timer must be the one the model fires next
 * (rules 1, 2, 5-7). Returns the timer's id. */
size_t pair_callback_begins(pair *p, tw_timer *t);

/* tw_wheel_free from a callback: every timer inactive at once, no further
 * callback in this advance; the memory goes when tw_advance returns. */
void pair_free_wheel_in_callback(pair *p);

/* tw_advance(to, budget), or tw_advance_slice(to, budget) if slice, from a
 * callback: refused, returns 0, changes nothing. */
void pair_reentrant_advance(pair *p, uint64_t to, size_t budget, int slice);

/* tw_break from a callback: no further callback in this advance. */
void pair_break(pair *p);

/* ---- Comparisons ------------------------------------------------------- */

/* tw_timer_is_active, tw_timer_deadline, tw_timer_get_repeat,
 * tw_timer_is_fixed_rate. */
void pair_check_timer(pair *p, size_t id);

/* tw_now (inside an advance, its clamped now: rule 7) and tw_count. */
void pair_check_wheel(pair *p);

/* The model's own count, then every timer. */
void pair_check_all_timers(pair *p);

/* Rule 8: tw_next_expiry is the earliest deadline, TW_NEVER iff nothing is
 * active; never later, and earlier only if allow_early. Returns what
 * tw_next_expiry said, and the earliest deadline in *earliest unless it is
 * NULL. */
uint64_t pair_check_next_expiry(pair *p, int allow_early, uint64_t *earliest);

/* tw_next_wakeup: TW_NEVER iff nothing is active, else never later than the
 * earliest deadline. Returns what it said. */
uint64_t pair_check_next_wakeup(pair *p);

/* ---- Values the drivers aim at ----------------------------------------- */

uint64_t sat_add(uint64_t a, uint64_t b); /* saturates at UINT64_MAX */
uint64_t sat_sub(uint64_t a, uint64_t b); /* saturates at 0 */

/* The distance from now to the next rollover of digit 1..7 (each digit is
 * 8 bits, as the wheel's), nudged by nudge % 3 - 1: one short of it, at it,
 * or one past. */
uint64_t rollover_distance(uint64_t now, unsigned digit, unsigned nudge);

#endif /* TW_TEST_PAIR_H */
