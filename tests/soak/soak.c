/*
 * The soak's bookkeeping: options, PRNG, the per-timer ledger, the load
 * (through the program's soak_ops), lateness, RSS samples and the report.
 * Nothing here knows about a loop.
 */
#define _POSIX_C_SOURCE 200809L
#include "soak.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_MESSAGES 20 /* violation messages printed; the rest counted */
#define FAR_MS (UINT64_C(3600) * 1000) /* at least an hour: pending at end */

static const char *const kind_names[SOAK_V_KINDS] = {
    [SOAK_V_EARLY] = "early (loop clock)",
    [SOAK_V_EARLY_REAL] = "early (real clock)",
    [SOAK_V_NOT_ARMED] = "fired while not armed (double or stopped)",
    [SOAK_V_STATE] = "adapter state disagrees",
    [SOAK_V_REPEAT] = "repeat re-armed at the wrong time",
    [SOAK_V_MISSING] = "due and never fired",
    [SOAK_V_COUNT] = "counters disagree",
    [SOAK_V_API] = "adapter call failed",
    [SOAK_V_RSS] = "RSS grew after warm-up",
    [SOAK_V_RATE] = "reset rate not reached",
};

/* ---- options ----------------------------------------------------------- */

static void usage(FILE *f, const char *name) {
  fprintf(f,
          "usage: %s [options]\n"
          "  --timers N         timers in the loop (1000000)\n"
          "  --seconds S        loaded phase (60)\n"
          "  --rate R           target resets per second (500000)\n"
          "  --warmup S         seconds before RSS must stay flat\n"
          "                     (seconds/6, 1..10)\n"
          "  --drain MS         end phase without new starts (3000)\n"
          "  --tick-ms T        the driver runs every T ms (1); 0: in every\n"
          "                     loop iteration, which then never blocks\n"
          "  --seed N           PRNG seed (from the clock)\n"
          "  --rss-margin-kb K  allowed RSS growth after warm-up (1024)\n"
          "  --no-rss-check     report RSS, never fail on it\n"
          "  --min-rate-pct P   fail below P%% of --rate (95; 0: never)\n"
          "  --cross B          keep the load on until the loop clock has\n"
          "                     passed a multiple of 2^B ms, and 5 s more\n"
          "                     (18: up to 4.5 min; 0: off; default 18)\n"
          "  --small            10000 timers, 5 s, 20000 resets/s, 1000 ms "
          "drain\n"
          "  --quiet            no line per second\n"
          "  --precise-timer    soak-event: the base has\n"
          "                     EVENT_BASE_FLAG_PRECISE_TIMER (libevent's\n"
          "                     clock moves by the ns, not by kernel ticks);\n"
          "                     soak-uv ignores it\n"
          "Exit status: 0 pass, 1 a check failed, 2 bad usage or setup.\n",
          name);
}

/* Parses a count with an optional k/M suffix; -1 if malformed. */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  if (!s || *s < '0' || *s > '9')
    return -1;
  v = strtoull(s, &end, 10);
  if (*end == 'k' || *end == 'K') {
    v *= 1000;
    end++;
  } else if (*end == 'm' || *end == 'M') {
    v *= 1000000;
    end++;
  }
  if (*end != '\0')
    return -1;
  *out = (uint64_t)v;
  return 0;
}

