/*
 * The wheel's data layout and the invariant every source file keeps.
 *
 * Time is cut into 8-bit digits. A level-L slot spans 2^(8L) ticks (one
 * value of digit L); a level-L *block* spans 2^(8(L+1)) ticks, the width of
 * one level-(L+1) slot. Each level below the top holds two halves of 256
 * slots, one per block, chosen by the block number's parity, so that a level
 * holds two consecutive blocks: the one pos is in and the next. The top level
 * has one half: its block is the whole 64-bit range.
 *
 * Filing rule: a deadline d > pos goes to the lowest level whose two blocks
 * hold it, i.e. with block_L(d) - block_L(pos) <= 1, in the slot of d's
 * digit there, in the half of d's block parity.
 *
 * Sources. The level-(L+1) slot that spans level L's next block is level L's
 * *source*: it holds the timers filed there before that block became level
 * L's next one, and any restarted since for an earlier deadline still in
 * its span (they stay where they are: wheel.c, stays_in_slot). The filing rule
 * never adds to it (such a deadline now goes to level L), and it is drained
 * into level L, paced in batches, so that it is empty one level-L slot before
 * the block begins (pace.c). That paced drain is the only way timers move down:
 * no slot ever comes due holding more than its unpaid remainder.
 *
 *   INVARIANT: every slot holding timers starts after pos, and every timer
 *   in a slot has a deadline no earlier than the slot's start. A timer whose
 *   deadline still lies inside its slot is in the slot the filing rule names
 *   for it, or in a source. A timer moved later with a store (stale) lies
 *   after its slot, and is re-filed when that slot is drained or collected.
 *   A slot's occupied bit is set while it holds timers, and may stay set
 *   after a stop empties it: every such slot but the collecting one starts
 *   after pos and no earlier than horizon, and above level 0 pace_next is
 *   no later than the time it becomes a source, as if it held a timer.
 *   The slot's own `occupied` mark equals its bit; its `dirty` flag is set
 *   only while the bit is.
 *
 * So the earliest deadline is the smallest first-slot minimum over the
 * levels (each level's slots hold disjoint, increasing ranges), and a level-0
 * slot is collected when pos reaches its tick: its timers are due then,
 * stale ones move on.
 *
 * Each slot keeps its count (for the pace), and `min`: no later than any
 * deadline in it and no earlier than its start; exact unless the slot's
 * `dirty` flag is set (the timer holding the minimum left or moved later).
 * tw_next_expiry re-files a dirty slot of no more than TW_RESCAN_LIMIT
 * timers to make it exact while its re-filings stay within
 * TW_EXPIRY_REFILES timers in all, or whatever that takes with no more than
 * TW_RESCAN_LIMIT active (advance.c, earliest_in_slots), and otherwise
 * answers its bound: a time at which nothing fires, the slot is drained,
 * and the next answer is exact.
 *
 * Timers due by pos wait in `firing`, sorted by (deadline, start sequence),
 * for tw_advance to run; what a budget, a break (tw_break) or a fence
 * (tw_driver_fence) leaves of it stays there. A budget
 * may also stop the walk of the level-0 slot at pos (`collecting`: the one
 * occupied slot that does not start after pos); the next advance finishes
 * it before anything else, and then the sort that puts its timers in start
 * order when the walk found them out of it (`sorting`, a budget at a time;
 * the firing list is empty until it ends). Timers
 * started with a deadline <= now wait in `due`, in start order, so such a
 * start is O(1) and a timer started by a callback never runs in that same
 * advance; `due` is sorted when read (due_unsorted says whether it must be).
 * pos < now only after an advance stopped short of now (its budget,
 * max_fire, a fence or a break): the next advance goes on from pos.
 */
#ifndef TW_WHEEL_H
#define TW_WHEEL_H

#include <stdint.h>

/* wheel.c defines tw__inline_abi_1: the core needs no reference to it. */
#define TW__DEFINES_INLINE_ABI
#include "list.h"
#include "twheel.h"

