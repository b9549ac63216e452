/*
 * A baseline for the stall scenario: an array binary min-heap of deadlines
 * (ms of the loop clock) with each timer's position stored in the timer,
 * libevent's design without its loop. A start of an active timer sifts it
 * in place; an advance pops and runs what is due. Every operation is
 * O(log n): no advance ever has more to do than the timers it fires.
 */
#include <stdlib.h>

#include "bench.h"

#define NOT_IN_HEAP UINT32_MAX

struct heap_timer {
  uint64_t deadline;
  uint32_t pos; /* in the array; NOT_IN_HEAP when inactive */
};

struct heap {
  struct heap_timer **a; /* a[0] is due first */
  uint32_t count;
  struct heap_timer *idle;
  uint64_t now;
};

static struct heap heap;

static void place(struct heap *h, uint32_t i, struct heap_timer *t) {
  h->a[i] = t;
  t->pos = i;
}

static void sift_up(struct heap *h, uint32_t i, struct heap_timer *t) {
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (h->a[parent]->deadline <= t->deadline)
      break;
    place(h, i, h->a[parent]);
    i = parent;
  }
  place(h, i, t);
}

static void sift_down(struct heap *h, uint32_t i, struct heap_timer *t) {
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= h->count)
      break;
    if (child + 1 < h->count &&
        h->a[child + 1]->deadline < h->a[child]->deadline)
      child++;
    if (t->deadline <= h->a[child]->deadline)
      break;
    place(h, i, h->a[child]);
    i = child;
  }
  place(h, i, t);
}

/* Takes t out; the last element fills its place. */
static void heap_remove(struct heap *h, struct heap_timer *t) {
  uint32_t i = t->pos;
  struct heap_timer *last = h->a[--h->count];
  t->pos = NOT_IN_HEAP;
  if (last == t)
    return;
  if (i > 0 && last->deadline < h->a[(i - 1) / 2]->deadline)
    sift_up(h, i, last);
  else
    sift_down(h, i, last);
}

static void *heap_open(const struct bench_params *p) {
  (void)p;
  heap.now = bench_loop_ns() / BENCH_NS_PER_MS;
  return &heap;
}

static void heap_init(void *p, void *t) {
  (void)p;
  ((struct heap_timer *)t)->pos = NOT_IN_HEAP;
}

static void heap_alloc(void *p, uint32_t n, int requests) {
  struct heap *h = p;
  (void)requests; /* stall only: no request timers */
  h->a = bench_alloc(n, sizeof *h->a);
  h->idle = bench_timers(h, n, sizeof *h->idle, heap_init);
}

static uint32_t heap_start(void *p, uint32_t i, uint32_t timeout_ms) {
  struct heap *h = p;
  struct heap_timer *t = &h->idle[i];
  uint64_t old = t->deadline;
  t->deadline = h->now + timeout_ms;
  if (t->pos == NOT_IN_HEAP)
    sift_up(h, h->count++, t);
  else if (t->deadline < old)
    sift_up(h, t->pos, t);
  else
    sift_down(h, t->pos, t);
  return timeout_ms;
}

static void heap_refresh(void *p) {
  struct heap *h = p;
  h->now = bench_loop_ns() / BENCH_NS_PER_MS;
}

/* An advance: runs every timer due at the loop clock's time. */
static void heap_expire(void *p) {
  struct heap *h = p;
  h->now = bench_loop_ns() / BENCH_NS_PER_MS;
  while (h->count > 0 && h->a[0]->deadline <= h->now) {
    struct heap_timer *t = h->a[0];
    heap_remove(h, t);
    bench_fire((uint32_t)(t - h->idle));
  }
}

const struct bench_impl bench_impl_heap = {
    .name = "heap",
    .label = "array min-heap, index in timer (no loop)",
    .scenarios = BENCH_STALL,
    .open = heap_open,
    .alloc = heap_alloc,
    .start = heap_start,
    .refresh = heap_refresh,
    .expire = heap_expire,
    .timer_size = sizeof(struct heap_timer),
};