int soak_parse(struct soak_opts *o, int argc, char **argv, const char *name) {
  int warmup_set = 0;
  const char *where = "";
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  *o = (struct soak_opts){
      .timers = 1000000,
      .seconds = 60,
      .rate = 500000,
      .drain_ms = 3000,
      .tick_ms = 1,
      .seed = (uint64_t)ts.tv_sec * SOAK_NS_PER_S + (uint64_t)ts.tv_nsec,
      .rss_margin_kb = 1024,
      .rss_check = 1,
      .min_rate_pct = 95,
      .cross_bits = 18,
  };
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *val = NULL;
    const char *eq = strchr(arg, '=');
    char key[32];
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    uint64_t v = 0;

    where = arg;
    if (len >= sizeof key)
      goto bad;
    memcpy(key, arg, len);
    key[len] = '\0';
    if (!strcmp(key, "--help") || !strcmp(key, "-h")) {
      usage(stdout, name);
      return 1;
    }
    if (!strcmp(key, "--small")) {
      o->timers = 10000;
      o->seconds = 5;
      o->rate = 20000;
      o->drain_ms = 1000;
      o->cross_bits = 0;
      continue;
    }
    if (!strcmp(key, "--quiet")) {
      o->quiet = 1;
      continue;
    }
    if (!strcmp(key, "--precise-timer")) {
      o->precise_timer = 1;
      continue;
    }
    if (!strcmp(key, "--no-rss-check")) {
      o->rss_check = 0;
      continue;
    }
    val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (parse_u64(val, &v) != 0)
      goto bad;
    if (!strcmp(key, "--timers") && v > 0 && v <= UINT32_MAX)
      o->timers = (size_t)v;
    else if (!strcmp(key, "--seconds") && v > 0 && v <= 86400)
      o->seconds = (unsigned)v;
    else if (!strcmp(key, "--rate") && v > 0 && v <= UINT64_C(100000000))
      o->rate = v;
    else if (!strcmp(key, "--warmup") && v <= 86400) {
      o->warmup = (unsigned)v;
      warmup_set = 1;
    } else if (!strcmp(key, "--drain") && v >= 100 && v <= 600000)
      o->drain_ms = (unsigned)v;
    else if (!strcmp(key, "--tick-ms") && v <= 1000)
      o->tick_ms = (unsigned)v;
    else if (!strcmp(key, "--seed"))
      o->seed = v;
    else if (!strcmp(key, "--rss-margin-kb"))
      o->rss_margin_kb = v;
    else if (!strcmp(key, "--min-rate-pct") && v <= 100)
      o->min_rate_pct = (unsigned)v;
    else if (!strcmp(key, "--cross") && v <= 30)
      o->cross_bits = (unsigned)v;
    else
      goto bad;
  }
  if (!warmup_set) {
    o->warmup = o->seconds / 6;
    o->warmup = o->warmup < 1 ? 1 : o->warmup > 10 ? 10 : o->warmup;
  }
  return 0;
bad:
  fprintf(stderr, "%s: bad argument '%s'\n", name, where);
  usage(stderr, name);
  return -1;
}

/* ---- setup ------------------------------------------------------------- */

int soak_init(struct soak *s, const struct soak_opts *o, const char *name,
              const struct soak_ops *ops) {
  memset(s, 0, sizeof *s);
  s->opt = *o;
  s->name = name;
  s->ops = ops;
  s->rng = o->seed;
  s->pending_min_ns = UINT64_MAX;
  /* One RSS sample per second of run and drain, plus slack. */
  s->rss_cap = (size_t)o->seconds + o->drain_ms / 1000 + 16;
  if (o->cross_bits)
    s->rss_cap += ((size_t)1 << o->cross_bits) / 1000 + 5;
  s->recs = malloc(o->timers * sizeof *s->recs);
  s->rss_kb = malloc(s->rss_cap * sizeof *s->rss_kb);
  s->late[0].buckets = malloc(SOAK_BUCKETS * sizeof *s->late[0].buckets);
  s->late[1].buckets = malloc(SOAK_BUCKETS * sizeof *s->late[1].buckets);
  if (!s->recs || !s->rss_kb || !s->late[0].buckets || !s->late[1].buckets) {
    fprintf(stderr, "%s: out of memory for %zu timers\n", name, o->timers);
    soak_free(s);
    return -1;
  }
  /* Touch everything now: RSS after warm-up must not grow from this. */
  memset(s->recs, 0, o->timers * sizeof *s->recs);
  memset(s->rss_kb, 0, s->rss_cap * sizeof *s->rss_kb);
  for (int k = 0; k < 2; k++)
    memset(s->late[k].buckets, 0, SOAK_BUCKETS * sizeof *s->late[k].buckets);
  return 0;
}

