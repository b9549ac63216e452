/*
 * The paced drains: each level's source (wheel.h) is emptied into its level
 * a batch at a time, so that no advance moves a whole slot of more than a
 * batch's timers.
 *
 * Level L's source spans its next block and must be empty by the time pos
 * enters the block's last level-(L-1) block (the last tick, for level 0):
 * the level below then drains the first slot of that block, which must be
 * complete. While pos is in the block before, the drain owes, at each
 * advance, the share of the source's timers that matches the share of the
 * time left before that deadline which has passed since the last payment:
 * count * (pos - since) / (end - since), paid once it comes to a batch
 * (TW_PACE_BATCH moves, or all the source holds if fewer), and in full at
 * the deadline. So a source's timers leave at an even rate over the block
 * (timers that are stopped meanwhile only lower it), whatever the advances'
 * spacing, and the pace's own work is paid once a batch, not once a timer;
 * a loop that sleeps owes more at its next advance, and tw_next_wakeup says
 * when to come back before that exceeds TW_MAINTENANCE_MOVES.
 */
#include "wheel.h"

/*
 * n * part / whole for part <= whole, rounded down (or up). n is a count of
 * timers or a span of time, either of up to 64 bits: with n = q * whole + r,
 * the share is q * part + r * part / whole, whose one product that could
 * overflow, r * part, cannot once whole < 2^32. A larger whole (a window of
 * more than 2^32 ticks) is first shifted down with part, which keeps their
 * ratio to 31 bits.
 */
static uint64_t share(uint64_t n, uint64_t part, uint64_t whole, int up) {
  uint64_t q, r;
  if (whole == 0)
    return n;
  while (whole > UINT32_MAX) {
    part >>= 1;
    whole >>= 1;
  }
  q = n / whole;
  r = n % whole;
  return q * part + (r * part + (up ? whole - 1 : 0)) / whole;
}

/* The window in which level `level`'s source is drained: from the start of
 * pos's block to the time it must be empty by. */
struct window {
  uint64_t start, end;
};

static struct window drain_window(uint64_t block_start, unsigned level) {
  struct window win;
  uint64_t block = (uint64_t)1 << tw__shift(level + 1);
  uint64_t lead = level == 0 ? 1 : (uint64_t)1 << tw__shift(level);
  win.start = block_start;
  win.end = block_start + (block - lead);
  return win;
}

/* The time paid up to for level `level`'s current source. */
static uint64_t paid_up_to(const tw_wheel *w, unsigned level,
                           uint64_t block_start) {
  const struct tw_pace *pace = &w->pace[level];
  return pace->block == tw__block(w->head.pos, level) ? pace->since
                                                      : block_start;
}

/* The moves a source of `count` timers is paid in. */
static uint64_t batch_of(uint64_t count) {
  return count < TW_PACE_BATCH ? count : TW_PACE_BATCH;
}

/* Moves owed by a source of `count` timers at `at`, paid up to `since`:
 * none until the share comes to a batch, then all of it; everything at the
 * deadline. */
static uint64_t owed(uint64_t count, struct window win, uint64_t since,
                     uint64_t at) {
  uint64_t want;
  if (at >= win.end)
    return count;
  if (at <= since)
    return 0;
  want = share(count, at - since, win.end - since, 0);
  return want >= batch_of(count) ? want : 0;
}

/* When the source of `count` timers, paid up to `since`, owes `moves` of
 * them (0 < moves <= count): no later than the deadline. */
static uint64_t when_owing(uint64_t count, uint64_t moves, struct window win,
                           uint64_t since) {
  if (since >= win.end)
    return since;
  return since + share(win.end - since, moves, count, 1);
}

/* When it owes a batch; TW_NEVER for an empty source. */
static uint64_t when_owing_a_batch(uint64_t count, struct window win,
                                   uint64_t since) {
  return count ? when_owing(count, batch_of(count), win, since) : TW_NEVER;
}

/*
 * When a loop that sleeps must advance for level `level`'s source of
 * `count` timers: when it owes TW_MAINTENANCE_MOVES. A source that never
 * will still has its deadline, if one advance that crossed it and the
 * deadlines below it would move its timers down every level to 0 (count *
 * (level + 1) moves) more than a level's share of TW_MAINTENANCE_MOVES:
 * the advance at its deadline moves them one level, and the levels below
 * at their own deadlines. An advance crosses at most two such small
 * sources' deadlines per level (their timers fire in the blocks that
 * follow), but a source paid at its deadline may still move up to
 * TW_MAINTENANCE_MOVES, so this bounds an advance's moves in shares, not
 * exactly: the tests check that such a loop's advances stay within 4096
 * (tests/test_pace.c). TW_NEVER for a source that needs neither.
 */
static uint64_t when_owing_maintenance(uint64_t count, unsigned level,
                                       struct window win, uint64_t since) {
  if (count > TW_MAINTENANCE_MOVES)
    return when_owing(count, TW_MAINTENANCE_MOVES, win, since);
  if (count * (level + 1) > TW_MAINTENANCE_MOVES / TW_LEVELS)
    return win.end;
  return TW_NEVER;
}

