/*
 * A reference model of the core API (DESIGN.md rules 1-9), written to be
 * obviously correct rather than fast: a plain array of timers, scanned
 * linearly. test_model.c and tests/fuzz/fuzz_wheel.c drive it and the real
 * wheel with the same operations and compare them exactly (pair.h).
 *
 * Timers are named by their index 0..n-1. An advance is split in steps so
 * that the test can run the same callback actions on both sides:
 * model_advance_begin() collects what is due, model_advance_next() names the
 * next timer to fire (and applies rule 6 to it), model_advance_end() ends
 * the advance.
 */
#ifndef TW_MODEL_H
#define TW_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct model_timer {
  int started;       /* has a callback: started since the last init */
  int active;        /* armed */
  int collected;     /* due in the advance running now, not fired yet */
  uint64_t deadline; /* absolute; meaningful while active */
  uint64_t repeat;
  int fixed_rate; /* repeat from the deadline fired for (libevent) */
  uint64_t seq;   /* when it was last armed: orders equal deadlines */
} model_timer;

typedef struct model {
  uint64_t now;
  uint64_t next_seq;
  size_t n;
  model_timer *timers;
  size_t count; /* active timers, kept as they change (model_check_count) */

  /* The advance running now. */
  int advancing;
  int broken; /* tw_break in this advance: no more callbacks in it */
  size_t max_fire;
  size_t ran;
  size_t *firing; /* ids collected at the start, in firing order */
  size_t firing_len;
  size_t firing_pos;
  uint64_t last_deadline; /* the deadline the last fired timer had */
} model;

/* A model of n timers, all never started, and a wheel at `now`.
 * Returns 0, or -1 when out of memory. */
int model_init(model *m, size_t n, uint64_t now);
void model_free(model *m);

/* tw_wheel_free() then tw_wheel_new(now): every timer becomes inactive and
 * keeps its callback and period. */
void model_new_wheel(model *m, uint64_t now);

/* tw_timer_init() (on an inactive timer). */
void model_timer_init(model *m, size_t id);

void model_start(model *m, size_t id, uint64_t timeout, uint64_t repeat);
void model_start_at(model *m, size_t id, uint64_t deadline, uint64_t repeat);
void model_stop(model *m, size_t id);
int model_again(model *m, size_t id); /* 0 or -EINVAL */
void model_set_repeat(model *m, size_t id, uint64_t repeat);
void model_set_fixed_rate(model *m, size_t id, int fixed_rate);
int model_fixed_rate(const model *m, size_t id);

/* tw_break from a callback: the advance runs no further callback; what is
 * due stays due (and runs first at the next advance, by deadline order). */
void model_break(model *m);

int model_is_active(const model *m, size_t id);
uint64_t model_deadline(const model *m, size_t id); /* TW_NEVER if inactive */
uint64_t model_repeat(const model *m, size_t id);
size_t model_count(const model *m);
/* 1 if the kept count is the number of active timers (a self-check). */
int model_check_count(const model *m);
uint64_t model_now(const model *m);

/* The true earliest deadline of any active timer; TW_NEVER if none. */
uint64_t model_earliest(const model *m);

/* tw_advance(now, max_fire), step by step. begin() clamps `now` and collects
 * every active timer due by then, sorted by (deadline, seq). */
void model_advance_begin(model *m, uint64_t now, size_t max_fire);

/* The next callback of the advance: returns 1 and its timer in *id, having
 * disarmed it (a repeating timer re-armed at now + repeat first, or with a
 * fixed rate at its deadline + repeat unless that has passed; the
 * deadline it fired for is in last_deadline), or 0 when the advance is done
 * (nothing left, or the budget is spent). */
int model_advance_next(model *m, size_t *id);

/* 1 if model_advance_next would name another timer (budget aside). */
int model_advance_pending(const model *m);

/* Ends the advance and returns how many callbacks ran; what was collected
 * and not fired stays active and due. */
size_t model_advance_end(model *m);

#endif /* TW_MODEL_H */
