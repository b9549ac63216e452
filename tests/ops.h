/*
 * The random-operation interpreter shared by the two differential drivers:
 * tests/test_model.c (a seeded random stream) and tests/fuzz/fuzz_wheel.c
 * (the fuzzer's input). It decides which operation comes next and with what
 * operands, applies it to the wheel and the model together (pair.h), runs
 * the callbacks' actions, and makes every comparison after it. The drivers
 * only say where the choices come from (struct ops_source), so an operation
 * is written once, here.
 *
 * Choices. The interpreter asks its source for two kinds of choice:
 *   choose(weight, n)  one of n alternatives (n <= 256). The random driver
 *                      takes alternative i with probability weight[i] / sum;
 *                      the fuzzer reads it from its input whatever the
 *                      weights, so every alternative must make sense in any
 *                      state (a weight of 0 only keeps the random driver
 *                      away from it);
 *   pick(n)            a number in 0..n-1, or any 64-bit number for n = 0.
 * The choices depend only on earlier choices and on the model, never on
 * what the wheel answered, so a choice stream replays the same operations
 * on any build.
 *
 * The choices, in order (the fuzz input is these, byte-encoded; see the top
 * of tests/fuzz/fuzz_wheel.c). `choose` alternatives are numbered from 0;
 * "N:" below means pick(N) (pick(0): 64 bits).
 *
 *   wheel    (max - min + 1):x, min + x timers; choose GRAIN of {1, 2, 8,
 *            10, 64, 100, 1000, 4096}; choose EXPIRY of {after every
 *            operation, after 5 + 60:x % of them, after 1 %, never}; 30:x,
 *            the share of repeating starts (5 + x %: a weight only); choose
 *            {no, yes}: tw_next_expiry after every callback action; START
 *   then operations until the driver stops, each a choose among:
 *     0 start          ID SOON REPEAT
 *     1 start_at       ID DEADLINE REPEAT
 *     2 stop           ID
 *     3 again          ID
 *     4 set_repeat     ID REPEAT
 *     5 advance        TARGET BUDGET (tw_advance)
 *     6 burst          64:k then k+1 times: ID TIMEOUT REPEAT (starts)
 *     7 wakeup         advance to tw_next_expiry(), TW_ALL: fires something
 *                      unless tw_next_expiry may be early (> 64 active)
 *     8 free           ID: stop, free the memory, a fresh timer elsewhere
 *     9 init           ID: stop, tw_timer_init on the same memory
 *    10 free wheel     tw_wheel_free with timers active, then tw_wheel_new
 *                      at START (in a callback: the wheel refuses every
 *                      use until tw_advance returns, START is read then,
 *                      and the callback's actions end)
 *    11 bad input      ID 8:kind 3:junk (0, 0x5a or 0xff bytes): -EINVAL
 *    12 idle reset     ID RESET
 *    13 program        ID, then what the source's program() reads (the
 *                      fuzzer: that timer's callback actions)
 *    14 next_expiry
 *    15 slice          TARGET WORK (tw_advance_slice)
 *    16 sliced wakeup  WORK: tw_advance_slice to tw_next_wakeup()
 *    17 arrivals       256:k then k+1 times: ID LONG choose {0, REPEAT}
 *   after an operation, with EXPIRY "after x %": choose {no, yes}
 *
 *   Each callback reads from the source the driver gives for it (the
 *   fuzzer: the timer's program): up to max_actions times, choose {skip,
 *   act}, and for act one operation of the list above, run from inside the
 *   callback. There, the advances (5, 7, 15, 16) are re-entrant: refused,
 *   they return 0 and change nothing.

 *   ID      choose {any, active, inactive, itself, due}, then
 *           any: timers:i, timer i
 *           active, inactive: timers:i, the first such from timer i on
 *             (cyclically, 64 at the most; none: timer i)
 *           itself: the timer whose callback runs (outside one: as any)
 *           due: max(n, 256):k, n the timers the advance running now
 *             collected and has not reached: the first still due from the
 *             (k % n)-th on (64 at the most); none: timer k % timers
 *   TIMEOUT choose: EDGE | ROLLOVER | 0:x >> 64:s | TW_NEVER - 1 - now +
 *           3:x - 1 (around saturation) | (1 + 255:a) << 8 * 8:b (slot
 *           aligned) | 0 | 1 + 200:x | grain * (1 + 16:x) | 1000000:x |
 *           1000000000:x | UINT64_MAX - 7 + 8:x | 1000 * 256:x
 *   EDGE    48:b: (1 + (b / 8) % 2) << 8 * (b % 8), + b / 16 - 1
 *   ROLLOVER  choose {mix.rollover_levels, 7}:L, L:d, 3:x: the distance to
 *           the next rollover of digit 1 + d, - 1 + x
 *   SOON    choose: TIMEOUT | 0 | 1 + 300:x (top level: mostly TIMEOUT)
 *   LONG    choose: EDGE + 2:x | 1000 + 100000:x | grain * (100 + 1000:x) |
 *           100000 + 100000000:x
 *   REPEAT  choose: EDGE | 0 | 1 + 100:x | grain * (1 + 8:x) |
 *           1 + 1000000000:x | UINT64_MAX - 1 + 2:x
 *   DEADLINE choose: the deadline of timers:i chosen active (none: now) |
 *           now - 1 - (4:s scale {1, 100, 1000000, 2^64 - 2}):x | now |
 *           TW_NEVER - 3:x | grain * (now / grain + 8:x) | now + TIMEOUT |
 *           TIMEOUT (absolute) | now + ROLLOVER
 *   TARGET  choose: end of time (choose {UINT64_MAX, TW_NEVER - 1,
 *           TW_NEVER - 2 - 100:x, UINT64_MAX - 2^40:x}) | now + 1e9:x |
 *           now + 1e6:x | now + 101:x | now + grain * 9:x | the earliest
 *           deadline - 1 + 256:x % 3 (none active: now + x) |
 *           now + ROLLOVER | now | now - 1001:x (backwards) |
 *           now + TIMEOUT | TIMEOUT (absolute)
 *   BUDGET  choose: 0 | 1 + 3:x | 4 + 30:x | TW_ALL
 *   WORK    choose: 0 | 1 + 4:x | 5 + 60:x | 65 + 5000:x | TW_ALL
 *   RESET   choose {keep the period, REPEAT}; then, from the old deadline
 *           (an inactive timer's: now), choose: a fresh TIMEOUT (start) |
 *           onto another timer's deadline (timers:i chosen active, then
 *           8:x: its deadline if at or after the old one, else grain *
 *           (old / grain + x)) | old + LATER | earlier (0:x: now + x %
 *           (old - now), or old - x % 10 when it is due); then choose
 *           {start, start_at} (start_at for a deadline before now)
 *   LATER   choose: EDGE | 0 | 1 + 100:x | grain * (1 + 8:x) |
 *           10000000:x | 0:x
 *   START   choose: the model's now (0 for the first wheel) | one of 16:x
 *           start times at level edges and near the end | 0:x >> 64:s |
 *           TIMEOUT
 *   Additions and subtractions saturate at 0 and UINT64_MAX. "0" and
 *   "TW_ALL" alternatives read pick(1): nothing from the fuzzer's input.
 */
