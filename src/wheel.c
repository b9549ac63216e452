/*
 * Where timers wait: the wheel's lifetime, the filing rule, moving timers
 * between slots, and the per-timer API (start, stop, again...), kept in one
 * file so that the hot paths (the idle reset, start and stop) compile to
 * straight-line code. Read wheel.h first: it states the invariant everything
 * here keeps.
 */
#define TW__NO_INLINE /* this file defines the starts and the stop itself */
#include "wheel.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((TW_LEVELS * TW_LEVEL_BITS) == 64 &&
                   TW_SLOT_COUNT <= TW_INDEX_MASK + 1,
               "the levels cover 64 bits; a slot's index fits its tag bits");
_Static_assert(TW_SLOT == TW_STATE_MASK &&
                   TW_INDEX_MASK < (TW_STATE_MASK & -TW_STATE_MASK),
               "in a slot is the highest state, and the index bits lie below "
               "the state bits (tw__waiting_slot)");
/* The inline paths of twheel.h require this layout by name (twheel.h). */
const unsigned char tw__inline_abi_1 = 1;

/* The wheel is aligned to a cache line so that no slot straddles two. */
#define TW_WHEEL_ALIGN 64

/* ---- The filing rule ---- */

uint64_t tw__slot_start(uint64_t pos, unsigned level, unsigned ring_pos) {
  uint64_t block = tw__block(pos, level);
  unsigned digit = ring_pos % TW_SLOTS;
  if (ring_pos / TW_SLOTS != (block & 1)) /* the other half: the next block */
    block++;
  if (level == TW_TOP)
    return (uint64_t)digit << tw__shift(level);
  return block << tw__shift(level + 1) | (uint64_t)digit << tw__shift(level);
}

size_t tw__source_of(uint64_t pos, unsigned level) {
  uint64_t next = tw__block_start(pos, level, 1);
  if (next == TW_NEVER) /* pos is in the last block: none follows */
    return TW_SLOT_COUNT;
  return tw__slot_index(level + 1, tw__ring_pos(next, level + 1));
}

/* ---- Bitmaps ---- */

_Static_assert(TW_SLOT_COUNT % 64 == 0 && TW_BITMAP_WORDS <= 64,
               "whole bitmap words, one bit each in occupied_words");

static void set_occupied(tw_wheel *w, size_t index) {
  w->head.slots[index].occupied = 1;
  w->occupied[index / 64] |= tw__slot_bit(index);
  w->occupied_words |= (uint64_t)1 << (index / 64);
}

TW_NOINLINE void tw__clear_occupied(tw_wheel *w, size_t index) {
  w->head.slots[index].occupied = 0;
  w->head.slots[index].dirty = 0;
  if (!(w->occupied[index / 64] &= ~tw__slot_bit(index)))
    w->occupied_words &= ~((uint64_t)1 << (index / 64));
}

int tw__first_occupied(const tw_wheel *w, unsigned level, unsigned after) {
  const uint64_t *occupied = &w->occupied[level * TW_WORDS];
  unsigned words = tw__occupied_words_of(w, level);
  unsigned from = (after + 1) % (level == TW_TOP ? TW_SLOTS : TW_LEVEL_SLOTS);
  unsigned word = from / 64;
  uint64_t bits = occupied[word] & (~(uint64_t)0 << (from % 64));
  unsigned later;
  int found;

  if (bits)
    return (int)(word * 64 + tw__lowest_bit(bits));
  /* The next non-empty word after this one, else the first (cyclically:
   * the bits before `from` in this word are then the only ones left). */
  later = words & ~((2u << word) - 1);
  if (!later)
    later = words;
  if (!later)
    return -1;
  word = tw__lowest_bit(later);
  found = (int)(word * 64 + tw__lowest_bit(occupied[word]));
  return found == (int)after ? -1 : found;
}

/* ---- Lifetime ---- */

tw_wheel *tw_wheel_new(uint64_t now) {
  tw_wheel *w = aligned_alloc(TW_WHEEL_ALIGN, tw_wheel_size());
  if (!w)
    return NULL;
  memset(w, 0, tw_wheel_size());
  w->head.now = w->head.pos = now;
  for (unsigned level = 0; level < TW_LEVELS; level++)
    w->head.level_end[level] = tw__level_end(now, level);
  for (size_t i = 0; i < TW_SLOT_COUNT; i++)
    tw__list_init(&w->head.slots[i].timers);
  tw__list_init(&w->due);
  tw__list_init(&w->firing);
  tw__list_init(&w->collect_back);
  tw__sort_init(&w->sorting);
  w->collecting = TW_SLOT_COUNT;
  w->horizon = TW_NEVER;
  for (unsigned level = 0; level < TW_TOP; level++)
    w->pace[level].block = TW_NEVER; /* no source paced yet */
  return w;
}

