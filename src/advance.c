/*
 * Time moving on: tw_next_expiry, and tw_advance, which moves pos from one
 * occupied slot to the next up to now: a level-0 slot is collected (its
 * timers due then join the firing list, in firing order, and run), a higher
 * one is drained into the levels below before pos reaches it. Every step
 * counts against the advance's work budget; what is left is taken up by the
 * next advance, from where this one stopped.
 */
#include "wheel.h"

#include <stdlib.h>
#include <string.h>

/* ---- Finding the next slot ---- */

struct next_slot {
  size_t index;
  unsigned level;
  uint64_t start;
};

/*
 * tw__first_occupied for the searches below, which skip the slots that a
 * stop left empty with their bit set (wheel.h), and clear those bits: each
 * such bit is cleared once, paid for by the stop that left it.
 */
static int first_live(tw_wheel *w, unsigned level, unsigned after) {
  for (;;) {
    int ring_pos = tw__first_occupied(w, level, after);
    size_t index;
    if (ring_pos < 0)
      return -1;
    index = tw__slot_index(level, (unsigned)ring_pos);
    if (w->head.slots[index].count)
      return ring_pos;
    tw__clear_occupied(w, index);
  }
}

/*
 * The occupied slot with the earliest start; of two with the same start,
 * the higher level's (it must be drained before the lower one is read).
 * Each level's first occupied slot after pos is its earliest; a level's
 * slots all start at or after the end of the lower level's block, so the
 * search stops at the first level whose winner starts before that.
 */
static int earliest_slot(tw_wheel *w, struct next_slot *out) {
  int found = 0;
  out->index = TW_SLOT_COUNT;
  out->level = 0;
  out->start = TW_NEVER;
  for (unsigned level = 0; level < TW_LEVELS; level++) {
    if (found && out->start < tw__block_start(w->head.pos, level - 1, 1))
      break;
    int ring_pos = first_live(w, level, tw__ring_pos(w->head.pos, level));
    if (ring_pos < 0)
      continue;
    uint64_t start = tw__slot_start(w->head.pos, level, (unsigned)ring_pos);
    if (!found || start <= out->start) {
      out->index = tw__slot_index(level, (unsigned)ring_pos);
      out->level = level;
      out->start = start;
      found = 1;
    }
  }
  return found;
}

/* ---- tw_next_expiry ---- */

static int collect(tw_wheel *w, size_t *work, int walk_starts);

