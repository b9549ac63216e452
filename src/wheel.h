/*
 * The wheel's data layout, shared by the core's source files.
 *
 * Time is cut into 6-bit digits. Level L holds 64 slots, one per value of
 * digit L. The wheel's position `pos` is the time its slots are relative to
 * (pos == now except while tw_advance is part way to its now). A timer with
 * deadline d > pos is filed at the level of the highest digit where d and pos
 * differ, in the slot named by d's digit there:
 *
 *   INVARIANT: every timer in level L shares pos's digits above L and has a
 *   larger digit at L than pos has. A TW_SLOTTED timer's deadline lies in its
 *   slot's range; a TW_STALE timer's deadline lies later (it was moved later
 *   with a store and is re-filed when its slot comes due).
 *
 * So the slots of a level hold disjoint, increasing ranges of time, all of
 * them after pos; every timer of level L is due before every timer of level
 * L + 1; and the earliest timers are in the lowest occupied slot of the
 * lowest occupied level. When pos reaches a slot's range the slot "comes
 * due": its timers are re-filed against the new pos, into lower levels, or
 * collected to fire when their deadline is reached. Per arming, a timer
 * moves down at most once per level (a stale one first moves to where its
 * new deadline belongs, paid for by the reset that made it stale), and 11
 * levels cover the whole 64-bit range.
 *
 * Each slot keeps `slot_min`: no later than any deadline in it and no
 * earlier than the slot's start; exact unless the slot is marked dirty (the
 * timer that held it was stopped or moved later). The earliest deadline of
 * the wheel is the slot_min of its earliest slot. tw_next_expiry makes a
 * dirty slot exact by re-filing it when it holds at most TW_RESCAN_LIMIT
 * timers; a larger one keeps its bound, a time at which the slot merely
 * comes due: nothing fires, its timers move down, and the next answer is
 * exact again. (Visiting every timer of a large slot to sharpen its bound
 * would be the same work as its cascade a moment later: twice the stall.)
 *
 * Timers due by now wait in two lists: `firing`, the queue tw_advance runs
 * (and what a budget left of it), sorted by (deadline, start sequence); and
 * `due`, timers started at or before now since that queue was formed, in
 * start order, so a start costs O(1) even with a deadline in the past.
 * `due` is sorted when it is read (due_unsorted says whether it must be):
 * by tw_next_expiry, and by tw_advance, which merges it into `firing` before
 * it runs, so a timer started by a callback waits for the next advance.
 */
#ifndef TW_WHEEL_H
#define TW_WHEEL_H

#include <stdint.h>

#include "list.h"
#include "twheel.h"

#define TW_LEVEL_BITS 6
#define TW_SLOTS (1u << TW_LEVEL_BITS)
#define TW_LEVELS ((64 + TW_LEVEL_BITS - 1) / TW_LEVEL_BITS)
/* The top level holds only the 4 bits left of 64: 16 slots. */
#define TW_TOP_SLOTS (1u << (64 - (TW_LEVELS - 1) * TW_LEVEL_BITS))
#define TW_SLOT_COUNT ((TW_LEVELS - 1) * TW_SLOTS + TW_TOP_SLOTS)
#define TW_MAX_DEADLINE (TW_NEVER - 1)
#define TW_RESCAN_LIMIT 64 /* see slot_min above */

/* A timer's state, in the low byte of tw__order; any other value there
 * means tw_timer_init() was never called. */
enum tw_state {
  TW_IDLE = 0xa1,    /* inactive */
  TW_SLOTTED = 0xa2, /* in the slot its deadline names */
  TW_STALE = 0xa3,   /* in a slot earlier than its deadline */
  TW_DUE = 0xa4      /* in w->firing or w->due: deadline <= now */
};

struct tw_wheel {
  uint64_t now;      /* what tw_now() says: the latest advance's time */
  uint64_t pos;      /* the slots' reference time, <= now */
  uint64_t next_seq; /* start sequence: orders equal deadlines */
  size_t count;      /* active timers */
  int advancing;     /* inside tw_advance: callbacks may be running */
  int free_pending;  /* tw_wheel_free was called from a callback */
  uint64_t occupied[TW_LEVELS]; /* bit s: slot s is not empty */
  uint64_t dirty[TW_LEVELS];    /* bit s: slot_min may be below the minimum */
  /* Slot s of level L is at index L * TW_SLOTS + s of both arrays. */
  uint64_t slot_min[TW_SLOT_COUNT];
  tw_link slots[TW_SLOT_COUNT];
  tw_link due;
  int due_unsorted; /* a start appended a timer due before the last one */
  tw_link firing;
};

static inline size_t tw__slot_index(unsigned level, unsigned s) {
  return (size_t)level * TW_SLOTS + s;
}

static inline unsigned tw__state(const tw_timer *t) {
  return (unsigned)(t->tw__order & 0xff);
}

static inline uint64_t tw__seq(const tw_timer *t) {
  return t->tw__order >> 8;
}

static inline void tw__set_state(tw_timer *t, enum tw_state s) {
  t->tw__order = (t->tw__order & ~(uint64_t)0xff) | (uint64_t)s;
}

static inline int tw__is_valid(const tw_timer *t) {
  unsigned s = tw__state(t);
  return s >= TW_IDLE && s <= TW_DUE;
}

/* Fires before `b` in one advance: earlier deadline, then earlier start. */
static inline int tw__fires_before(const tw_timer *a, const tw_timer *b) {
  return a->tw__deadline < b->tw__deadline ||
         (a->tw__deadline == b->tw__deadline && tw__seq(a) < tw__seq(b));
}

static inline uint64_t tw__saturating_add(uint64_t base, uint64_t delta) {
  if (base >= TW_MAX_DEADLINE || delta > TW_MAX_DEADLINE - base)
    return TW_MAX_DEADLINE;
  return base + delta;
}

/* Arms `t` (idle or not) for `deadline` as a new start. */
void tw__arm(tw_wheel *w, tw_timer *t, uint64_t deadline);

/* Unlinks an active timer from wherever it waits and makes it idle. */
void tw__disarm(tw_wheel *w, tw_timer *t);

/* Re-files every timer of slot `s` of level `level` against w->pos; timers
 * due by then go to the tail of `collected` (as TW_DUE). Leaves the slot
 * clean. Returns 0 when what it appended is out of firing order. */
int tw__refile_slot(tw_wheel *w, unsigned level, unsigned s,
                    tw_link *collected);

/* Finds the slot holding the earliest deadline: the lowest occupied slot of
 * the lowest occupied level. Returns 0 when no slot is occupied. */
int tw__earliest_slot(const tw_wheel *w, unsigned *level, unsigned *s);

/* First time inside slot `s` of `level`, given pos's higher digits. */
uint64_t tw__slot_start(uint64_t pos, unsigned level, unsigned s);

/* Appends a detached timer with deadline <= now to w->due. O(1). */
void tw__append_due(tw_wheel *w, tw_timer *t);

/* Sorts w->due if a start left it out of order. */
void tw__sort_due(tw_wheel *w);

/* Moves every timer of the sorted list `from` into the sorted list `into`,
 * walking back from its tail: O(|from| + timers of `into` due after them). */
void tw__merge_sorted(tw_link *into, tw_link *from);

/* Sorts a non-empty list by tw__fires_before. */
void tw__list_sort(tw_link *head);

#endif /* TW_WHEEL_H */
