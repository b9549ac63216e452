/*
 * Where timers wait: the wheel's lifetime, filing a timer in its slot, and
 * the per-timer API (start, stop, again...), kept in one file so that the
 * hot paths (the idle reset, start and stop) compile to straight-line code.
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

/* The level a deadline after pos is filed at: its highest digit that
 * differs from pos's. */
static unsigned level_of(uint64_t pos, uint64_t deadline) {
  return highest_bit(pos ^ deadline) / TW_LEVEL_BITS;
}

/* Where a deadline after pos is filed. */
struct slot_ref {
  unsigned level, s;
};

static struct slot_ref slot_for(uint64_t pos, uint64_t deadline) {
  struct slot_ref ref;
  ref.level = level_of(pos, deadline);
  ref.s = digit(deadline, ref.level);
  return ref;
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
static inline int rearm_in_place(tw_wheel *w, tw_timer *t, uint64_t deadline,
                                 uint64_t order) {
  uint64_t old = t->tw__deadline;
  unsigned state = tw__state(t);

  if (deadline <= w->now) /* due: it waits in w->due for the next advance */
    return 0;
  if (state == TW_SLOTTED) {
    struct slot_ref ref = slot_for(w->pos, old);
    uint64_t *min = &w->slot_min[tw__slot_index(ref.level, ref.s)];
    /* The same slot: the digits from ref.level up are old's. */
    if (((old ^ deadline) >> (ref.level * TW_LEVEL_BITS)) == 0) {
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

static inline void arm(tw_wheel *w, tw_timer *t, uint64_t deadline) {
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
    tw__append_due(w, t);
}

void tw__arm(tw_wheel *w, tw_timer *t, uint64_t deadline) {
  arm(w, t, deadline);
}

static inline void disarm(tw_wheel *w, tw_timer *t) {
  detach(w, t);
  tw__set_state(t, TW_IDLE);
  w->count--;
}

void tw__disarm(tw_wheel *w, tw_timer *t) {
  disarm(w, t);
}

void tw__append_due(tw_wheel *w, tw_timer *t) {
  if (!tw__list_empty(&w->due) && tw__fires_before(t, tw__list_last(&w->due)))
    w->due_unsorted = 1; /* a start_at in the past: sorted when read */
  tw__list_append(&w->due, &t->tw__link);
  tw__set_state(t, TW_DUE);
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
      tw__set_state(t, TW_DUE);
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

int tw_timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                      uint64_t deadline, uint64_t repeat) {
  if (!usable(w, t) || !cb)
    return -EINVAL;
  if (deadline > TW_MAX_DEADLINE)
    deadline = TW_MAX_DEADLINE;
  t->tw__cb = cb;
  t->tw__repeat = repeat;
  arm(w, t, deadline);
  return 0;
}

int tw_timer_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb, uint64_t timeout,
                   uint64_t repeat) {
  if (!w)
    return -EINVAL;
  return tw_timer_start_at(w, t, cb, tw__saturating_add(w->now, timeout),
                           repeat);
}

int tw_timer_stop(tw_wheel *w, tw_timer *t) {
  if (!usable(w, t))
    return -EINVAL;
  if (tw__state(t) != TW_IDLE)
    disarm(w, t);
  return 0;
}

int tw_timer_again(tw_wheel *w, tw_timer *t) {
  if (!usable(w, t) || !t->tw__cb)
    return -EINVAL;
  if (t->tw__repeat)
    arm(w, t, tw__saturating_add(w->now, t->tw__repeat));
  return 0;
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
