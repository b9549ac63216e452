/*
 * The invariant checker: walks the wheel and verifies every rule of
 * wheel.h, the counts and the bitmaps; returns NULL, or what is wrong. For
 * tests (the differential test and the fuzzer call it after every
 * operation), never for a hot path. It visits the occupied slots (and
 * finds every timer through them: the total must match the count); `full`
 * also visits every empty slot. Not part of the API: declared here,
 * exported for the tests.
 */
#include "wheel.h"

#include <stdio.h>

TW_EXTERN const char *tw__check(const tw_wheel *w, int full);

static char message[256];

#define FAIL(...)                                                              \
  do {                                                                         \
    snprintf(message, sizeof message, __VA_ARGS__);                            \
    return message;                                                            \
  } while (0)

/* A timer's place according to the filing rule, as a slot index: the
 * lowest level L with block_L(d) - block_L(pos) <= 1, from the definition
 * (the wheel's own filing takes a shortcut, tw__filing_slot and level_end). */
static size_t rule_slot(uint64_t pos, uint64_t deadline) {
  unsigned level = 0;
  while (tw__block(deadline, level) - tw__block(pos, level) > 1)
    level++;
  return tw__slot_index(level, tw__ring_pos(deadline, level));
}

/* Is `index` the source of the level below it (it spans that level's next
 * block)? */
static int is_source(uint64_t pos, size_t index) {
  unsigned level = tw__level_of_index(index);
  return level > 0 && tw__source_of(pos, level - 1) == index;
}

/* A slot a stop emptied, its occupied bit still set: the bounds hold for
 * it as if it held a timer (wheel.h), since a timer filed there next will
 * not move them. */
static const char *check_emptied_slot(const tw_wheel *w, size_t index) {
  unsigned level = tw__level_of_index(index);
  uint64_t start = tw__index_start(w->head.pos, index);
  uint64_t width = (uint64_t)1 << tw__shift(level);
  if (start <= w->head.pos || start < w->horizon)
    FAIL("emptied slot %zu starts at %llu: pos %llu, horizon %llu", index,
         (unsigned long long)start, (unsigned long long)w->head.pos,
         (unsigned long long)w->horizon);
  if (level > 0 && start - width > w->head.pos && w->pace_next > start - width)
    FAIL("emptied slot %zu becomes a source at %llu, pace_next %llu", index,
         (unsigned long long)(start - width), (unsigned long long)w->pace_next);
  return NULL;
}