void soak_free(struct soak *s) {
  free(s->recs);
  free(s->rss_kb);
  free(s->late[0].buckets);
  free(s->late[1].buckets);
  s->recs = NULL;
  s->rss_kb = NULL;
  s->late[0].buckets = s->late[1].buckets = NULL;
}

/* ---- randomness -------------------------------------------------------- */

uint64_t soak_rand(struct soak *s) { /* splitmix64 */
  uint64_t z = (s->rng += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

uint64_t soak_below(struct soak *s, uint64_t n) {
  return soak_rand(s) % n; /* bias < n / 2^64: irrelevant here */
}

int soak_chance(struct soak *s, unsigned pct) {
  return soak_below(s, 100) < pct;
}

size_t soak_pick_timer(struct soak *s) {
  return (size_t)soak_below(s, s->opt.timers);
}

/* A random duration of `ms` whole ms plus a random sub-ms part. */
static uint64_t us_of(struct soak *s, uint64_t ms) {
  return ms * 1000 + soak_below(s, 1000);
}

/*
 * The mix, per 1000 armings: 20 due at once (0), 280 short (1 ms..1 s,
 * request timeouts: most fire), 680 idle (1..30 s: most are reset first,
 * the path the wheel makes O(1)), 10 far (1 h..10 days: top levels, pending
 * at the end), 10 repeating (period 10 ms..1 s).
 */
struct soak_arm soak_pick(struct soak *s) {
  struct soak_arm a = {0, 0};
  uint64_t r = soak_below(s, 1000);

  if (r < 20)
    a.timeout_us = 0;
  else if (r < 300)
    a.timeout_us = us_of(s, soak_below(s, 1000));
  else if (r < 980)
    a.timeout_us = us_of(s, 1000 + soak_below(s, 29000));
  else if (r < 990)
    a.timeout_us = us_of(s, FAR_MS + soak_below(s, 240 * FAR_MS));
  else {
    a.period_us = us_of(s, 10 + soak_below(s, 990));
    a.timeout_us = soak_below(s, a.period_us + 1);
  }
  return a;
}

/* ---- the ledger -------------------------------------------------------- */

void soak_violation(struct soak *s, enum soak_violation kind, const char *fmt,
                    ...) {
  va_list ap;
  s->violations[kind]++;
  if (s->reported >= MAX_MESSAGES)
    return;
  fprintf(stderr, "%s: VIOLATION %s: ", s->name, kind_names[kind]);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (++s->reported == MAX_MESSAGES)
    fprintf(stderr, "%s: (further violation messages suppressed)\n", s->name);
}

void soak_armed(struct soak *s, size_t i, uint64_t deadline, uint64_t period) {
  struct soak_rec *r = &s->recs[i];
  if (r->armed)
    s->n.replaced++;
  r->armed = 1;
  r->bound = 0;
  r->deadline = deadline;
  r->period = period;
  s->n.armings++;
}

void soak_stopped(struct soak *s, size_t i) {
  struct soak_rec *r = &s->recs[i];
  if (!r->armed)
    return;
  r->armed = 0;
  s->n.stopped++;
}

static void record_lateness(struct soak_late *l, uint64_t late_ns) {
  uint64_t us = late_ns / 1000;
  size_t b;

  l->count++;
  if (late_ns > l->max_ns)
    l->max_ns = late_ns;
  l->sum_us += us;
  if (us < SOAK_FINE_US)
    b = (size_t)(us / SOAK_FINE_STEP);
  else if (us < SOAK_COARSE_US)
    b = SOAK_FINE_US / SOAK_FINE_STEP +
        (size_t)((us - SOAK_FINE_US) / SOAK_COARSE_STEP);
  else
    b = SOAK_BUCKETS - 1;
  l->buckets[b]++;
}

/* A callback of timer i at `at_ns` by the `clock` clock: never before its
 * deadline. */
static void check_not_early(struct soak *s, size_t i, enum soak_violation kind,
                            const char *clock, uint64_t at_ns) {
  uint64_t deadline = s->recs[i].deadline;
  if (at_ns < deadline)
    soak_violation(s, kind,
                   "timer %zu fired at %.3f ms (%s clock), %.3f ms before "
                   "its deadline %.3f ms",
                   i, (double)at_ns / 1e6, clock,
                   (double)(deadline - at_ns) / 1e6, (double)deadline / 1e6);
}

void soak_fired(struct soak *s, size_t i, uint64_t loop_ns, uint64_t real_ns) {
  s->callback_start_ns = real_ns;
  struct soak_rec *r = &s->recs[i];

  s->n.fired++;
  if (!r->armed) {
    soak_violation(s, SOAK_V_NOT_ARMED,
                   "timer %zu fired at %.3f ms (loop clock) while not armed", i,
                   (double)loop_ns / 1e6);
    return;
  }
  check_not_early(s, i, SOAK_V_EARLY, "loop", loop_ns);
  check_not_early(s, i, SOAK_V_EARLY_REAL, "real", real_ns);
  if (r->bound)
    s->unmeasured++;
  else
    record_lateness(&s->late[s->phase != SOAK_RUN],
                    real_ns > r->deadline ? real_ns - r->deadline : 0);
  r->armed = 0;
}

void soak_rearmed(struct soak *s, size_t i, uint64_t deadline, int bound) {
  struct soak_rec *r = &s->recs[i];
  r->armed = 1;
  r->bound = (uint8_t)(bound != 0);
  r->deadline = deadline;
  s->n.armings++;
}

/* ---- the load ---------------------------------------------------------- */

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * SOAK_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t soak_now_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

static struct soak_mark mark(const struct soak *s, uint64_t real_ns,
                             const tw_wheel *wheel);
void soak_drive(struct soak *s, uint64_t quota, const tw_wheel *wheel) {
  const struct soak_ops *op = s->ops;
  uint64_t start_ns = soak_now_ns();
  while (quota > 0) {
    size_t i = soak_pick_timer(s);
    if (!s->recs[i].armed) {
      op->arm(i, soak_pick(s));
      s->n.starts++;
    } else if (soak_chance(s, 4)) {
      op->stop(i);
      s->n.stops++;
    } else {
      if (op->again && s->recs[i].period && soak_chance(s, 20))
        op->again(i);
      else
        op->arm(i, soak_pick(s));
      s->n.resets++;
      quota--;
    }
  }
  /* the next gap starts when this work ends */
  s->gap_from = mark(s, soak_now_ns(), wheel);
  if (s->gap_from.real_ns - start_ns > s->drive_max_ns)
    s->drive_max_ns = s->gap_from.real_ns - start_ns;
}

static void after_fire(struct soak *s, size_t i, int repeating);

void soak_after_fire(struct soak *s, size_t i, int repeating) {
  after_fire(s, i, repeating);
  s->callbacks_ns += soak_now_ns() - s->callback_start_ns;
}

static void after_fire(struct soak *s, size_t i, int repeating) {
  const struct soak_ops *op = s->ops;
  if (s->phase != SOAK_RUN)
    return; /* draining: nothing new starts */

  uint64_t r = soak_below(s, 100);
  if (repeating) {
    if (r < 5) {
      op->stop(i);
      s->n.cb_stops++;
    } else if (r < 10) {
      op->arm(i, soak_pick(s));
      s->n.cb_restarts++;
    } else if (r < 15) {
      op->arm(soak_pick_timer(s), soak_pick(s));
      s->n.cb_others++;
    }
    return;
  }
  if (r < 70) { /* the idle-timeout pattern: rearm on activity */
    op->arm(i, soak_pick(s));
    s->n.cb_restarts++;
  }
  if (r >= 60 && r < 70) { /* ... and touch another connection */
    op->arm(soak_pick_timer(s), soak_pick(s));
    s->n.cb_others++;
  } else if (r >= 70 && r < 75) { /* close another connection */
    size_t j = soak_pick_timer(s);
    s->n.cb_stops += s->recs[j].armed;
    op->stop(j);
  }
}

/* An arming that falls due within the first half of the drain window. */
static struct soak_arm pick_drain(struct soak *s) {
  struct soak_arm a = {0, 0};
  a.timeout_us = soak_below(s, (uint64_t)s->opt.drain_ms * 1000 / 2);
  return a;
}

void soak_start_drain(struct soak *s, uint64_t now_ns) {
  for (size_t i = 0; i < s->opt.timers; i++) {
    const struct soak_rec *r = &s->recs[i];
    if (!r->armed)
      continue;
    if (r->period) {
      s->ops->stop(i);
    } else if (r->deadline > now_ns + s->opt.drain_ms / 2 * SOAK_NS_PER_MS &&
               r->deadline < now_ns + FAR_MS / 2 * SOAK_NS_PER_MS) {
      s->ops->arm(i, pick_drain(s));
      s->n.pulled++;
    }
  }
}

/* ---- progress ---------------------------------------------------------- */

uint64_t soak_rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  long page = sysconf(_SC_PAGESIZE);

  if (!f)
    return 0;
  if (fscanf(f, "%llu %llu", &size, &resident) != 2)
    resident = 0;
  fclose(f);
  return (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096) / 1024;
}

static void sample(struct soak *s, uint64_t second, size_t active) {
  uint64_t rss = soak_rss_kb();
  const struct soak_counts *a = &s->n, *b = &s->tick_n;

  if (s->rss_len < s->rss_cap)
    s->rss_kb[s->rss_len++] = rss;
  if (!s->opt.quiet)
    printf(
        "%s: t=%3llus %-5s resets %7llu/s starts %6llu/s stops %6llu/s "
        "cb-starts %6llu/s fired %7llu/s active %8zu rss %7.1f MB\n",
        s->name, (unsigned long long)second,
        s->phase == SOAK_RUN ? "run" : "drain",
        (unsigned long long)(a->resets - b->resets),
        (unsigned long long)(a->starts - b->starts),
        (unsigned long long)(a->stops + a->cb_stops - b->stops - b->cb_stops),
        (unsigned long long)(a->cb_restarts + a->cb_others - b->cb_restarts -
                             b->cb_others),
        (unsigned long long)(a->fired - b->fired), active, (double)rss / 1024);
  fflush(stdout);
  s->tick_n = s->n;
}

/* The loop now, seen from its thread (which is the process's only busy
 * one: the rusage counts are the process's). */
static struct soak_mark mark(const struct soak *s, uint64_t real_ns,
                             const tw_wheel *wheel) {
  struct rusage ru;
  struct soak_mark m = {.real_ns = real_ns,
                        .cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID),
                        .callbacks_ns = s->callbacks_ns,
                        .fired = s->n.fired,
                        .moves = tw_moves(wheel)};
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    m.faults = (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
    m.preempted = (uint64_t)ru.ru_nivcsw;
  }
  return m;
}