static void release_all(tw_link *head) {
  while (!tw__list_empty(head)) {
    tw_timer *t = tw__list_first(head);
    tw__list_unlink(&t->tw__link);
    tw__set_place(t, TW_IDLE);
  }
}

void tw_wheel_free(tw_wheel *w) {
  if (!w || w->free_pending)
    return;
  for (size_t i = 0; i < TW_SLOT_COUNT; i++) {
    release_all(&w->head.slots[i].timers);
    w->head.slots[i].count = 0;
    w->head.slots[i].occupied = w->head.slots[i].dirty = 0;
  }
  release_all(&w->due);
  release_all(&w->firing);
  release_all(&w->collect_back);
  release_all(&w->sorting.input);
  release_all(&w->sorting.run);
  release_all(&w->sorting.merged);
  for (unsigned k = 0; k < TW_SORT_LEVELS; k++)
    release_all(&w->sorting.pending[k]);
  tw__sort_init(&w->sorting);
  w->collecting = TW_SLOT_COUNT;
  w->head.count = 0;
  for (unsigned k = 0; k < TW_BITMAP_WORDS; k++)
    w->occupied[k] = 0;
  w->occupied_words = 0;
  if (w->advancing) {
    /* tw_advance frees it when the callback returns. Until then no
     * deadline is after now, so that every start takes the slow path,
     * which refuses it: the fast paths need not test free_pending. */
    w->free_pending = 1;
    w->head.now = TW_NEVER;
  } else {
    free(w);
  }
}

/* aligned_alloc wants a multiple of the alignment. */
size_t tw_wheel_size(void) {
  return (sizeof(tw_wheel) + TW_WHEEL_ALIGN - 1) / TW_WHEEL_ALIGN *
         TW_WHEEL_ALIGN;
}

uint64_t tw_now(const tw_wheel *w) {
  return w ? w->head.now : 0;
}

size_t tw_count(const tw_wheel *w) {
  return w ? w->head.count : 0;
}

uint64_t tw_moves(const tw_wheel *w) {
  return w ? w->moves : 0;
}

/* ---- Moving timers ---- */

/*
 * Slot `index`, its occupied bit clear, just received a timer with
 * `deadline`. Apart from the hot path. Only here can the bounds on the
 * whole wheel move: they hold already for a slot whose bit is set (wheel.h),
 * even one a stop emptied, so a timer filed there changes neither `horizon`
 * nor `pace_next`.
 */
static TW_NOINLINE void now_occupied(tw_wheel *w, size_t index,
                                     uint64_t deadline) {
  unsigned level = tw__level_of_index(index);
  unsigned shift = tw__shift(level);
  uint64_t start = deadline >> shift << shift;

  set_occupied(w, index);
  if (start < w->horizon)
    w->horizon = start;
  /* A slot above level 0 is the source of the level below while pos is in
   * the block before it (wheel.h): its pace may owe moves from then on. */
  if (level > 0 && start - ((uint64_t)1 << shift) < w->pace_next)
    w->pace_next = start - ((uint64_t)1 << shift);
}

/*
 * Files a detached timer with deadline > pos in the slot the rule names
 * (tw__filing_slot, twheel.h) and sets its order to `order` (its sequence
 * and option bits) with its place. The one timer that sets a slot's
 * minimum is marked as its holder (TW_MAY_HOLD_MIN); others with the same
 * deadline may move later without making it inexact.
 */
static inline void file_in(tw_wheel *w, tw_timer *t, uint64_t order,
                           int at_head) {
  uint64_t deadline = t->tw__deadline;
  size_t index = tw__filing_slot(&w->head, deadline);
  struct tw__slot *slot = tw__slot_at(&w->head, index);

  uint32_t count = slot->count;
  int ready = tw__slot_is_ready(slot, count);
  tw__slot_join(slot, count, index, t, deadline, order, at_head);
  if (!ready) /* last: a tail call, with nothing live across it */
    now_occupied(w, index, deadline);
}

void tw__file(tw_wheel *w, tw_timer *t) {
  file_in(w, t, t->tw__order & ~(uint64_t)TW_PLACE_MASK, 0);
}

/*
 * Takes timers from both ends of the slot's list in turn: each end is a
 * chain of dependent cache misses, and walking two at once lets the CPU
 * wait for both together. Those from the tail go to the head of their new
 * slot, those from the head to its tail, so that each new slot receives
 * two runs in the old one's order (which a collection that finds them out
 * of order merges in one pass).
 */
