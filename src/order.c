/*
 * Firing order, (deadline, start sequence): sorting a list of timers and
 * merging two sorted ones, for the due list and for collected batches that
 * came out of order (a stale timer re-filed behind newer ones).
 */
#include "wheel.h"

#include <stddef.h>

/*
 * Each timer of `from`, in order, is placed by a search from both ends of
 * `into` at once, a step from each in turn, which stops at the first end
 * that finds its place: O(the fewer of the timers of `into` before and
 * after it). `into` is the firing list, where a start with a past deadline
 * mostly belongs at one end: before timers a budget left for a later
 * deadline, or after those it ties with (its start is the latest). A walk
 * from one end only passed every timer a budget left whenever the place
 * was at the other end (a backlog of a million timers worked off 64 at a
 * time with such a start before each advance took 12 s at one end, 15 s at
 * the other). The middle is no cheaper, and is reached when the list
 * holds other deadlines on both sides (contract, rule 10). The
 * forward end only moves on: the next timer's place is no earlier.
 */
void tw__merge_sorted(tw_link *into, tw_link *from) {
  tw_link *fwd = into->next; /* every timer before it fires before t */
  while (!tw__list_empty(from)) {
    tw_timer *t = tw__list_first(from);
    tw_link *back = into->prev, *at; /* every timer after back fires after t */
    for (;; fwd = fwd->next, back = back->prev) {
      if (fwd == into || !tw__fires_before(TW_TIMER_OF(fwd), t)) {
        at = fwd;
        break;
      }
      if (!tw__fires_before(t, TW_TIMER_OF(back))) {
        at = back->next;
        break;
      }
    }
    tw__list_unlink(&t->tw__link);
    tw__list_insert_before(at, &t->tw__link);
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
 * A list that is two sorted runs, the second wholly before the first, is
 * what a drain from both ends leaves in a slot (wheel.c, tw__drain): put
 * the second run first with one walk and four links. Returns 0, having
 * changed nothing, for any other list.
 */
static int rotate_two_runs(tw_link *head) {
  tw_link *first = head->next, *end_of_first = first, *second, *last;

  while (end_of_first->next != head &&
         !tw__fires_before(TW_TIMER_OF(end_of_first->next),
                           TW_TIMER_OF(end_of_first)))
    end_of_first = end_of_first->next;
  second = end_of_first->next;
  if (second == head)
    return 1; /* sorted already */
  for (last = second; last->next != head; last = last->next)
    if (tw__fires_before(TW_TIMER_OF(last->next), TW_TIMER_OF(last)))
      return 0; /* a third run */
  if (!tw__fires_before(TW_TIMER_OF(last), TW_TIMER_OF(first)))
    return 0; /* the runs interleave: merge them */
  head->next = second;
  second->prev = head;
  last->next = first;
  first->prev = last;
  end_of_first->next = head;
  head->prev = end_of_first;
  return 1;
}

/*
 * Natural merge sort: cut the list into its sorted runs and merge them like a
 * binary counter (pending[k] holds 2^k runs), so a list that is sorted but for
 * a few timers costs little more than one pass.
 */
void tw__list_sort(tw_link *head) {
  tw_link *pending[64]; /* pending[k] holds 2^k runs merged, or NULL */
  tw_link *node, *sorted = NULL;
  unsigned k, used = 0; /* pending[0..used) are set */

  if (rotate_two_runs(head))
    return;
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
    for (k = 0; k < used && pending[k]; k++) {
      run = merge(pending[k], run);
      pending[k] = NULL;
    }
    pending[k] = run;
    if (k == used)
      used++;
  }
  for (k = 0; k < used; k++)
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

/* ---- Sorting in slices ---- */

void tw__sort_init(struct tw_sorting *s) {
  s->phase = TW_SORT_IDLE;
  s->level = 0;
  s->pending_levels = 0;
  tw__list_init(&s->input);
  tw__list_init(&s->run);
  tw__list_init(&s->merged);
  for (unsigned k = 0; k < TW_SORT_LEVELS; k++)
    tw__list_init(&s->pending[k]);
}

void tw__sort_begin(struct tw_sorting *s, tw_link *from) {
  tw__list_splice(&s->input, from);
  s->phase = TW_SORT_CUTTING;
}

/* Moves the first timer of `from` to the tail of `to`. */
static void move_first(tw_link *from, tw_link *to) {
  tw_link *node = from->next;
  tw__list_unlink(node);
  tw__list_append(to, node);
}

/*
 * The binary counter of tw__list_sort, as a state machine that can stop
 * after any unit and resume, with no cursor into a list (a stop may take
 * any timer out between budgets): a cut run carries up from level 0,
 * merging with each pending[level] it meets until it finds an empty one;
 * once the input is used up, the last run carries through every level
 * holding one and is the result. A merge moves the earlier head of its two
 * lists a unit at a time, while they interleave: once one lies wholly
 * before the other, or is empty, the rest follows in O(1), so that the two
 * runs a drain leaves, the second before the first but for a few timers,
 * cost little more than their cut (rotate_two_runs' case).
 */
int tw__sort_slices(struct tw_sorting *s, tw_link *out, size_t *work) {
  for (;;) {
    switch (s->phase) {
    case TW_SORT_IDLE:
      return 1;
    case TW_SORT_CUTTING:
      if (!tw__list_empty(&s->input) &&
          (tw__list_empty(&s->run) ||
           !tw__fires_before(tw__list_first(&s->input),
                             tw__list_last(&s->run)))) {
        if (*work == 0)
          return 0;
        (*work)--;
        move_first(&s->input, &s->run);
        break;
      }
      s->phase = TW_SORT_CARRYING;
      s->level = 0;
      break;
    case TW_SORT_CARRYING:
      /* While input is left, level stays below 64 (2^64 runs do not fit
       * in memory); the last run may reach it, past the last merge. */
      if (tw__list_empty(&s->input) &&
          (s->level == TW_SORT_LEVELS || !(s->pending_levels >> s->level))) {
        tw__list_splice(out, &s->run); /* the last run, every level merged */
        s->phase = TW_SORT_IDLE;
        s->pending_levels = 0;
        return 1;
      }
      if (!tw__list_empty(&s->pending[s->level])) {
        s->phase = TW_SORT_MERGING;
      } else if (tw__list_empty(&s->input)) {
        s->level++; /* the last run: on to the next level holding one */
      } else {
        tw__list_splice(&s->pending[s->level], &s->run);
        s->pending_levels |= (uint64_t)1 << s->level;
        s->phase = TW_SORT_CUTTING;
      }
      break;
    case TW_SORT_MERGING: {
      tw_link *earlier = &s->pending[s->level], *later = &s->run;
      if (!tw__list_empty(earlier) && !tw__list_empty(later)) {
        if (tw__fires_before(tw__list_last(later), tw__list_first(earlier))) {
          tw__list_splice(&s->merged, later); /* wholly first */
        } else if (tw__fires_before(tw__list_last(earlier),
                                    tw__list_first(later))) {
          tw__list_splice(&s->merged, earlier); /* wholly first */
        } else { /* they interleave: the earlier head, a unit */
          if (*work == 0)
            return 0;
          (*work)--;
          move_first(
              tw__fires_before(tw__list_first(later), tw__list_first(earlier))
                  ? later
                  : earlier,
              &s->merged);
        }
        break;
      }
      /* One is empty: the other follows whole. */
      tw__list_splice(&s->merged, earlier);
      tw__list_splice(&s->merged, later);
      tw__list_splice(&s->run, &s->merged);
      s->pending_levels &= ~((uint64_t)1 << s->level);
      s->level++;
      s->phase = TW_SORT_CARRYING;
      break;
    }
    }
  }
}