static uint64_t first_deadline(const tw_link *list) {
  return tw__list_empty(list) ? TW_NEVER : tw__list_first(list)->tw__deadline;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

/*
 * The earliest deadline in the slots: the smallest first-slot minimum of
 * any level (a level's first slot holds its earliest deadlines, and every
 * slot of a level starts after the lower levels' blocks). A dirty winner is
 * made exact by re-filing it when that is cheap (wheel.h): when it holds
 * no more than TW_RESCAN_LIMIT timers and the call's re-filings stay
 * within `refile_left` in all, or however many it takes when no more than
 * TW_RESCAN_LIMIT are active (the answer is then always exact; each
 * re-filing leaves one more slot exact, so that a call re-files at most 64
 * slots of at most 64 timers).
 */
static uint64_t earliest_in_slots(tw_wheel *w, size_t refile_left) {
  for (;;) {
    uint64_t best = TW_NEVER;
    size_t best_index = TW_SLOT_COUNT;
    for (unsigned level = 0; level < TW_LEVELS; level++) {
      if (level > 0 && best <= tw__block_start(w->head.pos, level - 1, 1))
        break;
      int ring_pos = first_live(w, level, tw__ring_pos(w->head.pos, level));
      if (ring_pos < 0)
        continue;
      size_t index = tw__slot_index(level, (unsigned)ring_pos);
      if (w->head.slots[index].min < best) {
        best = w->head.slots[index].min;
        best_index = index;
      }
    }
    if (best_index == TW_SLOT_COUNT || !tw__is_dirty(w, best_index))
      return best;
    size_t count = w->head.slots[best_index].count;
    if ((count > refile_left || count > TW_RESCAN_LIMIT) &&
        w->head.count > TW_RESCAN_LIMIT)
      return best;
    refile_left = count < refile_left ? refile_left - count : 0;
    tw__rescan(w, best_index);
  }
}

/*
 * One call re-files at most TW_EXPIRY_REFILES timers in all (rule 8): the
 * end of a paused walk may move on every timer left in it (no more than
 * TW_RESCAN_LIMIT, the condition below), which counts against what the
 * slots' search may re-file
 * (rule8_one_next_expiry_refiles_at_most_1024_after_a_paused_walk).
 */
uint64_t tw_next_expiry(tw_wheel *w) {
  uint64_t earliest;
  size_t refile_left = TW_EXPIRY_REFILES;

  if (!w || w->free_pending)
    return TW_NEVER;
  if (w->collecting != TW_SLOT_COUNT &&
      (w->head.slots[w->collecting].count == 0 ||
       (tw__is_dirty(w, w->collecting) &&
        w->head.slots[w->collecting].count <= TW_RESCAN_LIMIT))) {
    /* A budget stopped it: finish it, it is small; a sort it needs (of
     * the whole tick) is left to the advances' budgets. */
    size_t walk = w->head.slots[w->collecting].count;
    refile_left -= walk;
    collect(w, &walk, 0);
  }
  tw__sort_due(w);
  earliest = min_u64(first_deadline(&w->due), first_deadline(&w->firing));
  if (w->collecting != TW_SLOT_COUNT)
    earliest = min_u64(earliest, w->head.slots[w->collecting].min);
  if (tw__sort_holds_timers(&w->sorting)) /* the tick at pos's timers */
    earliest = min_u64(earliest, w->head.pos);
  return min_u64(earliest, earliest_in_slots(w, refile_left));
}

uint64_t tw__next_times(tw_wheel *w, uint64_t *expiry) {
  *expiry = tw_next_expiry(w);
  if (*expiry == TW_NEVER && (!w || w->free_pending || w->head.count == 0))
    return TW_NEVER;
  if (w->unfinished || w->head.pos < w->head.now ||
      w->collecting != TW_SLOT_COUNT || w->sorting.phase != TW_SORT_IDLE)
    return min_u64(*expiry, w->head.now); /* a budget left work to do */
  return tw__maintenance_time(w, *expiry);
}

uint64_t tw_next_wakeup(tw_wheel *w) {
  uint64_t expiry;
  return tw__next_times(w, &expiry);
}

/* ---- tw_advance ---- */

/* Moves the list `from` to the tail of the firing list, noting whether the
 * firing list is still in order. */
static void join_firing(tw_wheel *w, tw_link *from, int *in_order) {
  if (tw__list_empty(from))
    return;
  if (!tw__list_empty(&w->firing) &&
      tw__fires_before(tw__list_first(from), tw__list_last(&w->firing)))
    *in_order = 0;
  tw__list_splice(&w->firing, from);
}

/* Goes on with the sort of a tick, if one is under way (w->sorting): 1 when
 * none is left, its timers then in the firing list. */
static inline int sort_done(tw_wheel *w, size_t *work) {
  return w->sorting.phase == TW_SORT_IDLE ||
         tw__sort_slices(&w->sorting, &w->firing, work);
}

/*
 * One timer a collection took out of its slot: stale (moved later than
 * `last_due` with a store), it moves on; else it is due and joins `run`,
 * at its head if it came from the slot's tail (walked backwards, the run
 * keeps the slot's order) and at its tail if from the head, clearing
 * *in_order if that puts the run out of firing order.
 */
static inline void collect_one(tw_wheel *w, tw_timer *t, uint64_t last_due,
                               tw_link *run, int from_tail, int *in_order) {
  if (t->tw__deadline > last_due) {
    tw__file(w, t);
    w->moves++;
    return;
  }
  tw__set_place(t, TW_DUE);
  if (from_tail) {
    if (!tw__list_empty(run) && tw__fires_before(tw__list_first(run), t))
      *in_order = 0;
    tw__list_prepend(run, &t->tw__link);
  } else {
    if (!tw__list_empty(run) && tw__fires_before(t, tw__list_last(run)))
      *in_order = 0;
    tw__list_append(run, &t->tw__link);
  }
}

/*
 * Walks the level-0 slot at pos (w->collecting) from both ends in turn, as
 * tw__drain does, so that two chains of cache misses are in flight: a due
 * timer from the head joins the firing list, one from the tail the head of
 * w->collect_back, which joins the firing list after them when the walk is
 * over; stale ones move on. If the walk found them out of order, they are
 * then put in order: at once when the walk started in this call
 * (`walk_starts`), so that it took no more timers than this budget (as
 * collect_whole_slot sorts; the sort in slices costs more per timer: 14%
 * more instructions in the peer benchmark's spread at N = 1e5, where most
 * ticks come out of order), else in w->sorting, within the budgets (a
 * drained tick of a million timers took 2 ms to sort in one call), joining
 * the firing list when that is done. Returns 0 when the budget ran out
 * first: the next call goes on, from both ends, and what it takes goes between
 * the two, so that a slot in start order that takes several budgets to
 * walk (a burst of starts in one tick) needs no sort. (When each walk's
 * tail part joined the firing list at once, the parts interleaved, and the
 * call that ended the walk of a million timers sorted them all, 15 ms in
 * one slice.)
 */
static int collect(tw_wheel *w, size_t *work, int walk_starts) {
  tw_link *head = &w->head.slots[w->collecting].timers;
  int from_tail = 0;

  for (; !tw__list_empty(head) && *work > 0; from_tail = !from_tail) {
    tw_timer *t = from_tail ? tw__list_last(head) : tw__list_first(head);
    (*work)--;
    tw__detach(w, t);
    collect_one(w, t, w->head.pos, from_tail ? &w->collect_back : &w->firing,
                from_tail, &w->collect_in_order);
  }
  if (!tw__list_empty(head))
    return 0;
  join_firing(w, &w->collect_back, &w->collect_in_order);
  /* Stops may have emptied it while a budget paused the walk, leaving its
   * bit set; it is behind pos from now on, where no bit may stay. */
  if (tw__is_occupied(w, w->collecting))
    tw__clear_occupied(w, w->collecting);
  w->collecting = TW_SLOT_COUNT;
  if (!w->collect_in_order && walk_starts)
    tw__list_sort(&w->firing); /* no more timers than this one budget */
  else if (!w->collect_in_order && !tw__list_empty(&w->firing))
    tw__sort_begin(&w->sorting, &w->firing);
  return sort_done(w, work);
}

/* What a budget stopped comes first: the walk of the slot at pos, then
 * putting its timers in order. 1 when neither is left. */
static int resume_collection(tw_wheel *w, size_t *work) {
  if (w->collecting != TW_SLOT_COUNT)
    return collect(w, work, 0);
  return sort_done(w, work);
}

/* Whether collect_whole_slot may take slot `next`. */
static int can_collect_whole(const tw_wheel *w, const struct next_slot *next,
                             size_t work) {
  const uint64_t *level0 = &w->occupied[tw__ring_pos(next->start, 0) / 64];
  if (next->level != 1 || next->start + (TW_SLOTS - 1) > w->head.now ||
      w->head.slots[next->index].count > work)
    return 0;
  for (unsigned k = 0; k < TW_SLOTS / 64; k++) /* the span's half of level 0 */
    if (level0[k])
      return 0;
  return 1;
}

/* The buckets of collect_whole_slot: one per tick of the span, each with
 * its early and late run, set up when first used. */
struct buckets {
  tw_link early[TW_SLOTS], late[TW_SLOTS];
  uint64_t used[TW_SLOTS / 64];
  uint64_t span_end;
  int in_order;
};

/* Puts one timer of the slot into the early run of its tick's bucket (from
 * the slot's head) or the late run (from its tail); a stale one moves on
 * and may leave its bucket empty. */
static inline void bucket_one(tw_wheel *w, struct buckets *b, tw_link *node,
                              int from_tail) {
  tw_timer *t = TW_TIMER_OF(node);
  unsigned tick = (unsigned)t->tw__deadline % TW_SLOTS;
  uint64_t bit = (uint64_t)1 << (tick % 64);
  if (!(b->used[tick / 64] & bit)) {
    b->used[tick / 64] |= bit;
    tw__list_init(&b->early[tick]);
    tw__list_init(&b->late[tick]);
  }
  collect_one(w, t, b->span_end, from_tail ? &b->late[tick] : &b->early[tick],
              from_tail, &b->in_order);
}

/*
 * A level-1 slot whose whole span is due (the loop slept past it), with
 * nothing at level 0 in that span, and no more timers than the budget
 * left: collected in one pass, not drained into level 0 and then
 * collected tick by tick. Each of its timers still inside the span is due
 * and goes to the bucket of its tick (all of a bucket's timers share a
 * deadline); the buckets join the firing list in tick order; stale ones
 * move on. The slot is walked from both ends in turn, as tw__drain does
 * (two chains of cache misses in flight): timers from the head join their
 * bucket's early run, those from the tail the front of its late run, so
 * that early run then late run keep the slot's order. The buckets are on
 * the stack (8 KiB), set up when first used: not inline, so that they do
 * not sit under every callback.
 */
static TW_NOINLINE void
collect_whole_slot(tw_wheel *w, const struct next_slot *next, size_t *work) {
  struct tw__slot *slot = &w->head.slots[next->index];
  tw_link *front = slot->timers.next, *back = slot->timers.prev;
  size_t left = slot->count;
  struct buckets b;

  memset(b.used, 0, sizeof b.used);
  b.span_end = next->start + (TW_SLOTS - 1);
  b.in_order = 1;
  /* Take the whole chain: the slot is empty from here on. */
  *work -= left;
  tw__list_init(&slot->timers);
  slot->count = 0;
  tw__clear_occupied(w, next->index);
  tw__set_pos(w, b.span_end);    /* every other slot with timers starts later */
  for (; left >= 2; left -= 2) { /* read each node's link before moving it */
    tw_link *from_head = front, *from_tail = back;
    front = front->next;
    back = back->prev;
    bucket_one(w, &b, from_head, 0);
    bucket_one(w, &b, from_tail, 1);
  }
  if (left)
    bucket_one(w, &b, front, 0);
  for (unsigned k = 0; k < TW_SLOTS / 64; k++)
    for (uint64_t bits = b.used[k]; bits; bits &= bits - 1) {
      unsigned tick = k * 64 + tw__lowest_bit(bits);
      join_firing(w, &b.early[tick], &b.in_order);
      join_firing(w, &b.late[tick], &b.in_order);
    }
  if (!b.in_order)
    tw__list_sort(&w->firing);
}

/*
 * One step of pos toward now, with the firing list empty: the earliest
 * occupied slot starts collecting (level 0) or is drained (above), or, when
 * it starts after now, pos reaches now. Returns 0 then, or when the budget
 * ran out; 1 otherwise.
 */
static int step(tw_wheel *w, size_t *work) {
  struct next_slot next;

  if (w->head.pos ==
      w->head.now) /* every occupied slot starts after pos (wheel.h) */
    return 0;      /* horizon stays a bound: the next step searches */
  if (w->head.now < w->horizon) { /* nothing starts by now: no search */
    tw__set_pos(w, w->head.now);
    return 0;
  }
  if (!earliest_slot(w, &next) || next.start > w->head.now) {
    w->horizon = next.start; /* TW_NEVER when none */
    tw__set_pos(w, w->head.now);
    return 0;
  }
  if (*work == 0)
    return 0;
  if (next.level == 0) {
    tw__set_pos(w, next.start);
    w->collecting = next.index;
    w->collect_in_order = 1;
    return collect(w, work, 1);
  }
  if (can_collect_whole(w, &next, *work)) {
    collect_whole_slot(w, &next, work);
    return 1;
  }
  /* Its timers now belong to the levels below. */
  tw__set_pos(w, next.start - 1);
  *work -= tw__drain(w, next.index, *work);
  return 1;
}

/* The due list of earlier starts joins the firing list: what is due by pos
 * in firing order, the rest (due by now but after pos, where a budget
 * stopped the last advance) into the slots, earliest first. */
static void take_due(tw_wheel *w) {
  tw_link later;
  tw__sort_due(w);
  if (tw__list_empty(&w->due))
    return;
  tw__list_init(&later);
  while (!tw__list_empty(&w->due) &&
         tw__list_last(&w->due)->tw__deadline > w->head.pos) {
    tw_timer *t = tw__list_last(&w->due);
    tw__list_unlink(&t->tw__link);
    tw__list_prepend(&later, &t->tw__link);
  }
  while (!tw__list_empty(&later)) {
    tw_timer *t = tw__list_first(&later);
    tw__list_unlink(&t->tw__link);
    tw__file(w, t);
  }
  tw__merge_sorted(&w->firing, &w->due);
}

/* A repeating timer's next deadline (rule 6): now + repeat, or with
 * TW_FIXED_RATE the deadline it fired for + repeat, unless that has passed
 * (then missed periods collapse into one call, as without it). */
static uint64_t next_period(const tw_wheel *w, const tw_timer *t) {
  if (t->tw__order & TW_FIXED_RATE) {
    uint64_t next = tw__saturating_add(t->tw__deadline, t->tw__repeat);
    if (next >= w->head.now)
      return next;
  }
  return tw__saturating_add(w->head.now, t->tw__repeat);
}

/*
 * Runs the firing list and steps pos on. Each batch fires as soon as it is
 * collected, while its timers are still in the cache. Rule 5 holds because
 * a callback's start files its timer against now: a deadline <= now waits in
 * w->due (taken only at the next advance), a later one is never collected by
 * this advance, which stops at now. A fence (tw_driver_fence) stops it at
 * the first timer started since: what follows it in firing order waits too.
 * Without one nothing is tested: rule 5 holds back what a fence would.
 * (The fence used to be the advance's start then, to test one fence either
 * way, 2 instructions per fired timer against 3 for the flag; but
 * sequences compare modulo 2^47, and a timer started 2^46 starts before
 * the advance looked started after it, and stopped every advance for
 * ever: a_timer_older_than_2_46_starts_still_runs.)
 * Inline (its one caller is advance): without it gcc 12 kept it apart
 * once collect ended in the sort's call, 1.3% more instructions in the peer
 * benchmark's spread at N = 1e5 (51.23 -> 51.88 million; with it 51.27).
 */
static inline size_t run_callbacks(tw_wheel *w, size_t max_fire, size_t *work) {
  size_t ran = 0;
  while (!w->free_pending) {
    if (tw__list_empty(&w->firing)) {
      if (!step(w, work))
        break;
      continue;
    }
    if (ran >= max_fire || *work == 0)
      break;
    tw_timer *t = tw__list_first(&w->firing);
    if (w->fenced && tw__after_fence(w, t))
      break; /* due, it runs at the next advance */
    tw__disarm(w, t);
    if (t->tw__repeat)
      tw__arm(w, t, next_period(w, t));
    ran++;
    (*work)--;
    t->tw__cb(t); /* t may be freed from here on unless still active */
    if (w->break_pending)
      break;
  }
  return ran;
}

static size_t advance(tw_wheel *w, uint64_t now, size_t max_fire, size_t work) {
  size_t ran = 0;

  if (!w || w->advancing)
    return 0;
  if (now > w->head.now)
    w->head.now = now;
  w->advancing = 1;
  /* A collection a budget stopped comes first: its timers fire before
   * anything started since with the same deadline. */
  if (resume_collection(w, &work)) {
    take_due(w);
    ran = run_callbacks(w, max_fire, &work);
  }
  w->advancing = 0;
  if (w->free_pending) {
    free(w);
    return ran;
  }
  w->fenced = 0; /* a fence holds for one advance */
  /* The pace is paid at pos whenever budget is left, after a break too,
   * even one that left pos behind now: a loop whose every advance breaks
   * would otherwise owe a whole source at its deadline (pace.c). What the
   * budget left says whether this advance used it all up
   * (tw__next_times). */
  w->break_pending = 0;
  if (work > 0 && w->head.pos >= w->pace_next)
    work -= tw__pace(w, work);
  w->unfinished = work == 0;
  return ran;
}

void tw_break(tw_wheel *w) {
  if (w && w->advancing)
    w->break_pending = 1;
}

size_t tw_advance(tw_wheel *w, uint64_t now, size_t max_fire) {
  return advance(w, now, max_fire, TW_ALL);
}

size_t tw_advance_slice(tw_wheel *w, uint64_t now, size_t max_work) {
  return advance(w, now, TW_ALL, max_work);
}