static const char *check_slot(const tw_wheel *w, size_t index, size_t *timers) {
  const struct tw__slot *slot = &w->head.slots[index];
  unsigned level = tw__level_of_index(index);
  unsigned ring_pos = tw__ring_pos_of_index(index);
  int bit = tw__is_occupied(w, index);
  uint64_t start, width, min = TW_NEVER;
  const tw_link *node, *prev = &slot->timers;
  size_t length = 0;
  int holder = 0; /* a timer marked TW_MAY_HOLD_MIN has the minimum */

  if (slot->occupied != bit)
    FAIL("slot %zu: occupied %d, bitmap %d", index, slot->occupied, bit);
  if (slot->dirty && !bit)
    FAIL("slot %zu: dirty but not occupied", index);
  if (tw__list_empty(&slot->timers)) { /* most slots: cheap */
    if (slot->timers.prev != &slot->timers || w->head.slots[index].count)
      FAIL("slot %zu: empty list, count %u", index, w->head.slots[index].count);
    if (bit && index != w->collecting)
      return check_emptied_slot(w, index);
    return NULL;
  }
  start = tw__slot_start(w->head.pos, level, ring_pos);
  width = (uint64_t)1 << tw__shift(level);
  if (start < w->horizon)
    FAIL("slot %zu starts at %llu, before horizon %llu", index,
         (unsigned long long)start, (unsigned long long)w->horizon);
  for (node = slot->timers.next; node != &slot->timers; node = node->next) {
    const tw_timer *t = TW_TIMER_OF(node);
    if (node->prev != prev)
      FAIL("slot %zu: broken link at timer %zu", index, length);
    if ((tw__place(t) & ~TW_MAY_HOLD_MIN) != (TW_SLOT | index))
      FAIL("slot %zu: timer %zu tagged %#x", index, length, tw__tag(t));
    if (t->tw__deadline < start)
      FAIL("slot %zu (start %llu): deadline %llu before it", index,
           (unsigned long long)start, (unsigned long long)t->tw__deadline);
    if (t->tw__deadline - start < width && index != w->collecting &&
        rule_slot(w->head.pos, t->tw__deadline) != index &&
        !is_source(w->head.pos, index))
      FAIL("slot %zu: deadline %llu belongs in slot %zu (pos %llu)", index,
           (unsigned long long)t->tw__deadline,
           rule_slot(w->head.pos, t->tw__deadline),
           (unsigned long long)w->head.pos);
    if (t->tw__deadline < min)
      min = t->tw__deadline;
    if (tw__tag(t) & TW_MAY_HOLD_MIN)
      holder |= t->tw__deadline == slot->min;
    else if (t->tw__deadline < slot->min && index != w->collecting)
      FAIL("slot %zu: deadline %llu < min %llu without TW_MAY_HOLD_MIN "
           "(the inline store would leave the min inexact)",
           index, (unsigned long long)t->tw__deadline,
           (unsigned long long)slot->min);
    prev = node;
    length++;
  }
  if (slot->timers.prev != prev)
    FAIL("slot %zu: broken tail link", index);
  if (w->head.slots[index].count != (uint32_t)length)
    FAIL("slot %zu: count %u, %zu timers", index, w->head.slots[index].count,
         length);
  if (!bit)
    FAIL("slot %zu: %zu timers, occupied bit clear", index, length);
  if (start <= w->head.pos && index != w->collecting)
    FAIL("slot %zu starts at %llu, not after pos %llu", index,
         (unsigned long long)start, (unsigned long long)w->head.pos);
  if (slot->min < start || slot->min > min)
    FAIL("slot %zu: min %llu outside [start %llu, earliest %llu]", index,
         (unsigned long long)slot->min, (unsigned long long)start,
         (unsigned long long)min);
  if (!tw__is_dirty(w, index) && slot->min != min)
    FAIL("slot %zu: clean min %llu, earliest deadline %llu", index,
         (unsigned long long)slot->min, (unsigned long long)min);
  if (!tw__is_dirty(w, index) && !holder)
    FAIL("slot %zu: clean, but no timer marked as holding its min", index);
  *timers += length;
  return NULL;
}

static const char *check_bitmaps(const tw_wheel *w) {
  for (unsigned k = 0; k < TW_BITMAP_WORDS; k++) {
    if ((w->occupied[k] != 0) != ((w->occupied_words >> k) & 1))
      FAIL("bitmap word %u: its bit in occupied_words is wrong", k);
  }
  if (w->occupied_words >> (TW_BITMAP_WORDS - 1) >> 1)
    FAIL("occupied_words has bits beyond the bitmaps' words");
  return NULL;
}

/* Every slot (full) or the occupied ones. */
static const char *check_slots(const tw_wheel *w, int full, size_t *timers) {
  const char *err;
  for (size_t index = 0; index < TW_SLOT_COUNT; index++) {
    uint64_t word = w->occupied[index / 64] >> (index % 64);
    if (!full && !word) { /* no occupied slot left in this word */
      index |= 63;
      continue;
    }
    if ((full || (word & 1)) && (err = check_slot(w, index, timers)))
      return err;
  }
  return NULL;
}

/* A list of due timers: tagged TW_DUE, due from `from` to `limit`, sorted if
 * `sorted`. */
static const char *check_due_list(const tw_link *head, const char *name,
                                  uint64_t from, uint64_t limit, int sorted,
                                  size_t *timers) {
  const tw_link *node, *prev = head;
  const tw_timer *last = NULL;
  for (node = head->next; node != head; node = node->next) {
    const tw_timer *t = TW_TIMER_OF(node);
    if (node->prev != prev)
      FAIL("%s: broken link", name);
    if (tw__state(t) != TW_DUE)
      FAIL("%s: timer tagged %#x", name, tw__tag(t));
    if (t->tw__deadline < from || t->tw__deadline > limit)
      FAIL("%s: deadline %llu outside [%llu, %llu]", name,
           (unsigned long long)t->tw__deadline, (unsigned long long)from,
           (unsigned long long)limit);
    if (sorted && last && tw__fires_before(t, last))
      FAIL("%s: out of firing order", name);
    last = t;
    prev = node;
    (*timers)++;
  }
  if (head->prev != prev)
    FAIL("%s: broken tail link", name);
  return NULL;
}