size_t tw__drain(tw_wheel *w, size_t index, size_t limit) {
  tw_link *head = &w->head.slots[index].timers;
  size_t moved = 0;

  while (moved < limit && !tw__list_empty(head)) {
    int from_tail = moved % 2 == 0;
    tw_timer *t = from_tail ? tw__list_last(head) : tw__list_first(head);
    tw__leave_slot(w, t, index);
    file_in(w, t, t->tw__order & ~(uint64_t)TW_PLACE_MASK, from_tail);
    moved++;
  }
  w->moves += moved;
  return moved;
}

void tw__rescan(tw_wheel *w, size_t index) {
  tw_link *head = &w->head.slots[index].timers;
  tw_link *node = head->next;

  /* Detach the chain at once; its last node still points at the head. */
  tw__list_init(head);
  w->head.slots[index].count = 0;
  tw__clear_occupied(w, index);
  while (node != head) {
    tw_link *next = node->next;
    tw__file(w, TW_TIMER_OF(node));
    w->moves++;
    node = next;
  }
}

void tw__append_due(tw_wheel *w, tw_timer *t) {
  if (!tw__list_empty(&w->due) && tw__fires_before(t, tw__list_last(&w->due)))
    w->due_unsorted = 1; /* a start_at in the past: sorted when read */
  tw__list_append(&w->due, &t->tw__link);
  tw__set_place(t, TW_DUE);
}

/*
 * Whether `t`, waiting in slot `index`, can take `deadline` (after now) where
 * it is. A later one (or the same) always: the timer is then stale if its slot
 * is too early, and moves when the slot is drained or collected. An earlier
 * one while it is no earlier than the slot's start: the slot is then the
 * one the filing rule names for it or a source (wheel.h), or it is still
 * stale. An idle timeout re-armed with a shorter timeout or less jitter
 * mostly is: its slot was chosen by a deadline that resets have moved on.
 */
static int stays_in_slot(const tw_wheel *w, const tw_timer *t, size_t index,
                         uint64_t deadline) {
  return deadline >= t->tw__deadline ||
         deadline >= tw__index_start(w->head.pos, index);
}

/*
 * A start of `t`, whose state (tw__state) the caller has read. The
 * idle-timeout reset, a timer in a slot re-armed for a deadline still in
 * the future that its slot can hold (stays_in_slot), is a store: only the
 * slot's minimum may change. The inline path in twheel.h does those of a
 * timer not marked TW_MAY_HOLD_MIN that leave the minimum as it is: the
 * same or a later deadline, or an earlier one after the minimum (which is
 * no earlier than the slot's start, so stays_in_slot holds).
 */
static inline void arm(tw_wheel *w, tw_timer *t, uint64_t deadline,
                       unsigned state) {
  uint64_t order =
      w->head.next_seq++ << TW_SEQ_SHIFT | (t->tw__order & TW_FIXED_RATE);

  size_t index = tw__slot_of(t); /* for a timer in a slot */

  if (state == TW_SLOT && deadline > w->head.now &&
      stays_in_slot(w, t, index, deadline)) {
    uint64_t was = t->tw__deadline;
    t->tw__deadline = deadline;
    t->tw__order = order | (t->tw__order & TW_PLACE_MASK);
    if (deadline < was)
      t->tw__order |= tw__slot_lower_min(&w->head.slots[index], deadline);
    else if (deadline != was && (t->tw__order & TW_MAY_HOLD_MIN) &&
             was == w->head.slots[index].min)
      w->head.slots[index].dirty = 1; /* only the holder can take it away */
    return;
  }
  if (state == TW_IDLE)
    w->head.count++;
  else
    tw__detach(w, t);
  t->tw__deadline = deadline;
  if (deadline > w->head.now) {
    file_in(w, t, order, 0);
  } else {
    t->tw__order = order | TW_IDLE;
    tw__append_due(w, t);
  }
}

void tw__arm(tw_wheel *w, tw_timer *t, uint64_t deadline) {
  arm(w, t, deadline, tw__state(t));
}

/* ---- The per-timer API ---- */

static int usable(const tw_wheel *w, const tw_timer *t) {
  return w && t && !w->free_pending && tw__is_valid(t);
}

void tw_timer_init(tw_timer *t) {
  if (!t)
    return;
  t->tw__link.next = t->tw__link.prev = NULL;
  t->tw__cb = NULL;
  t->tw__deadline = TW_NEVER;
  t->tw__repeat = 0;
  t->tw__order = TW_IDLE;
}