/* For the rare branches of hot paths, kept out of their code. */
#if defined(__GNUC__)
#define TW_NOINLINE __attribute__((noinline))
#else
#define TW_NOINLINE
#endif

/* The shape of the wheel, frozen in twheel.h (its inline paths file
 * timers): 8-bit digits, two halves of 256 slots per level. */
#define TW_LEVEL_BITS TW__LEVEL_BITS
#define TW_SLOTS (1u << TW_LEVEL_BITS) /* slots per half */
#define TW_LEVELS TW__LEVELS
#define TW_TOP (TW_LEVELS - 1)
#define TW_LEVEL_SLOTS TW__LEVEL_SLOTS /* two halves; the top uses one */
#define TW_SLOT_COUNT TW__SLOT_COUNT
#define TW_WORDS (TW_LEVEL_SLOTS / 64) /* bitmap words per level */
#define TW_BITMAP_WORDS (TW_SLOT_COUNT / 64)
#define TW_MAX_DEADLINE (TW_NEVER - 1)
#define TW_RESCAN_LIMIT 64 /* see `min` above */
/* What one tw_next_expiry may re-file in all (advance.c). At 64, as the
 * slot's limit, a thousand idle timeouts (dirty slots of about 9) had
 * their answer early 4.6 times as often as when each call re-filed what it
 * took (bench/run's reset at N = 1e3: 1,935 wasted wakeups against 415, 84
 * instructions a reset against 75); at 1,024 the figures are back (75.8)
 * and one call takes about 5 us here (500 dirty slots of 64 in a row). */
#define TW_EXPIRY_REFILES 1024
/* The paced drains want an advance once this many moves are owed (pace.c). */
#define TW_MAINTENANCE_MOVES 2048
/* A source is paid in batches of this many moves, or of all it holds if
 * fewer: the pace's own work is paid once a batch, not once a timer. */
#define TW_PACE_BATCH 16

/*
 * Where a timer waits, in the low TW__SEQ_SHIFT bits of tw__order (see
 * twheel.h; the start sequence is above them): its state in bits 14-16, and
 * for a timer in a slot the slot's index in bits 0-11 and TW__MAY_HOLD_MIN
 * (bit 12) on the timer that set the slot's minimum as it was filed or
 * moved earlier. While the slot is clean that timer still holds it, so only
 * it, stopped, moved later or moved out of the slot earlier, can leave the
 * minimum inexact: the others are
 * re-armed later, or earlier but after the minimum, with a plain store, even
 * inline. Any state other than these
 * three means tw_timer_init() was never called (zeroed memory included).
 * Bit 13 is the timer's one option, TW_FIXED_RATE, which every move keeps.
 */
#define TW_SEQ_SHIFT TW__SEQ_SHIFT
#define TW_TAG_MASK TW__TAG_MASK
#define TW_STATE_MASK TW__STATE_MASK
#define TW_FIXED_RATE TW__FIXED_RATE /* repeat from the deadline (libevent) */
#define TW_MAY_HOLD_MIN TW__MAY_HOLD_MIN
#define TW_INDEX_MASK TW__INDEX_MASK
#define TW_PLACE_MASK TW__PLACE_MASK
enum tw_state {
  TW_IDLE = TW__IDLE,   /* inactive */
  TW_DUE = 0x18000,     /* deadline <= now: in a list of the wheel's own
                           (firing, collect_back or due; within one call,
                           collect_whole_slot's buckets) */
  TW_SLOT = TW__IN_SLOT /* in slot (tag & TW_INDEX_MASK) */
};

/* A slot (struct tw__slot, twheel.h) keeps its timers, `min` (see above)
 * and their count (for the pace). */

/*
 * A list put in firing order a budget at a time (order.c, tw__sort_slices):
 * the timers of a tick whose walk found them out of start order. Runs cut
 * from the head of `input` are merged like a binary counter (pending[k]
 * holds 2^k runs merged, or nothing), each timer cut or merged one unit of
 * work. Every timer stays in one of these lists, doubly linked, so that a
 * stop, a restart or tw_wheel_free between budgets only unlinks it.
 * 64 levels: a list of 2^64 runs does not fit in memory.
 */
