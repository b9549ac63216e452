/*
 * clockcost: what a clock read costs a loop that also touches memory.
 *
 * tw_ev_timer_add reads CLOCK_MONOTONIC on every add (the price of never
 * firing early against it; adapters/event/twheel-event.h). Alone such a
 * read is cheap, but on x86 Linux's vDSO orders its TSC read after every
 * earlier load (rdtsc_ordered), so the cache misses that a loop of adds
 * would overlap are waited for one by one. This program shows it without
 * any timer: a loop of read-modify-writes of random 64-byte lines in a
 * 128 MiB array, first alone, then with a clock read per access, for each
 * clock; and the precise read alone.
 *
 *     build-bench/bench/clockcost [iterations]     (default 4000000)
 *
 * prints ns per iteration for each variant (pin it: taskset -c 1).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LINES (1u << 21) /* 2 Mi lines of 64 bytes: far beyond the caches */
#define WORDS_PER_LINE 8

static uint64_t read_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(uint64_t *state) { /* xorshift64 */
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

struct variant {
  const char *name;
  int touches_memory;
  int reads_clock;
  clockid_t clock;
};

int main(int argc, char **argv) {
  static const struct variant variants[] = {
      {"CLOCK_MONOTONIC alone", 0, 1, CLOCK_MONOTONIC},
      {"random access, no clock read", 1, 0, CLOCK_MONOTONIC},
      {"random access + CLOCK_MONOTONIC", 1, 1, CLOCK_MONOTONIC},
#ifdef CLOCK_MONOTONIC_COARSE
      {"random access + CLOCK_MONOTONIC_COARSE", 1, 1, CLOCK_MONOTONIC_COARSE},
#endif
  };
  long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 4000000;
  uint64_t *lines = aligned_alloc(64, (size_t)LINES * 64);
  uint64_t state = 0x9e3779b97f4a7c15u;

  if (!lines || iterations <= 0) {
    fprintf(stderr, "usage: clockcost [iterations > 0]\n");
    free(lines);
    return 2;
  }
  for (size_t i = 0; i < (size_t)LINES * WORDS_PER_LINE; i++)
    lines[i] = i; /* every page mapped before the timed loops */
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    const struct variant *var = &variants[v];
    uint64_t start = read_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < iterations; i++) {
      if (var->touches_memory)
        lines[next_random(&state) % LINES * WORDS_PER_LINE]++;
      if (var->reads_clock)
        (void)read_ns(var->clock); /* a call: never left out */
    }
    printf("%-40s %6.1f ns per iteration\n", var->name,
           (double)(read_ns(CLOCK_MONOTONIC) - start) / (double)iterations);
  }
  free(lines);
  return 0;
}