/* What happened from `a` to `b`. */
static struct soak_mark mark_diff(struct soak_mark b, struct soak_mark a) {
  return (struct soak_mark){.real_ns = b.real_ns - a.real_ns,
                            .cpu_ns = b.cpu_ns - a.cpu_ns,
                            .callbacks_ns = b.callbacks_ns - a.callbacks_ns,
                            .fired = b.fired - a.fired,
                            .moves = b.moves - a.moves,
                            .faults = b.faults - a.faults,
                            .preempted = b.preempted - a.preempted};
}

uint64_t soak_tick(struct soak *s, uint64_t real_ns, const tw_wheel *wheel) {
  uint64_t elapsed, target, due, cap;
  size_t active = tw_count(wheel);

  s->n.iterations++;
  if (s->start_ns == 0) {
    s->start_ns = real_ns;
    s->tick_n = s->n;
    if (s->opt.cross_bits) {
      uint64_t ms = real_ns / SOAK_NS_PER_MS;
      s->cross_ms = ((ms >> s->opt.cross_bits) + 1) << s->opt.cross_bits;
    }
  }
  if (s->cross_ms && !s->crossed_ns && real_ns / SOAK_NS_PER_MS >= s->cross_ms)
    s->crossed_ns = real_ns;
  if (s->phase == SOAK_RUN && s->gap_from.real_ns) {
    struct soak_mark gap = mark_diff(mark(s, real_ns, wheel), s->gap_from);
    if (gap.real_ns > s->gap_max.real_ns)
      s->gap_max = gap;
    if (gap.cpu_ns > s->gap_cpu_max.cpu_ns)
      s->gap_cpu_max = gap;
    s->gaps_over_limit += gap.real_ns > SOAK_GAP_LIMIT_MS * SOAK_NS_PER_MS;
  } /* soak_drive, which follows under load, starts the next gap */
  elapsed = real_ns - s->start_ns;
  if (elapsed / SOAK_NS_PER_S > s->last_tick_s) {
    s->last_tick_s = elapsed / SOAK_NS_PER_S;
    sample(s, s->last_tick_s, active);
  }
  if (s->phase == SOAK_RUN && elapsed >= s->opt.seconds * SOAK_NS_PER_S &&
      (!s->cross_ms ||
       (s->crossed_ns && real_ns - s->crossed_ns >= 5 * SOAK_NS_PER_S))) {
    s->phase = SOAK_DRAIN;
    s->drain_ns = real_ns;
  }
  if (s->phase == SOAK_DRAIN &&
      real_ns - s->drain_ns >= s->opt.drain_ms * SOAK_NS_PER_MS)
    s->phase = SOAK_DONE;
  if (s->phase != SOAK_RUN)
    return 0;
  /* Pace to the target: catch up on a slow iteration, by at most 10 ms. */
  target = elapsed / 1000 * s->opt.rate / 1000000;
  due = target > s->n.resets ? target - s->n.resets : 0;
  cap = s->opt.rate / 100 > 64 ? s->opt.rate / 100 : 64;
  return due < cap ? due : cap;
}

