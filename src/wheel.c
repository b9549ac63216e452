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

static uint64_t slot_bit(unsigned s) {
  return (uint64_t)1 << s;
}

static unsigned digit(uint64_t time, unsigned level) {
  return (unsigned)(time >> (level * TW_LEVEL_BITS)) & (TW_SLOTS - 1);
}

/* Where a deadline after pos is filed. */
struct slot_ref {
  unsigned level, s;
};

static struct slot_ref slot_for(uint64_t pos, uint64_t deadline) {
  struct slot_ref ref;
  ref.level = highest_bit(pos ^ deadline) / TW_LEVEL_BITS;
  ref.s = digit(deadline, ref.level);
  return ref;
}

static int same_slot(struct slot_ref a, struct slot_ref b) {
  return a.level == b.level && a.s == b.s;
}

uint64_t tw__slot_start(uint64_t pos, unsigned level, unsigned s) {
  unsigned shift = level * TW_LEVEL_BITS;
  unsigned above = shift + TW_LEVEL_BITS; /* first bit of the next level */
  uint64_t higher = above >= 64 ? 0 : pos & ~(((uint64_t)1 << above) - 1);
  return higher | ((uint64_t)s << shift);
}

tw_wheel *tw_wheel_new(uint64_t now) {
  tw_wheel *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->now = w->pos = now;
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

size_t tw_wheel_size(void) {
  return sizeof(tw_wheel);
}

uint64_t tw_now(const tw_wheel *w) {
  return w ? w->now : 0;
}

size_t tw_count(const tw_wheel *w) {
  return w ? w->count : 0;
}

/* Files a detached timer with deadline > pos into its slot. */
static void file_in_slot(tw_wheel *w, tw_timer *t) {
  uint64_t deadline = t->tw__deadline;
  struct slot_ref ref = slot_for(w->pos, deadline);
  uint64_t *min = &w->slot_min[tw__slot_index(ref.level, ref.s)];

  tw__list_append(&w->slots[tw__slot_index(ref.level, ref.s)], &t->tw__link);
  if (!(w->occupied[ref.level] & slot_bit(ref.s))) {
    w->occupied[ref.level] |= slot_bit(ref.s);
    *min = deadline;
  } else if (deadline < *min) {
    *min = deadline;
  }
  tw__set_state(t, TW_SLOTTED);
}

/* The timer holding a slot's minimum is leaving it (stopped, or moved
 * later): slot_min may now be below every deadline left. */
static void note_leaving(tw_wheel *w, struct slot_ref ref, uint64_t deadline) {
  if (w->slot_min[tw__slot_index(ref.level, ref.s)] == deadline)
    w->dirty[ref.level] |= slot_bit(ref.s);
}

/* Unlinks an active timer, keeping the slot bitmaps and bounds true. */
static void detach(tw_wheel *w, tw_timer *t) {
  tw_link *emptied = tw__list_unlink(&t->tw__link);
  unsigned state = tw__state(t);
  if (state != TW_SLOTTED && state != TW_STALE)
    return;
  if (emptied) {
    size_t index = (size_t)(emptied - w->slots);
    unsigned level = (unsigned)(index / TW_SLOTS);
    uint64_t bit = slot_bit((unsigned)(index % TW_SLOTS));
    w->occupied[level] &= ~bit;
    w->dirty[level] &= ~bit;
  } else if (state == TW_SLOTTED) { /* a stale timer never holds slot_min */
    note_leaving(w, slot_for(w->pos, t->tw__deadline), t->tw__deadline);
  }
}

/*
 * The idle-timeout reset: a slotted timer re-armed for a deadline that is
 * still in the future, in the same slot or later, is a store (a later slot
 * makes it stale: it moves when its slot comes due). Returns 0 when the
 * timer must move now instead.
 */
static int rearm_in_place(tw_wheel *w, tw_timer *t, uint64_t deadline,
                          uint64_t order) {
  uint64_t old = t->tw__deadline;
  unsigned state = tw__state(t);

  if (deadline <= w->now) /* due: it waits in w->due for the next advance */
    return 0;
  if (state == TW_SLOTTED) {
    struct slot_ref ref = slot_for(w->pos, old);
    uint64_t *min = &w->slot_min[tw__slot_index(ref.level, ref.s)];
    if (same_slot(ref, slot_for(w->pos, deadline))) {
      if (deadline < *min)
        *min = deadline;
      else if (deadline > old)
        note_leaving(w, ref, old);
    } else if (deadline > old) {
      note_leaving(w, ref, old);
      state = TW_STALE;
    } else {
      return 0;
    }
  } else if (state != TW_STALE || deadline < old) {
    return 0;
  }
  t->tw__deadline = deadline;
  t->tw__order = order | state;
  return 1;
}

void tw__arm(tw_wheel *w, tw_timer *t, uint64_t deadline) {
  uint64_t order = w->next_seq++ << 8;

  if (rearm_in_place(w, t, deadline, order))
    return;
  if (tw__state(t) == TW_IDLE)
    w->count++;
  else
    detach(w, t);
  t->tw__deadline = deadline;
  t->tw__order = order | TW_IDLE;
  if (deadline > w->now)
    file_in_slot(w, t);
  else
    tw__due_insert(w, t);
}

void tw__disarm(tw_wheel *w, tw_timer *t) {
  detach(w, t);
  tw__set_state(t, TW_IDLE);
  w->count--;
}

int tw__refile_slot(tw_wheel *w, unsigned level, unsigned s,
                    tw_link *collected) {
  tw_link *head = &w->slots[tw__slot_index(level, s)];
  tw_link *node = head->next;
  int in_order = 1;

  tw__list_init(head);
  w->occupied[level] &= ~slot_bit(s);
  w->dirty[level] &= ~slot_bit(s);
  /* Walk the detached chain; the last node still points at the head. */
  while (node != head) {
    tw_link *next = node->next;
    tw_timer *t = TW_TIMER_OF(node);
    if (t->tw__deadline > w->pos) {
      file_in_slot(w, t);
    } else {
      if (!tw__list_empty(collected) &&
          tw__fires_before(t, tw__list_last(collected)))
        in_order = 0;
      tw__list_append(collected, node);
      tw__set_state(t, TW_FIRING);
    }
    node = next;
  }
  return in_order;
}

int tw__earliest_slot(const tw_wheel *w, unsigned *level, unsigned *s) {
  for (unsigned l = 0; l < TW_LEVELS; l++) {
    if (w->occupied[l]) {
      *level = l;
      *s = lowest_bit(w->occupied[l]);
      return 1;
    }
  }
  return 0;
}

static uint64_t first_deadline(const tw_link *list) {
  return tw__list_empty(list) ? TW_NEVER : tw__list_first(list)->tw__deadline;
}

static int holds_at_most(const tw_link *head, size_t limit) {
  for (const tw_link *node = head->next; node != head; node = node->next)
    if (limit-- == 0)
      return 0;
  return 1;
}

/* The earliest slot's minimum, made exact first when that is cheap. */
static uint64_t earliest_slot_min(tw_wheel *w) {
  unsigned level, s;
  while (tw__earliest_slot(w, &level, &s)) {
    size_t index = tw__slot_index(level, s);
    if (!(w->dirty[level] & slot_bit(s)) ||
        !holds_at_most(&w->slots[index], TW_RESCAN_LIMIT))
      return w->slot_min[index];
    /* Stale timers leave and slot_min becomes exact. Nothing is collected:
     * every deadline in a slot is after pos. */
    tw__refile_slot(w, level, s, &w->firing);
  }
  return TW_NEVER;
}

uint64_t tw_next_expiry(tw_wheel *w) {
  uint64_t earliest, in_wheel;

  if (!w || w->free_pending)
    return TW_NEVER;
  earliest = first_deadline(&w->due);
  if (first_deadline(&w->firing) < earliest) /* asked from a callback */
    earliest = first_deadline(&w->firing);
  in_wheel = earliest_slot_min(w);
  return in_wheel < earliest ? in_wheel : earliest;
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
