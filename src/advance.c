/*
 * Time moving on: tw_next_expiry, and tw_advance, which moves the wheel from
 * one earliest deadline to the next and runs each deadline's callbacks as
 * soon as it has collected them.
 */
#include "wheel.h"

#include <stdlib.h>

void tw__sort_due(tw_wheel *w) {
  if (w->due_unsorted && !tw__list_empty(&w->due))
    tw__list_sort(&w->due);
  w->due_unsorted = 0;
}

void tw__merge_sorted(tw_link *into, tw_link *from) {
  tw_link *after = into->prev; /* the largest first: `after` only goes back */
  while (!tw__list_empty(from)) {
    tw_timer *t = tw__list_last(from);
    while (after != into && tw__fires_before(t, TW_TIMER_OF(after)))
      after = after->prev;
    tw__list_unlink(&t->tw__link);
    tw__list_insert_before(after->next, &t->tw__link);
  }
}

/* Merges two NULL-terminated sorted chains linked by `next`. */
static tw_link *merge(tw_link *earlier, tw_link *later) {
  tw_link result, *tail = &result;
  while (earlier && later) {
    if (tw__fires_before(TW_TIMER_OF(later), TW_TIMER_OF(earlier))) {
      tail->next = later;
      later = later->next;
    } else {
      tail->next = earlier;
      earlier = earlier->next;
    }
    tail = tail->next;
  }
  tail->next = earlier ? earlier : later;
  return result.next;
}

/*
 * Natural merge sort: cut the list into its sorted runs and merge them like a
 * binary counter (pending[k] holds 2^k runs), so a list that is sorted but for
 * a few timers costs little more than one pass.
 */
void tw__list_sort(tw_link *head) {
  tw_link *pending[64] = {NULL};
  tw_link *node, *sorted = NULL;
  unsigned k;

  head->prev->next = NULL;
  node = head->next;
  while (node) {
    tw_link *run = node;
    while (node->next &&
           !tw__fires_before(TW_TIMER_OF(node->next), TW_TIMER_OF(node)))
      node = node->next;
    tw_link *rest = node->next;
    node->next = NULL;
    node = rest;
    for (k = 0; pending[k]; k++) {
      run = merge(pending[k], run);
      pending[k] = NULL;
    }
    pending[k] = run;
  }
  for (k = 0; k < 64; k++)
    if (pending[k])
      sorted = merge(pending[k], sorted);

  tw_link *prev = head;
  for (node = sorted; node; node = node->next) {
    node->prev = prev;
    prev->next = node;
    prev = node;
  }
  prev->next = head;
  head->prev = prev;
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
    if (!(w->dirty[level] & ((uint64_t)1 << s)) ||
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
  tw__sort_due(w);
  earliest = first_deadline(&w->due);
  if (first_deadline(&w->firing) < earliest) /* a budget's leftovers */
    earliest = first_deadline(&w->firing);
  in_wheel = earliest_slot_min(w);
  return in_wheel < earliest ? in_wheel : earliest;
}

/*
 * Moves pos to the earliest deadline if it is <= now and puts the timers due
 * then on w->firing, by start order; returns 0 when nothing more is due, with
 * pos at now. Time jumps from one slot's minimum to the next, so empty
 * stretches cost nothing; at each stop only the slot holding that minimum
 * comes due (lower levels are empty, all other slots lie later). A stale
 * minimum (see wheel.h) makes a stop where the slot moves down and nothing
 * is collected.
 */
static int collect_next(tw_wheel *w) {
  unsigned level, s;
  tw_link batch;

  while (tw__earliest_slot(w, &level, &s)) {
    uint64_t earliest = w->slot_min[tw__slot_index(level, s)];
    if (earliest > w->now) {
      uint64_t start = tw__slot_start(w->pos, level, s);
      w->pos = w->now;
      if (start <= w->now) /* now lies inside the slot: it comes due */
        tw__refile_slot(w, level, s, &w->firing); /* collects nothing */
      return 0;
    }
    w->pos = earliest;
    tw__list_init(&batch);
    int in_order = tw__refile_slot(w, level, s, &batch);
    if (tw__list_empty(&batch))
      continue;
    if (!in_order)
      tw__list_sort(&batch); /* a stale timer re-filed behind newer ones */
    tw__list_splice(&w->firing, &batch);
    return 1;
  }
  w->pos = w->now;
  return 0;
}

/*
 * Each batch fires as soon as it is collected, while its timers are still in
 * the cache. Rule 5 holds because a callback's start files its timer against
 * now: a deadline <= now waits in w->due, a later one is never collected by
 * this advance, which stops at now.
 */
static size_t run_callbacks(tw_wheel *w, size_t max_fire) {
  size_t ran = 0;
  while (ran < max_fire && !w->free_pending) {
    if (tw__list_empty(&w->firing) && !collect_next(w))
      break;
    tw_timer *t = tw__list_first(&w->firing);
    tw__disarm(w, t);
    if (t->tw__repeat)
      tw__arm(w, t, tw__saturating_add(w->now, t->tw__repeat));
    ran++;
    t->tw__cb(t); /* t may be freed from here on unless still active */
  }
  return ran;
}

size_t tw_advance(tw_wheel *w, uint64_t now, size_t max_fire) {
  size_t ran;

  if (!w || w->advancing)
    return 0;
  if (now > w->now)
    w->now = now;
  /* Everything in both lists is due by the old now, before any slot. */
  tw__sort_due(w);
  tw__merge_sorted(&w->firing, &w->due);

  w->advancing = 1;
  ran = run_callbacks(w, max_fire);
  w->advancing = 0;
  if (w->free_pending) {
    free(w);
    return ran;
  }
  /* Out of budget: what is due waits in w->firing, in order, for the next
   * advance, and pos reaches now (which the slots' invariant needs). */
  while (collect_next(w))
    ;
  return ran;
}