/* ---- the report -------------------------------------------------------- */

/* The upper edge, in ms, of the bucket holding the q-quantile of lateness. */
static double late_quantile(const struct soak_late *l, double q) {
  uint64_t total = l->count, seen = 0, want;
  if (total == 0)
    return 0;
  want = (uint64_t)((double)total * q);
  if (want >= total)
    want = total - 1;
  for (size_t b = 0; b < SOAK_BUCKETS; b++) {
    seen += l->buckets[b];
    if (seen > want) {
      if (b < SOAK_FINE_US / SOAK_FINE_STEP)
        return (double)((b + 1) * SOAK_FINE_STEP) / 1000;
      if (b < SOAK_BUCKETS - 1)
        return (double)(SOAK_FINE_US + (b + 1 - SOAK_FINE_US / SOAK_FINE_STEP) *
                                           SOAK_COARSE_STEP) /
               1000;
      return (double)l->max_ns / 1e6;
    }
  }
  return (double)l->max_ns / 1e6;
}

static void check_rss(struct soak *s, uint64_t *first, uint64_t *last,
                      uint64_t *max) {
  size_t from = s->opt.warmup > 0 ? s->opt.warmup - 1 : 0; /* t = warmup */
  *first = *last = *max = 0;
  if (s->rss_len == 0)
    return;
  if (from >= s->rss_len)
    from = s->rss_len - 1;
  *first = *max = s->rss_kb[from];
  for (size_t k = from; k < s->rss_len; k++)
    if (s->rss_kb[k] > *max)
      *max = s->rss_kb[k];
  *last = s->rss_kb[s->rss_len - 1];
  if (s->opt.rss_check && *max > *first + s->opt.rss_margin_kb)
    soak_violation(s, SOAK_V_RSS,
                   "RSS %llu kB at t=%us (end of warm-up) grew to %llu kB "
                   "(+%llu kB > %llu kB allowed)",
                   (unsigned long long)*first, s->opt.warmup,
                   (unsigned long long)*max,
                   (unsigned long long)(*max - *first),
                   (unsigned long long)s->opt.rss_margin_kb);
}