enum tw_sort_phase {
  TW_SORT_IDLE = 0, /* nothing to sort: every list below is empty */
  TW_SORT_CUTTING,  /* `run` takes timers from `input` while in order */
  TW_SORT_CARRYING, /* `run`, whole, goes to pending[level] or merges there */
  TW_SORT_MERGING   /* pending[level] and `run` merge into `merged` */
};
#define TW_SORT_LEVELS 64
struct tw_sorting {
  enum tw_sort_phase phase;
  unsigned level;
  uint64_t pending_levels; /* bit k: pending[k] was given a run */
  tw_link input;
  tw_link run;
  tw_link merged;
  tw_link pending[TW_SORT_LEVELS];
};

/* The pace of one level's source (pace.c). */
struct tw_pace {
  uint64_t block; /* the level block pos was in when last paced */
  uint64_t since; /* paced up to this time */
};

struct tw_wheel {
  /* First, so that twheel.h's inline paths find it at the wheel's address:
   * the time, start sequence, position, count, level ends (tw__level_end,
   * kept by tw__set_pos) and slots. */
  struct tw__wheel_head head;
  /* The rest is the library's own. */
  uint64_t moves;       /* timers moved between slots (tw_moves) */
  int advancing;        /* inside tw_advance: callbacks may be running */
  int free_pending;     /* tw_wheel_free was called from a callback */
  int break_pending;    /* tw_break was called from a callback */
  int due_unsorted;     /* a start appended a timer due before the last one */
  int unfinished;       /* the last advance used up its work budget */
  int fenced;           /* tw_driver_fence was called: the next advance stops
                           before the first timer started since
                           (tw__after_fence) */
  uint64_t fence;       /* while fenced: the sequence bits it holds back */
  size_t collecting;    /* the level-0 slot at pos a budget stopped walking */
  int collect_in_order; /* ... the firing list it fills and collect_back are
                           each sorted (the walk's end checks the one
                           against the other, join_firing) */
  tw_link collect_back; /* ... what the walk took from the slot's tail, in
                           the slot's order: it joins the firing list when
                           the walk ends */
  /* A walk that found its tick out of start order puts it in order here,
   * counted against the budgets, before any of it runs; meanwhile the
   * firing list is empty. */
  struct tw_sorting sorting;
  /* A bitmap over the slots, bit `index` for slot `index` (word index / 64,
   * bit index % 64): it holds timers or a stop left it empty (occupied;
   * the slot's own `occupied` says the same, for the inline paths). A slot
   * that a stop left empty keeps its bit until a search meets it
   * (advance.c, first_live) or a timer is filed there: horizon and
   * pace_next, set while it held timers, stay true for it, so that such a
   * filing only sets its min (tw__slot_join). A level's slots have
   * consecutive indices, so level L has words L * TW_WORDS to
   * L * TW_WORDS + TW_WORDS - 1 (the top level half of them). */
  uint64_t occupied[TW_BITMAP_WORDS];
  uint64_t occupied_words; /* bit k: occupied[k] != 0 */
  struct tw_pace pace[TW_TOP];
  uint64_t pace_next; /* no level's pace owes a batch before this time: a
                         slot above level 0 whose occupied bit is set
                         lowers it to when the slot becomes a source (wheel.c,
                         now_occupied) */
  uint64_t horizon;   /* no occupied slot starts before this time */
  tw_link due;
  tw_link firing;
};

/* ---- Timers' tags ---- */

static inline unsigned tw__tag(const tw_timer *t) {
  return (unsigned)(t->tw__order & TW_TAG_MASK);
}

static inline unsigned tw__state(const tw_timer *t) {
  return tw__tag(t) & TW_STATE_MASK;
}

/* The state, and the slot's index for a timer in a slot. */
static inline unsigned tw__place(const tw_timer *t) {
  return tw__tag(t) & TW_PLACE_MASK;
}