size_t tw__pace(tw_wheel *w, size_t budget) {
  size_t moved = 0;
  uint64_t next = TW_NEVER;
  /* From the top: a level's drain fills the slots the level below drains. */
  for (unsigned level = TW_TOP; level-- > 0;) {
    size_t source;
    uint64_t block_start, block;
    struct tw_pace *pace = &w->pace[level];
    struct window win;
    uint64_t since, want, due;

    if (!tw__occupied_words_of(w, level + 1))
      continue; /* the level above is empty: no source now or next */
    source = tw__source_of(w->head.pos, level);
    if (source == TW_SLOT_COUNT)
      continue;
    block_start = tw__block_start(w->head.pos, level, 0);
    block = (uint64_t)1 << tw__shift(level + 1);
    if (block_start + block < next) /* a new source then */
      next = block_start + block;
    win = drain_window(block_start, level);
    since = paid_up_to(w, level, block_start);
    pace->block = tw__block(w->head.pos, level);
    pace->since = since;
    want = owed(w->head.slots[source].count, win, since, w->head.pos);
    if (want > budget - moved) {
      moved += tw__drain(w, source, budget - moved);
      next = w->head.pos; /* the budget ran out: look again next advance */
      continue;
    }
    if (want > 0) {
      moved += tw__drain(w, source, (size_t)want);
      pace->since = w->head.pos;
    }
    due = when_owing_a_batch(w->head.slots[source].count, win, pace->since);
    if (due < next)
      next = due;
  }
  /* This replaces what the drains above lowered pace_next to as they filed
   * timers, and `next` covers them. A drain of level L's source files at
   * level L or below, where a slot becomes a source no earlier than the
   * next block boundary of the level under it, which that level's pass,
   * coming later in this loop, counted in `next`; or, a timer moved later,
   * at a level K above L, past the end of level K-1's two blocks: its slot
   * becomes a source no earlier than level K-1's next block boundary, which
   * is no earlier than level L's, counted by L's own pass. */
  w->pace_next = next;
  return moved;
}

/*
 * The first time a loop that sleeps must advance for some source
 * (when_owing_maintenance). For each level: its current source, then the
 * slots of the level above that will become its sources, in time order, up
 * to the first that needs such an advance (the later ones start later) or
 * that begins after `limit` (the loop wakes by then and asks again).
 */
uint64_t tw__maintenance_time(const tw_wheel *w, uint64_t limit) {
  uint64_t earliest = limit;
  for (unsigned level = 0; level < TW_TOP; level++) {
    size_t source = tw__source_of(w->head.pos, level);
    uint64_t block_start = tw__block_start(w->head.pos, level, 0);
    uint64_t block = (uint64_t)1 << tw__shift(level + 1);
    uint64_t at, start, from;
    unsigned source_pos;
    int ring_pos;

    if (source == TW_SLOT_COUNT)
      continue;
    at = when_owing_maintenance(w->head.slots[source].count, level,
                                drain_window(block_start, level),
                                paid_up_to(w, level, block_start));
    if (at < earliest)
      earliest = at;
    source_pos = tw__ring_pos_of_index(source);
    from = block_start + block; /* the source's own start */
    for (ring_pos = tw__first_occupied(w, level + 1, source_pos);
         ring_pos >= 0 && (unsigned)ring_pos != source_pos;
         ring_pos = tw__first_occupied(w, level + 1, (unsigned)ring_pos)) {
      size_t next = tw__slot_index(level + 1, (unsigned)ring_pos);
      start = tw__slot_start(w->head.pos, level + 1, (unsigned)ring_pos);
      if (start <= from || start - block >= earliest)
        break; /* wrapped round, or a source only after the answer */
      from = start;
      at = when_owing_maintenance(w->head.slots[next].count, level,
                                  drain_window(start - block, level),
                                  start - block);
      if (at != TW_NEVER) {
        if (at < earliest)
          earliest = at;
        break;
      }
    }
  }
  return earliest;
}

/*
 * The earliest time a source, the current one of a level or a slot of the
 * level above that becomes one later, owes a batch: pace_next must never be
 * later (wheel.h). For the invariant checker; walks every slot above level
 * 0.
 */
uint64_t tw__pace_due(const tw_wheel *w) {
  uint64_t due = TW_NEVER;
  for (unsigned level = 0; level < TW_TOP; level++) {
    size_t source = tw__source_of(w->head.pos, level);
    uint64_t block_start = tw__block_start(w->head.pos, level, 0);
    uint64_t block = (uint64_t)1 << tw__shift(level + 1);
    unsigned slots = level + 1 == TW_TOP ? TW_SLOTS : TW_LEVEL_SLOTS;
    for (unsigned ring_pos = 0; ring_pos < slots; ring_pos++) {
      size_t index = tw__slot_index(level + 1, ring_pos);
      uint64_t count = w->head.slots[index].count, at, start;
      if (count == 0)
        continue;
      if (index == source) {
        at = when_owing_a_batch(count, drain_window(block_start, level),
                                paid_up_to(w, level, block_start));
      } else {
        start = tw__slot_start(w->head.pos, level + 1, ring_pos);
        if (start < block || (at = start - block) <= w->head.pos)
          continue; /* not a source to come: the advance's own drain */
      }
      if (at < due)
        due = at;
    }
  }
  return due;
}