/* The sort of a tick (order.c): every list holds that tick's timers, due
 * at pos (the tick), the input in any order, the others sorted; while it is
 * under way, no walk is and the firing list waits for it, empty. */
static const char *check_sorting(const tw_wheel *w, size_t *timers) {
  const struct tw_sorting *s = &w->sorting;
  const char *err;
  size_t before = *timers;
  uint64_t pos = w->head.pos;
  if ((err = check_due_list(&s->input, "sort input", pos, pos, 0, timers)) ||
      (err = check_due_list(&s->run, "sort run", pos, pos, 1, timers)) ||
      (err = check_due_list(&s->merged, "sort merged", pos, pos, 1, timers)))
    return err;
  for (unsigned k = 0; k < TW_SORT_LEVELS; k++) {
    if (!tw__list_empty(&s->pending[k]) && !(s->pending_levels >> k & 1))
      FAIL("sort level %u holds timers, its bit clear", k);
    if ((err =
             check_due_list(&s->pending[k], "sort level", pos, pos, 1, timers)))
      return err;
  }
  if (s->phase == TW_SORT_IDLE && (*timers != before || s->pending_levels))
    FAIL("an idle sort holds timers");
  if (s->phase != TW_SORT_IDLE &&
      (w->collecting != TW_SLOT_COUNT || !tw__list_empty(&w->firing)))
    FAIL("a sort is under way beside a walk or a firing list");
  if (s->phase != TW_SORT_MERGING && !tw__list_empty(&s->merged))
    FAIL("sort: a merge's output outside a merge");
  if (s->level > TW_SORT_LEVELS ||
      (s->level == TW_SORT_LEVELS &&
       (s->phase != TW_SORT_CARRYING || !tw__list_empty(&s->input))))
    FAIL("sort level %u", s->level);
  return NULL;
}

const char *tw__check(const tw_wheel *w, int full) {
  const char *err;
  size_t timers = 0;

  if (!w)
    return NULL;
  if (w->head.pos > w->head.now)
    FAIL("pos %llu after now %llu", (unsigned long long)w->head.pos,
         (unsigned long long)w->head.now);
  if (w->collecting != TW_SLOT_COUNT &&
      (w->collecting >= TW_LEVEL_SLOTS ||
       tw__slot_start(w->head.pos, 0, (unsigned)w->collecting) != w->head.pos))
    FAIL("collecting slot %zu is not the level-0 slot at pos", w->collecting);
  if ((err = check_bitmaps(w)) || (err = check_slots(w, full, &timers)))
    return err;
  if ((err = check_due_list(
           &w->firing, "firing", 0, w->head.pos,
           w->collecting == TW_SLOT_COUNT || w->collect_in_order, &timers)))
    return err;
  if ((err = check_due_list(&w->collect_back, "collect_back", 0, w->head.pos,
                            w->collect_in_order, &timers)))
    return err;
  if (w->collecting == TW_SLOT_COUNT && !tw__list_empty(&w->collect_back))
    FAIL("collect_back holds timers, but no walk is under way");
  if ((err = check_sorting(w, &timers)))
    return err;
  if ((err = check_due_list(&w->due, "due", 0, w->head.now, !w->due_unsorted,
                            &timers)))
    return err;
  if (timers != w->head.count)
    FAIL("count %zu, %zu timers waiting", w->head.count, timers);
  /* The pace must run by the time a source owes a batch (at the next
   * advance, whatever its time, when that is already past). */
  if (w->pace_next > w->head.pos && w->pace_next > tw__pace_due(w))
    FAIL("pace_next %llu, but a source owes a batch at %llu",
         (unsigned long long)w->pace_next, (unsigned long long)tw__pace_due(w));
  for (unsigned level = 0; level < TW_LEVELS; level++)
    if (w->head.level_end[level] != tw__level_end(w->head.pos, level))
      FAIL("level %u ends at %llu, not %llu at pos %llu", level,
           (unsigned long long)w->head.level_end[level],
           (unsigned long long)tw__level_end(w->head.pos, level),
           (unsigned long long)w->head.pos);
  return NULL;
}