static inline size_t tw__slot_of(const tw_timer *t) {
  return tw__tag(t) & TW_INDEX_MASK;
}

static inline void tw__set_place(tw_timer *t, unsigned place) {
  t->tw__order = (t->tw__order & ~(uint64_t)TW_PLACE_MASK) | place;
}

static inline int tw__is_valid(const tw_timer *t) {
  unsigned state = tw__state(t);
  return state == TW_IDLE || state == TW_DUE || tw__in_slot(t->tw__order);
}

/*
 * Fires before `b` in one advance: earlier deadline, then earlier start.
 * Sequences are compared modulo 2^47, so equal deadlines keep their start
 * order as long as their starts are fewer than 2^46 (7e13) starts apart.
 */
static inline int tw__fires_before(const tw_timer *a, const tw_timer *b) {
  return a->tw__deadline < b->tw__deadline ||
         (a->tw__deadline == b->tw__deadline &&
          (int64_t)(a->tw__order - b->tw__order) < 0);
}

/* The fence before the next start: the tw__order sequence bits it will
 * take. */
static inline uint64_t tw__next_start_fence(const tw_wheel *w) {
  return w->head.next_seq << TW__SEQ_SHIFT;
}

/* `t` was started at or after w->fence (tw__next_start_fence when
 * tw_driver_fence set it): its sequence lies in [fence, next_seq) modulo
 * 2^47, exact while fewer than 2^47 starts come between the fence and the
 * test. (A signed comparison, as tw__fires_before makes, took a timer
 * started 2^46 starts before the fence for one started after it: a fence
 * set at every wakeup held it, and every timer after it, for ever.) */
static inline int tw__after_fence(const tw_wheel *w, const tw_timer *t) {
  return (t->tw__order - w->fence) >> TW__SEQ_SHIFT <
         (tw__next_start_fence(w) - w->fence) >> TW__SEQ_SHIFT;
}

static inline uint64_t tw__saturating_add(uint64_t base, uint64_t delta) {
  if (base >= TW_MAX_DEADLINE || delta > TW_MAX_DEADLINE - base)
    return TW_MAX_DEADLINE;
  return base + delta;
}

/* ---- Time and slots ---- */

static inline unsigned tw__lowest_bit(uint64_t x) { /* x != 0 */
#if defined(__GNUC__)
  return (unsigned)__builtin_ctzll(x);
#else
  unsigned bit = 0;
  while (!(x & 1)) {
    x >>= 1;
    bit++;
  }
  return bit;
#endif
}

static inline unsigned tw__shift(unsigned level) {
  return level * TW_LEVEL_BITS;
}

/* The level-`level` block of time t; the top level has one block, 0. */
static inline uint64_t tw__block(uint64_t t, unsigned level) {
  return level == TW_TOP ? 0 : t >> tw__shift(level + 1);
}

static inline unsigned tw__digit(uint64_t t, unsigned level) {
  return (unsigned)(t >> tw__shift(level)) & (TW_SLOTS - 1);
}

/* Position of time t within a level's two halves: half * 256 + digit. */
static inline unsigned tw__ring_pos(uint64_t t, unsigned level) {
  return (unsigned)(tw__block(t, level) & 1) * TW_SLOTS + tw__digit(t, level);
}

static inline size_t tw__slot_index(unsigned level, unsigned ring_pos) {
  return (size_t)level * TW_LEVEL_SLOTS + ring_pos;
}

static inline unsigned tw__level_of_index(size_t index) {
  return (unsigned)(index / TW_LEVEL_SLOTS);
}

/* The ring position (half * 256 + digit) of slot `index` in its level. */
static inline unsigned tw__ring_pos_of_index(size_t index) {
  return (unsigned)(index % TW_LEVEL_SLOTS);
}

/* Start of the slot at `ring_pos` of `level`: in pos's block if the
 * position is in that block's half, else in the next block. */
uint64_t tw__slot_start(uint64_t pos, unsigned level, unsigned ring_pos);