/* Every start but the common one below: checks, re-arms, the past. */
static TW_NOINLINE int start_any(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                 uint64_t deadline, uint64_t repeat) {
  if (!usable(w, t) || !cb)
    return -EINVAL;
  if (deadline > TW_MAX_DEADLINE)
    deadline = TW_MAX_DEADLINE;
  tw__set_callback(t, cb, repeat);
  arm(w, t, deadline, tw__state(t));
  return 0;
}

/*
 * The common start, an inactive timer armed for the future, is filed here
 * with no other branch on the way; everything else goes to start_any. The
 * header's inline start has tested the pointers and done what it could in
 * place (a re-arm later, or a start into a slot in use): a caller of it
 * comes here for a slot that is not occupied yet, whose filing moves the
 * wheel's bounds (now_occupied), or for the rare cases. A wheel freed from
 * a callback has now = TW_NEVER (tw_wheel_free), so no start is for its
 * future.
 */
int tw__timer_start_nonnull(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                            uint64_t deadline, uint64_t repeat) {
  if ((t->tw__order & TW_STATE_MASK) == TW_IDLE && deadline > w->head.now &&
      deadline <= TW_MAX_DEADLINE) {
    tw__set_callback(t, cb, repeat);
    arm(w, t, deadline, TW_IDLE); /* for the future: straight to file_in */
    return 0;
  }
  return start_any(w, t, cb, deadline, repeat);
}

int tw__timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                       uint64_t deadline, uint64_t repeat) {
  if (!w || !t || !cb)
    return -EINVAL;
  return tw__timer_start_nonnull(w, t, cb, deadline, repeat);
}

int tw_timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                      uint64_t deadline, uint64_t repeat) {
  return tw__timer_start_at(w, t, cb, deadline, repeat);
}

int tw_timer_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb, uint64_t timeout,
                   uint64_t repeat) {
  if (!w)
    return -EINVAL;
  return tw__timer_start_at(w, t, cb, tw__saturating_add(w->head.now, timeout),
                            repeat);
}

/* Every stop but that of a timer waiting in a slot. */
static TW_NOINLINE int stop_any(tw_wheel *w, tw_timer *t) {
  if (!usable(w, t))
    return -EINVAL;
  if (tw__state(t) != TW_IDLE)
    tw__disarm(w, t);
  return 0;
}

/*
 * A timer waiting in a slot leaves it. When that empties the slot, its
 * occupied bit stays set (wheel.h): a request timeout stopped and the next
 * one started in the same slot cost no bitmap work, and finding the slot's
 * bounds already in place, the next timer filed there only sets its
 * minimum (tw__slot_join). The inline stop (twheel.h) is the same.
 */
int tw__timer_stop(tw_wheel *w, tw_timer *t) {
  if (w && t && tw__stop_in_slot(&w->head, t))
    return 0;
  return stop_any(w, t);
}

int tw_timer_stop(tw_wheel *w, tw_timer *t) {
  return tw__timer_stop(w, t);
}

int tw_timer_again(tw_wheel *w, tw_timer *t) {
  if (!usable(w, t) || !t->tw__cb)
    return -EINVAL;
  if (t->tw__repeat)
    arm(w, t, tw__saturating_add(w->head.now, t->tw__repeat), tw__state(t));
  return 0;
}

void tw_timer_set_fixed_rate(tw_timer *t, int fixed_rate) {
  if (!t || !tw__is_valid(t))
    return;
  if (fixed_rate)
    t->tw__order |= TW_FIXED_RATE;
  else
    t->tw__order &= ~(uint64_t)TW_FIXED_RATE;
}

int tw_timer_is_fixed_rate(const tw_timer *t) {
  return t && tw__is_valid(t) && (t->tw__order & TW_FIXED_RATE) != 0;
}

void tw_timer_set_repeat(tw_timer *t, uint64_t repeat) {
  if (t && tw__is_valid(t))
    t->tw__repeat = repeat;
}

uint64_t tw_timer_get_repeat(const tw_timer *t) {
  return t && tw__is_valid(t) ? t->tw__repeat : 0;
}

int tw_timer_is_active(const tw_timer *t) {
  return t && tw__is_valid(t) && tw__state(t) != TW_IDLE;
}

uint64_t tw_timer_deadline(const tw_timer *t) {
  return tw_timer_is_active(t) ? t->tw__deadline : TW_NEVER;
}

const char *tw_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
  case -EINVAL:
    return "invalid argument";
  default:
    return "unknown error";
  }
}
