/*
 * The wheel: its lifetime, where a timer is filed, and the earliest expiry.
 * Read wheel.h first: it states the invariant everything here keeps.
 */
#include "wheel.h"

#include <errno.h>
#include <stdlib.h>

static unsigned highest_bit(uint64_t x) { /* x != 0 */
#if defined(__GNUC__)
  return 63u - (unsigned)__builtin_clzll(x);
#else
  unsigned bit = 0;
  while (x >>= 1)
    bit++;
  return bit;
#endif
}

static unsigned lowest_bit(uint64_t x) { /* x != 0 */
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

static uint64_t slot_bit(unsigned s) { return (uint64_t)1 << s; }

static unsigned digit(uint64_t time, unsigned level) {
  return (unsigned)(time >> (level * TW_LEVEL_BITS)) & (TW_SLOTS - 1);
}

/* The level of the highest digit where deadline and now differ. */
static unsigned level_for(uint64_t now, uint64_t deadline) { /* deadline > now */
  return highest_bit(now ^ deadline) / TW_LEVEL_BITS;
}

uint64_t tw__slot_start(uint64_t now, unsigned level, unsigned s) {
  unsigned shift = level * TW_LEVEL_BITS;
  unsigned above = shift + TW_LEVEL_BITS; /* first bit of the next level */
  uint64_t higher = above >= 64 ? 0 : now & ~(((uint64_t)1 << above) - 1);
  return higher | ((uint64_t)s << shift);
}

tw_wheel *tw_wheel_new(uint64_t now) {
  tw_wheel *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->now = now;
  for (size_t i = 0; i < TW_SLOT_COUNT; i++)
    tw__list_init(&w->slots[i]);
  tw__list_init(&w->due);
  tw__list_init(&w->firing);
  return w;
}

static void release_all(tw_link *head) {
  while (!tw__list_empty(head)) {
    tw_timer *t = tw__list_first(head);
    tw__list_unlink(&t->tw__link);
    tw__set_state(t, TW_IDLE);
  }
}

void tw_wheel_free(tw_wheel *w) {
  if (!w || w->free_pending)
    return;
  for (size_t i = 0; i < TW_SLOT_COUNT; i++)
    release_all(&w->slots[i]);
  release_all(&w->due);
  release_all(&w->firing);
  w->count = 0;
  for (unsigned level = 0; level < TW_LEVELS; level++)
    w->occupied[level] = w->dirty[level] = 0;
  if (w->advancing)
    w->free_pending = 1; /* tw_advance frees it when the callback returns */
  else
    free(w);
}

uint64_t tw_now(const tw_wheel *w) { return w ? w->now : 0; }

size_t tw_count(const tw_wheel *w) { return w ? w->count : 0; }

/* Files a detached timer with deadline > now into its slot. */
static void file_in_slot(tw_wheel *w, tw_timer *t) {
  uint64_t deadline = t->tw__deadline;
  unsigned level = level_for(w->now, deadline);
  unsigned s = digit(deadline, level);
  uint64_t *min = &w->slot_min[level][s];

  tw__list_append(&w->slots[level * TW_SLOTS + s], &t->tw__link);
  if (!(w->occupied[level] & slot_bit(s))) {
    w->occupied[level] |= slot_bit(s);
    *min = deadline;
  } else if (deadline < *min) {
    *min = deadline;
  }
  tw__set_state(t, TW_SLOTTED);
}

/* Files a detached timer where its deadline says: a slot, or the due list. */
static void file(tw_wheel *w, tw_timer *t) {
  if (t->tw__deadline > w->now)
    file_in_slot(w, t);
  else
    tw__due_insert(w, t);
}

/*
 * The earliest timer of a slot is leaving it (stopped, or moved later):
 * slot_min may now be below every deadline left. The slot is computed from
 * the deadline, so for a stale timer this marks an innocent slot, which
 * costs one needless re-file and is never wrong.
 */
static void note_leaving_slot(tw_wheel *w, uint64_t deadline) {
  unsigned level = level_for(w->now, deadline);
  unsigned s = digit(deadline, level);
  if (w->slot_min[level][s] == deadline)
    w->dirty[level] |= slot_bit(s);
}

/* Unlinks an active timer, keeping the slot bitmaps true. */
static void detach(tw_wheel *w, tw_timer *t) {
  tw_link *emptied = tw__list_unlink(&t->tw__link);
  if (tw__state(t) != TW_SLOTTED)
    return;
  if (emptied) {
    size_t index = (size_t)(emptied - w->slots);
    unsigned level = (unsigned)(index / TW_SLOTS);
    uint64_t bit = slot_bit((unsigned)(index % TW_SLOTS));
    w->occupied[level] &= ~bit;
    w->dirty[level] &= ~bit;
  } else {
    note_leaving_slot(w, t->tw__deadline);
  }
}

void tw__arm(tw_wheel *w, tw_timer *t, uint64_t deadline) {
  uint64_t order = w->next_seq++ << 8;

  if (tw__state(t) == TW_SLOTTED && deadline >= t->tw__deadline) {
    /* The idle-timeout reset: later is a store, re-filed when due. */
    if (deadline > t->tw__deadline)
      note_leaving_slot(w, t->tw__deadline);
    t->tw__deadline = deadline;
    t->tw__order = order | TW_SLOTTED;
    return;
  }
  if (tw__state(t) == TW_IDLE)
    w->count++;
  else
    detach(w, t);
  t->tw__deadline = deadline;
  t->tw__order = order | TW_IDLE;
  file(w, t);
}

void tw__disarm(tw_wheel *w, tw_timer *t) {
  detach(w, t);
  tw__set_state(t, TW_IDLE);
  w->count--;
}

void tw__refile_slot(tw_wheel *w, unsigned level, unsigned s, tw_link *collected) {
  tw_link *head = &w->slots[level * TW_SLOTS + s];
  tw_link *node = head->next;

  tw__list_init(head);
  w->occupied[level] &= ~slot_bit(s);
  w->dirty[level] &= ~slot_bit(s);
  /* Walk the detached chain; the last node still points at the head. */
  while (node != head) {
    tw_link *next = node->next;
    tw_timer *t = TW_TIMER_OF(node);
    if (collected && t->tw__deadline <= w->now) {
      tw__list_append(collected, node);
      tw__set_state(t, TW_FIRING);
    } else
      file(w, t);
    node = next;
  }
}

int tw__earliest_slot(tw_wheel *w, unsigned *level, unsigned *s) {
  for (;;) {
    unsigned l = 0;
    while (l < TW_LEVELS && !w->occupied[l])
      l++;
    if (l == TW_LEVELS)
      return 0;
    unsigned first = lowest_bit(w->occupied[l]);
    if (!(w->dirty[l] & slot_bit(first))) {
      *level = l;
      *s = first;
      return 1;
    }
    tw__refile_slot(w, l, first, NULL); /* stale timers leave; min is exact */
  }
}

/* The earliest deadline among timers already due (all <= now). The firing
 * list is not empty only when asked from a callback. */
static uint64_t earliest_waiting(const tw_wheel *w) {
  uint64_t earliest = TW_NEVER;
  if (!tw__list_empty(&w->due))
    earliest = tw__list_first(&w->due)->tw__deadline;
  if (!tw__list_empty(&w->firing) &&
      tw__list_first(&w->firing)->tw__deadline < earliest)
    earliest = tw__list_first(&w->firing)->tw__deadline;
  return earliest;
}

uint64_t tw_next_expiry(tw_wheel *w) {
  unsigned level, s;
  if (!w || w->free_pending)
    return TW_NEVER;
  if (!tw__list_empty(&w->firing) || !tw__list_empty(&w->due))
    return earliest_waiting(w);
  if (!tw__earliest_slot(w, &level, &s))
    return TW_NEVER;
  return w->slot_min[level][s];
}

const char *tw_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
  case -EINVAL:
    return "invalid argument";
  case -ENOMEM:
    return "out of memory";
  default:
    return "unknown error";
  }
}