/* The same for slot `index`. */
static inline uint64_t tw__index_start(uint64_t pos, size_t index) {
  return tw__slot_start(pos, tw__level_of_index(index),
                        tw__ring_pos_of_index(index));
}

/* Start of the level-`level` block `ahead` blocks after pos's (0: pos's
 * own); TW_NEVER at the top level (its one block is the whole range) and
 * where that start would not fit in 64 bits. */
static inline uint64_t tw__block_start(uint64_t pos, unsigned level,
                                       unsigned ahead) {
  unsigned above;
  uint64_t block;
  if (level == TW_TOP)
    return TW_NEVER;
  above = tw__shift(level + 1);
  block = tw__block(pos, level) + ahead;
  /* pos's own block always fits: no check when `ahead` is a constant 0. */
  return ahead && block >> (64 - above) ? TW_NEVER : block << above;
}

/* The end of level `level`'s two blocks at pos: the filing rule's level
 * for a deadline d > pos is the lowest L with d < tw__level_end(pos, L).
 * TW_NEVER (past every deadline) at the top and where the end would not
 * fit in 64 bits. */
static inline uint64_t tw__level_end(uint64_t pos, unsigned level) {
  return tw__block_start(pos, level, 2);
}

/* Moves pos, keeping level_end true (only the levels whose block changed). */
static inline void tw__set_pos(tw_wheel *w, uint64_t pos) {
  uint64_t changed = w->head.pos ^ pos;
  w->head.pos = pos;
  for (unsigned level = 0; level < TW_TOP && changed >> tw__shift(level + 1);
       level++)
    w->head.level_end[level] = tw__level_end(pos, level);
}

/* Level `level`'s source: the index of the level-(level+1) slot spanning
 * level's next block, or TW_SLOT_COUNT when there is no next block. */
size_t tw__source_of(uint64_t pos, unsigned level);

/* ---- Moving timers (wheel.c) ---- */

/* Files a detached timer with deadline > pos at the tail of the slot the
 * rule names. Timers with equal deadlines that arrive out of start order
 * are put back in order when their level-0 slot is collected. */
void tw__file(tw_wheel *w, tw_timer *t);

/* Arms `t` (idle or not) for `deadline` as a new start. */
void tw__arm(tw_wheel *w, tw_timer *t, uint64_t deadline);

/* Moves up to `limit` timers out of slot `index` (not a level-0 slot),
 * re-filing each by the rule against pos. Returns how many moved. */
size_t tw__drain(tw_wheel *w, size_t index, size_t limit);

/* Re-files every timer of slot `index` against pos (none is due by pos):
 * stale ones leave, and the slot's minimum is exact again. */
void tw__rescan(tw_wheel *w, size_t index);

/* Appends a detached timer with deadline <= now to w->due. O(1). */
void tw__append_due(tw_wheel *w, tw_timer *t);

/* ---- Bitmaps (wheel.c) ---- */

/* First ring position of `level` after `after` whose occupied bit is set
 * (it may be a slot a stop emptied), cyclically, not `after` itself (pass
 * pos's own position: the ones after it are in time order); -1 when there
 * is none. */
int tw__first_occupied(const tw_wheel *w, unsigned level, unsigned after);

/* Slot `index`'s bit in word index / 64 of a bitmap over the slots. */
static inline uint64_t tw__slot_bit(size_t index) {
  return (uint64_t)1 << (index % 64);
}

static inline int tw__is_occupied(const tw_wheel *w, size_t index) {
  return (w->occupied[index / 64] & tw__slot_bit(index)) != 0;
}

static inline int tw__is_dirty(const tw_wheel *w, size_t index) {
  return w->head.slots[index].dirty;
}

/* Bit k: word k of `level`'s occupied bits has one set. */
static inline unsigned tw__occupied_words_of(const tw_wheel *w,
                                             unsigned level) {
  return (unsigned)(w->occupied_words >> level * TW_WORDS) &
         ((1u << TW_WORDS) - 1);
}

