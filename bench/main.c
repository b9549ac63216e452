/*
 * twbench: runs one cell and prints one line of key=value pairs.
 *
 *   twbench --list
 *   twbench --impl NAME --scenario reset|startstop|burst|spread|memory|stall
 *           --n N [--m M] [--warmup W] [--batch B] [--seed S] [--lead-ms L]
 *           [--stall-edge E] [--stall-warmup W] [--stall-ticks T]
 *           [--stall-period P]
 *
 * bench/run calls it once per cell, in a fresh process each time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

extern const struct bench_impl bench_impl_floor, bench_impl_core,
    bench_impl_corepoll, bench_impl_heap;
#if defined(BENCH_HAVE_UV)
#include <uv.h>
extern const struct bench_impl bench_impl_uv;
#endif
#if defined(BENCH_HAVE_EVENT)
#include <event2/event.h>
extern const struct bench_impl bench_impl_ev, bench_impl_evc;
#endif
#if defined(BENCH_HAVE_TWUV)
extern const struct bench_impl bench_impl_twuv;
#endif
#if defined(BENCH_HAVE_TWEV)
extern const struct bench_impl bench_impl_twev;
#endif

static const struct bench_impl *const impls[] = {
#if defined(BENCH_HAVE_UV)
    &bench_impl_uv,
#endif
#if defined(BENCH_HAVE_EVENT)
    &bench_impl_ev,   &bench_impl_evc,
#endif
    &bench_impl_core, &bench_impl_corepoll,
#if defined(BENCH_HAVE_TWUV)
    &bench_impl_twuv,
#endif
#if defined(BENCH_HAVE_TWEV)
    &bench_impl_twev,
#endif
    &bench_impl_heap, &bench_impl_floor,
};
#define N_IMPLS (sizeof impls / sizeof impls[0])

/* ---- key=value output ---- */

static char line[4096];
static size_t line_len;

static void append(const char *key, const char *value) {
  int w =
      snprintf(line + line_len, sizeof line - line_len, " %s=%s", key, value);
  if (w > 0 && (size_t)w < sizeof line - line_len)
    line_len += (size_t)w;
}

void bench_kv(const char *key, double value) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.6g", value);
  append(key, buf);
}

void bench_kv_str(const char *key, const char *value) {
  append(key, value);
}

void bench_kv_adapter(const tw_stats *before, const tw_stats *after) {
  bench_kv("adapter_wakeups", (double)(after->wakeups - before->wakeups));
  bench_kv("adapter_empty",
           (double)(after->empty_wakeups - before->empty_wakeups));
  bench_kv("adapter_rearms", (double)(after->rearms - before->rearms));
  bench_kv("adapter_maintenance",
           (double)(after->maintenance - before->maintenance));
}

static void list(void) {
#if defined(__clang__)
  printf("# clang %s\n", __clang_version__);
#elif defined(__GNUC__)
  printf("# gcc %s\n", __VERSION__);
#endif
#if defined(BENCH_HAVE_UV)
  printf("# libuv %s\n", uv_version_string());
#endif
#if defined(BENCH_HAVE_EVENT)
  printf("# libevent %s\n", event_get_version());
#endif
  for (size_t i = 0; i < N_IMPLS; i++) {
    const struct bench_impl *b = impls[i];
    printf("%s|%s|", b->name, b->label);
    for (unsigned bit = 1; bench_scenario_name(bit); bit <<= 1)
      if (b->scenarios & bit)
        printf("%s,", bench_scenario_name(bit));
    printf("\n");
  }
}

static uint64_t number(const char *s) {
  char *end;
  double v = strtod(s, &end); /* accepts 1e6 */
  if (*end || v < 0) {
    fprintf(stderr, "twbench: not a number: %s\n", s);
    exit(2);
  }
  return (uint64_t)v;
}

int main(int argc, char **argv) {
  struct bench_params p = {0};
  struct bench_out o = {0, 0};
  const char *name = NULL;
  const struct bench_impl *impl = NULL;
  unsigned bit;
  int given_m = 0, given_warmup = 0, given_batch = 0;

  p.seed = 0x9e3779b97f4a7c15ull;
  p.lead_ms = 1000;
  p.stall_edge = 1u << 18;
  p.stall_warmup = BENCH_IDLE_MS;
  p.stall_ticks = 3 * 4096;
  p.stall_period = 10000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--list")) {
      list();
      return 0;
    }
    if (!v) {
      fprintf(stderr, "twbench: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--impl"))
      name = v;
    else if (!strcmp(a, "--scenario"))
      p.scenario = v;
    else if (!strcmp(a, "--n"))
      p.n = (uint32_t)number(v);
    else if (!strcmp(a, "--m"))
      p.m = number(v), given_m = 1;
    else if (!strcmp(a, "--warmup"))
      p.warmup = number(v), given_warmup = 1;
    else if (!strcmp(a, "--batch"))
      p.batch = (uint32_t)number(v), given_batch = 1;
    else if (!strcmp(a, "--seed"))
      p.seed = number(v);
    else if (!strcmp(a, "--lead-ms"))
      p.lead_ms = number(v);
    else if (!strcmp(a, "--stall-edge"))
      p.stall_edge = number(v);
    else if (!strcmp(a, "--stall-warmup"))
      p.stall_warmup = (uint32_t)number(v);
    else if (!strcmp(a, "--stall-ticks"))
      p.stall_ticks = (uint32_t)number(v);
    else if (!strcmp(a, "--stall-period"))
      p.stall_period = (uint32_t)number(v);
    else {
      fprintf(stderr, "twbench: unknown option %s\n", a);
      return 2;
    }
  }
  for (size_t i = 0; name && i < N_IMPLS; i++)
    if (!strcmp(impls[i]->name, name))
      impl = impls[i];
  if (!impl || !p.scenario || p.n == 0) {
    fprintf(stderr, "usage: twbench --impl NAME --scenario S --n N [...]"
                    " (twbench --list for the names)\n");
    return 2;
  }
  bit = bench_scenario_bit(p.scenario);
  if (!(impl->scenarios & bit)) {
    fprintf(stderr, "twbench: %s has no scenario %s\n", impl->name, p.scenario);
    return 2;
  }

  /* Defaults (bench/run passes them all explicitly). */
  if (!given_batch)
    p.batch = 256;
  if (!given_m)
    p.m = p.n >= 500000 ? 4ull * p.n : 2000000;
  if (!given_warmup)
    p.warmup = 20ull * p.n;
  p.m = (p.m + p.batch - 1) / p.batch * p.batch;
  /* Each connection is reset every BENCH_RESET_EVERY_MS on average. */
  p.tick_ns = (uint64_t)p.batch * BENCH_RESET_EVERY_MS * BENCH_NS_PER_MS / p.n;

  int rc = bench_scenario_run(impl, &p, &o);
  printf("impl=%s scenario=%s n=%u m=%llu warmup=%llu batch=%u tick_ns=%llu "
         "seed=%llu ns=%.6g ops=%llu ns_per_op=%.6g%s\n",
         impl->name, p.scenario, p.n, (unsigned long long)p.m,
         (unsigned long long)p.warmup, p.batch, (unsigned long long)p.tick_ns,
         (unsigned long long)p.seed, o.ns, (unsigned long long)o.ops,
         o.ops ? o.ns / (double)o.ops : 0.0, line);
  return rc;
}