#ifndef TW_TEST_OPS_H
#define TW_TEST_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "pair.h"

/* Where choices come from; a driver embeds it first in its own struct. */
typedef struct ops_source ops_source;
struct ops_source {
  /* A number in 0..n-1; for n == 0, any 64-bit number. */
  uint64_t (*pick)(ops_source *src, uint64_t n);
  /* One of n alternatives (2 <= n <= 256); see above for the weights. */
  size_t (*choose)(ops_source *src, const uint32_t *weight, size_t n);
  /* The source for the actions of timer `self`'s callback, or NULL for
   * this one. Callbacks never nest (a re-entrant advance runs none). */
  ops_source *(*callback)(ops_source *src, size_t self);
  /* Operation 13: what the fuzzer reads as timer id's program. May be
   * NULL (the operation then does nothing). */
  void (*program)(ops_source *src, size_t id);
};

/* How often each thing happens: the random driver's weights (the fuzzer
 * reads only the bounds). Percentages unless said otherwise. */
typedef struct ops_mix {
  size_t min_timers; /* timers per wheel, chosen in [min, max] */
  size_t max_timers;
  unsigned restarts;        /* weight of the idle reset among operations */
  unsigned huge;            /* advances that jump up to 1e9 */
  unsigned medium;          /* of the others, jumps up to 1e6 */
  unsigned end_of_time;     /* per mille of advances near UINT64_MAX */
  unsigned budget;          /* advances with a budget of 1..3 */
  unsigned slices;          /* share of tw_advance_slice among advances */
  unsigned actions;         /* chance of each callback action slot */
  unsigned max_actions;     /* callback action slots */
  unsigned new_wheel;       /* per 100,000 operations: free, new wheel */
  unsigned fill;            /* percent of timers kept active by arrivals */
  unsigned rollover_levels; /* rollovers mostly of digits 1..this (<= 7) */
} ops_mix;

/* What happened, summed over seeds until the driver clears it. */
typedef struct ops_stats {
  uint64_t ops, advances, callbacks, actions, sweeps;
  uint64_t expiry_checks, expiry_active, expiry_early;
  uint64_t wakeups, empty_wakeups, slices, sliced_wakeups;
  uint64_t later_resets, stopped_before_turn, wheel_frees_in_callback;
  uint64_t active_sum; /* of tw_count after each operation */
} ops_stats;

typedef struct ops {
  /* Set by the driver. */
  pair *p;         /* fail and trace set; ops_begin does pair_init */
  ops_source *src; /* the choices */
  const ops_mix *mix;
  int sweep_always; /* compare every timer after every operation */
  int allow_early;  /* accept tw_next_expiry early at any size */
  ops_stats stats;

  /* The wheel's personality, chosen by ops_begin. */
  size_t n;
  uint64_t grain;
  unsigned expiry_check;   /* percent of operations followed by it */
  unsigned repeating;      /* percent of REPEATs that are not 0 */
  int expiry_in_callbacks; /* after every callback action */

  size_t self; /* the timer whose callback runs; SIZE_MAX: none */

  /* Timers an operation touched, compared after it. */
  size_t *touched;
  size_t touched_len;
  unsigned char *touched_mark;
  uint64_t sweep_every; /* all timers compared every this many operations */
} ops;

/* Chooses the wheel (timers, personality, start), makes it with
 * pair_init and compares it. One ops at a time (callbacks find it). */
void ops_begin(ops *o);

/* One operation (o->p->op names it) and the comparisons after it. */
void ops_step(ops *o);

/* Compares everything once more, then pair_free (timers still active). */
void ops_end(ops *o);

#endif /* TW_TEST_OPS_H */