/* Clears slot `index`'s occupied bit and marks: it lost its last timer, or
 * a search met it empty. Apart from the hot paths. */
void tw__clear_occupied(tw_wheel *w, size_t index);

/* ---- Leaving a slot ----
 * Inline here, not in wheel.c, so that the advance's loops over timers
 * (advance.c) pay no call per timer. */

/* Unlinks a timer from slot `index`, which it is in (tw__slot_leave). A
 * slot it leaves empty loses its bit (a stop keeps it: see `occupied`). */
static inline void tw__leave_slot(tw_wheel *w, tw_timer *t, size_t index) {
  if (tw__slot_leave(&w->head.slots[index], t) == 0)
    tw__clear_occupied(w, index);
}

/* Unlinks an active timer from wherever it waits, keeping counts, bitmaps
 * and bounds true. The timer's tag is left as it was. */
static inline void tw__detach(tw_wheel *w, tw_timer *t) {
  if (tw__state(t) == TW_SLOT)
    tw__leave_slot(w, t, tw__slot_of(t));
  else
    tw__list_unlink(&t->tw__link);
}

/* Unlinks an active timer and makes it idle. */
static inline void tw__disarm(tw_wheel *w, tw_timer *t) {
  tw__detach(w, t);
  tw__set_place(t, TW_IDLE);
  w->head.count--;
}

/* ---- Firing order (order.c) ---- */

/* Moves every timer of the sorted list `from` into the sorted list `into`,
 * each at the cost of the fewer of the timers of `into` before and after
 * its place. */
void tw__merge_sorted(tw_link *into, tw_link *from);

/* Sorts a non-empty list by tw__fires_before. */
void tw__list_sort(tw_link *head);

/* Sets up `s` (all its lists empty, idle) for tw_wheel_new. */
void tw__sort_init(struct tw_sorting *s);

/* Starts putting the list `from` (not empty) in firing order in `s`, which
 * is idle: it takes the whole list, in O(1). */
void tw__sort_begin(struct tw_sorting *s, tw_link *from);

/* Goes on with the sort in `s` for at most *work units (taken from it),
 * one per timer cut or merged; when it is done (or was idle), appends the
 * sorted timers to `out` and returns 1, else 0. */
int tw__sort_slices(struct tw_sorting *s, tw_link *out, size_t *work);

/* Whether `s` holds timers (it may be under way and empty, when stops took
 * them all). Inline: tw_next_expiry asks, and it is mostly idle. */
static inline int tw__sort_holds_timers(const struct tw_sorting *s) {
  if (s->phase == TW_SORT_IDLE)
    return 0;
  if (!tw__list_empty(&s->input) || !tw__list_empty(&s->run) ||
      !tw__list_empty(&s->merged))
    return 1;
  for (uint64_t bits = s->pending_levels; bits; bits &= bits - 1)
    if (!tw__list_empty(&s->pending[tw__lowest_bit(bits)]))
      return 1;
  return 0;
}

/* Sorts w->due if a start left it out of order. Inline: an advance and
 * tw_next_expiry each ask, and it mostly has nothing to do. */
static inline void tw__sort_due(tw_wheel *w) {
  if (w->due_unsorted && !tw__list_empty(&w->due))
    tw__list_sort(&w->due);
  w->due_unsorted = 0;
}

/* tw_next_wakeup, with tw_next_expiry in *expiry (advance.c). */
uint64_t tw__next_times(tw_wheel *w, uint64_t *expiry);

/* ---- Pace (pace.c) ---- */

/* Drains each level's source as far as the pace asks at pos, within
 * `budget` moves; returns the moves made. Sets pace_next. */
size_t tw__pace(tw_wheel *w, size_t budget);

/* The earliest time before `limit` the paced drains want an advance at,
 * else `limit`. */
uint64_t tw__maintenance_time(const tw_wheel *w, uint64_t limit);

/* The earliest time any source, present or to come, owes a batch: the bound
 * on pace_next (for check.c). */
uint64_t tw__pace_due(const tw_wheel *w);

#endif /* TW_WHEEL_H */