/* One gap: its real and CPU time, and what the loop did in it. */
static void print_gap(const char *what, const struct soak_mark *gap) {
  printf("             %s: %.2f ms real, %.2f ms CPU time of the loop's "
         "thread;\n"
         "               %llu callbacks, taking %.2f ms; %llu timers moved; "
         "%llu page faults, %llu preemptions\n",
         what, (double)gap->real_ns / 1e6, (double)gap->cpu_ns / 1e6,
         (unsigned long long)gap->fired, (double)gap->callbacks_ns / 1e6,
         (unsigned long long)gap->moves, (unsigned long long)gap->faults,
         (unsigned long long)gap->preempted);
}

int soak_finish(struct soak *s, uint64_t loop_ns, const tw_stats *stats,
                size_t wheel_count, int (*is_active)(size_t i)) {
  const struct soak_counts *n = &s->n;
  uint64_t rss_first, rss_last, rss_max, total_v = 0;
  double run_s = (double)(s->drain_ns - s->start_ns) / 1e9;
  double rate = n->resets / (run_s > 0 ? run_s : 1);

  for (size_t i = 0; i < s->opt.timers; i++) {
    const struct soak_rec *r = &s->recs[i];
    int active = is_active(i);
    if (active != r->armed)
      soak_violation(
          s, SOAK_V_STATE, "timer %zu: adapter says %s, the soak expects %s", i,
          active ? "active" : "inactive", r->armed ? "armed" : "not armed");
    if (!r->armed)
      continue;
    if (r->deadline <= loop_ns) {
      s->n.missing++;
      soak_violation(s, SOAK_V_MISSING,
                     "timer %zu due at %.3f ms never fired (now %.3f ms)", i,
                     (double)r->deadline / 1e6, (double)loop_ns / 1e6);
    } else {
      s->n.pending++;
      if (r->deadline < s->pending_min_ns)
        s->pending_min_ns = r->deadline;
    }
  }
  if (n->armings != n->fired - s->violations[SOAK_V_NOT_ARMED] + n->stopped +
                        n->replaced + n->pending + n->missing)
    soak_violation(s, SOAK_V_COUNT, "the ledger does not balance");
  if (stats->fired != n->fired)
    soak_violation(
        s, SOAK_V_COUNT, "the adapter ran %llu callbacks, the soak saw %llu",
        (unsigned long long)stats->fired, (unsigned long long)n->fired);
  if (wheel_count != n->pending + n->missing)
    soak_violation(s, SOAK_V_COUNT,
                   "the wheel holds %zu timers, the soak expects %llu",
                   wheel_count, (unsigned long long)(n->pending + n->missing));
  check_rss(s, &rss_first, &rss_last, &rss_max);
  if (s->opt.min_rate_pct &&
      rate * 100 < (double)s->opt.rate * s->opt.min_rate_pct)
    soak_violation(s, SOAK_V_RATE,
                   "%.0f resets/s, below %u%% of the target %llu/s", rate,
                   s->opt.min_rate_pct, (unsigned long long)s->opt.rate);

  printf("\n%s: %zu timers, %u s loaded + %u ms drain, target %llu "
         "resets/s, seed %llu\n",
         s->name, s->opt.timers, s->opt.seconds, s->opt.drain_ms,
         (unsigned long long)s->opt.rate, (unsigned long long)s->opt.seed);
  printf("  load       %llu resets in %.1f s = %.0f resets/s; starts %llu, "
         "stops %llu (driver)\n",
         (unsigned long long)n->resets, run_s, rate,
         (unsigned long long)n->starts, (unsigned long long)n->stops);
  printf("             callbacks restarted their own timer %llu, started "
         "another %llu, stopped %llu\n",
         (unsigned long long)n->cb_restarts, (unsigned long long)n->cb_others,
         (unsigned long long)n->cb_stops);
  printf("             %llu loop iterations (%.0f resets each); %llu deadlines "
         "beyond "
         "the drain window pulled into it\n",
         (unsigned long long)n->iterations,
         n->iterations ? (double)n->resets / (double)n->iterations : 0.0,
         (unsigned long long)n->pulled);
  printf("             the first arming of all %zu timers took %.0f ms "
         "before the loop ran\n",
         s->opt.timers, (double)s->setup_ns / 1e6);
  printf("  fired      %llu callbacks (adapter: %llu), %.0f/s\n",
         (unsigned long long)n->fired, (unsigned long long)stats->fired,
         (double)n->fired /
             ((double)(s->opt.seconds * 1000 + s->opt.drain_ms) / 1000));
  printf("  ledger     %llu armings = %llu fired + %llu stopped + %llu "
         "replaced + %llu pending + %llu missing\n",
         (unsigned long long)n->armings,
         (unsigned long long)(n->fired - s->violations[SOAK_V_NOT_ARMED]),
         (unsigned long long)n->stopped, (unsigned long long)n->replaced,
         (unsigned long long)n->pending, (unsigned long long)n->missing);
  if (n->pending)
    printf("  pending    %llu timers still armed at the end, the earliest "
           "due in %.1f s (wheel holds %zu)\n",
           (unsigned long long)n->pending,
           (double)(s->pending_min_ns - loop_ns) / 1e9, wheel_count);
  for (int k = 0; k < 2; k++) {
    const struct soak_late *l = &s->late[k];
    printf("  %-10s median %.2f ms, p99 %.2f ms, max %.2f ms, mean %.2f ms "
           "(%llu callbacks%s)\n",
           k ? "  in drain" : "lateness", late_quantile(l, 0.5),
           late_quantile(l, 0.99), (double)l->max_ns / 1e6,
           l->count ? (double)l->sum_us / (double)l->count / 1000 : 0.0,
           (unsigned long long)l->count,
           k ? "" : " under load; real clock - deadline");
  }
  if (s->unmeasured)
    printf("             (%llu callbacks of EV_PERSIST re-arms not measured: "
           "their deadline is only bounded)\n",
           (unsigned long long)s->unmeasured);
  printf("  loop gaps  from one driver run's end to the next one's start, "
         "under load: %llu over %d ms\n",
         (unsigned long long)s->gaps_over_limit, SOAK_GAP_LIMIT_MS);
  print_gap("longest", &s->gap_max);
  print_gap("longest in CPU time", &s->gap_cpu_max);
  printf("             the driver's own resets took up to %.2f ms a run\n",
         (double)s->drive_max_ns / 1e6);
  if (s->cross_ms)
    printf("  crossed    loop clock %llu ms = %llu x 2^%u, %.1f s into the "
           "run, under load\n",
           (unsigned long long)s->cross_ms,
           (unsigned long long)(s->cross_ms >> s->opt.cross_bits),
           s->opt.cross_bits, (double)(s->crossed_ns - s->start_ns) / 1e9);
  printf("  wakeups    %llu, empty %llu (%.2f%%), maintenance %llu, loop timer "
         "re-arms %llu\n",
         (unsigned long long)stats->wakeups,
         (unsigned long long)stats->empty_wakeups,
         stats->wakeups
             ? 100.0 * (double)stats->empty_wakeups / (double)stats->wakeups
             : 0.0,
         (unsigned long long)stats->maintenance,
         (unsigned long long)stats->rearms);
  printf("  rss        after %u s warm-up: first %.1f MB, last %.1f MB, max "
         "%.1f MB (growth %+lld kB, limit %llu kB%s)\n",
         s->opt.warmup, (double)rss_first / 1024, (double)rss_last / 1024,
         (double)rss_max / 1024, (long long)(rss_max - rss_first),
         (unsigned long long)s->opt.rss_margin_kb,
         s->opt.rss_check ? "" : ", not checked");
  printf("  checks     ");
  for (int k = 0; k < SOAK_V_KINDS; k++)
    total_v += s->violations[k];
  if (total_v == 0)
    printf("no violation\n");
  else
    for (int k = 0; k < SOAK_V_KINDS; k++)
      if (s->violations[k])
        printf("%s: %llu; ", kind_names[k],
               (unsigned long long)s->violations[k]);
  printf("%s%s\n", total_v ? "\n" : "", total_v ? "FAIL" : "PASS");
  fflush(stdout);
  return total_v ? 1 : 0;
}
