/*
 * The soak's bookkeeping, shared by soak-uv.c and soak-event.c.
 *
 * The loop-specific program owns the timers and the loop; this file keeps,
 * per timer, what the soak expects of it (one soak_rec), checks every
 * callback against that, and writes the report. It also decides the load,
 * the same for both loops: what the driver and the callbacks do to the
 * timers, through the program's own arm and stop (struct soak_ops).
 *
 * INVARIANT: rec.armed is 1 exactly while the adapter should hold the timer
 * active, and then rec.deadline is a lower bound of the time (ns of the
 * loop's clock) before which it must not fire. Every arming ends in exactly
 * one of: fired, stopped, replaced (re-armed while armed), or, at the end,
 * pending (deadline still in the future) or missing (due and never fired:
 * a violation). The ledger printed at the end must balance.
 *
 * Time is in ns throughout: the libuv program converts uv_now() (ms), the
 * libevent program reads CLOCK_MONOTONIC as its adapter does.
 */
#ifndef TWHEEL_SOAK_H
#define TWHEEL_SOAK_H

#include <stddef.h>
#include <stdint.h>

#include <twheel.h>

#define SOAK_NS_PER_MS UINT64_C(1000000)
#define SOAK_NS_PER_S UINT64_C(1000000000)
#define SOAK_GAP_LIMIT_MS 5 /* a loop gap longer than this is counted */

struct soak_opts {
  size_t timers;          /* --timers: timers live in the loop */
  unsigned seconds;       /* --seconds: the loaded phase */
  uint64_t rate;          /* --rate: target resets per second */
  unsigned warmup;        /* --warmup: seconds before RSS must stay flat */
  unsigned drain_ms;      /* --drain: end phase, no new starts */
  unsigned tick_ms;       /* --tick-ms: driver period; 0: every iteration */
  uint64_t seed;          /* --seed */
  uint64_t rss_margin_kb; /* --rss-margin-kb: allowed growth after warm-up */
  int rss_check;          /* 0 with --no-rss-check */
  unsigned min_rate_pct;  /* --min-rate-pct: fail below this share of rate */
  unsigned cross_bits;    /* --cross: also load until the loop clock passes
                             a multiple of 2^cross_bits ms (0: off) */
  int quiet;              /* --quiet: no per-second line */
  int precise_timer;      /* --precise-timer: libevent's precise clock */
};

/* A point of the loop's run, or the difference of two: times in ns. */
struct soak_mark {
  uint64_t real_ns, cpu_ns;   /* CLOCK_MONOTONIC, the thread's CPU time */
  uint64_t callbacks_ns;      /* real time inside the timers' callbacks */
  uint64_t fired, moves;      /* callbacks run, timers the wheel moved */
  uint64_t faults, preempted; /* page faults, involuntary context switches */
};

/* What the soak expects of one timer. */
struct soak_rec {
  uint64_t deadline; /* ns: never fire before it (valid while armed) */
  uint64_t period;   /* ns: > 0 for a repeating timer */
  uint8_t armed;     /* expected to fire once at or after deadline */
  uint8_t bound;     /* deadline is only a lower bound: no lateness kept */
};

/* An arming chosen by soak_pick(): times in microseconds. */
struct soak_arm {
  uint64_t timeout_us; /* 0 .. days */
  uint64_t period_us;  /* 0: one-shot */
};

/* What the program does to its timers for the load; each records what it
 * did in the ledger (soak_armed, soak_stopped). */
struct soak_ops {
  void (*arm)(size_t i, struct soak_arm a); /* start or re-arm timer i */
  void (*stop)(size_t i);                   /* stop timer i */
  void (*again)(size_t i); /* re-arm a repeating timer at now + its period
                            * (uv_timer_again); NULL if the loop has none */
};

enum soak_phase { SOAK_RUN, SOAK_DRAIN, SOAK_DONE };

enum soak_violation {
  SOAK_V_EARLY,      /* fired before its deadline by the loop's clock */
  SOAK_V_EARLY_REAL, /* ... or by the real monotonic clock */
  SOAK_V_NOT_ARMED,  /* fired while not armed: a double or a stopped fire */
  SOAK_V_STATE,      /* the adapter's active state disagrees with ours */
  SOAK_V_REPEAT,     /* a repeating timer re-armed at the wrong time */
  SOAK_V_MISSING,    /* due at the end and never fired */
  SOAK_V_COUNT,      /* adapter counters disagree with what we saw */
  SOAK_V_API,        /* an adapter call failed */
  SOAK_V_RSS,        /* RSS grew after warm-up */
  SOAK_V_RATE,       /* the reset rate was not reached */
  SOAK_V_KINDS
};

struct soak_counts {
  uint64_t resets;      /* driver: re-arm of an active timer */
  uint64_t starts;      /* driver: start of an inactive timer */
  uint64_t stops;       /* driver: stop of an active timer */
  uint64_t cb_restarts; /* callbacks: restart of their own timer */
  uint64_t cb_others;   /* callbacks: start of another timer */
  uint64_t cb_stops;    /* callbacks: stop of a timer (own or other) */
  uint64_t pulled;      /* drain: far deadlines brought inside the window */
  uint64_t armings;     /* every arming, repeat re-arms included */
  uint64_t fired;       /* callbacks run */
  uint64_t stopped;     /* armings ended by a stop */
  uint64_t replaced;    /* armings ended by a re-arm */
  uint64_t pending;     /* end: armed, deadline in the future */
  uint64_t missing;     /* end: armed, deadline passed */
  uint64_t iterations;  /* driver calls (loop iterations) */
};

/* Lateness histogram: 10 us buckets below 10 ms, 1 ms buckets below 10 s. */
#define SOAK_FINE_US 10000u
#define SOAK_FINE_STEP 10u
#define SOAK_COARSE_US 10000000u
#define SOAK_COARSE_STEP 1000u
#define SOAK_BUCKETS                                                           \
  (SOAK_FINE_US / SOAK_FINE_STEP +                                             \
   (SOAK_COARSE_US - SOAK_FINE_US) / SOAK_COARSE_STEP + 1)

struct soak {
  struct soak_opts opt;
  const char *name; /* "soak-uv", "soak-event" */
  const struct soak_ops *ops;
  struct soak_rec *recs;
  uint64_t rng;
  enum soak_phase phase;
  struct soak_counts n;
  uint64_t violations[SOAK_V_KINDS];
  unsigned reported; /* violation messages printed so far */

  uint64_t setup_ns;           /* the program: arming every timer, once */
  uint64_t start_ns, drain_ns; /* real time of the run's start, drain's */
  uint64_t last_tick_s;        /* whole seconds sampled so far */
  struct soak_counts tick_n;   /* counts at the previous sample */

  uint64_t *rss_kb; /* one sample per second */
  size_t rss_len, rss_cap;

  struct soak_late {
    uint64_t *buckets; /* SOAK_BUCKETS counters */
    uint64_t count, max_ns, sum_us;
  } late[2]; /* callbacks in the loaded phase, in the drain */
  /* The loop's gaps under load: from the end of one driver run (its own
   * resets done) to the start of the next, the time the loop spends on its
   * timers, their callbacks, its I/O and idle. Measured in real time and in
   * the CPU time of the loop's thread (the gap less its idle, though with
   * any time the VM's host took the CPU away unseen), each with what
   * happened in it: the longest gap in real time and the longest in CPU
   * time; how many real-time gaps exceeded SOAK_GAP_LIMIT_MS; the longest
   * run of the driver itself. */
  uint64_t callback_start_ns, callbacks_ns; /* the current one's, all so far */
  struct soak_mark gap_from;                /* where the current gap started */
  struct soak_mark gap_max, gap_cpu_max;    /* differences: the gaps */
  uint64_t gaps_over_limit, drive_max_ns;
  uint64_t cross_ms;       /* --cross: the multiple of 2^B to pass */
  uint64_t crossed_ns;     /* real time it was passed at; 0: not yet */
  uint64_t unmeasured;     /* callbacks of bound deadlines */
  uint64_t pending_min_ns; /* earliest deadline still pending at the end */
};

/* Parses argv into *o (defaults first). Returns 0, 1 after --help, or -1
 * after printing a usage error. */
int soak_parse(struct soak_opts *o, int argc, char **argv, const char *name);

/* Allocates and touches every array (so RSS is flat from the start); the
 * load will act through `ops`. 0 or -1 (out of memory, message printed). */
int soak_init(struct soak *s, const struct soak_opts *o, const char *name,
              const struct soak_ops *ops);
void soak_free(struct soak *s);

uint64_t soak_rand(struct soak *s);
/* Uniform in [0, n); n > 0. */
uint64_t soak_below(struct soak *s, uint64_t n);
/* 1 with probability pct / 100. */
int soak_chance(struct soak *s, unsigned pct);
/* A random timer index. */
size_t soak_pick_timer(struct soak *s);
/* A random arming: the mix of short, idle, zero, far and repeating timers. */
struct soak_arm soak_pick(struct soak *s);

/* ---- the load, through s->ops ---- */

/* The driver's work in one iteration: `quota` resets of random armed timers
 * (some repeating ones by again), with starts of unarmed timers and stops
 * mixed in. */
void soak_drive(struct soak *s, uint64_t quota, const tw_wheel *wheel);
/* What the callback of timer i does after its checks, as a server's do:
 * restarts its own timer, starts or stops another (nothing once the loaded
 * phase is over). `repeating`: timer i repeats. The callback's time, from
 * soak_fired to the end of this, is counted. */
void soak_after_fire(struct soak *s, size_t i, int repeating);
/* The start of the drain, at loop time now_ns: repeating timers are
 * stopped, one-shots due after the drain window but not far (an hour) are
 * pulled into it, the rest are left alone. */
void soak_start_drain(struct soak *s, uint64_t now_ns);

/* Records an arming of timer i: replaces the previous one if armed. */
void soak_armed(struct soak *s, size_t i, uint64_t deadline, uint64_t period);
/* Records a stop of timer i (no-op when not armed). */
void soak_stopped(struct soak *s, size_t i);
/*
 * Records a callback of timer i at loop time `loop_ns` (the clock the
 * adapter compares deadlines with) and real monotonic time `real_ns`:
 * checks it was armed and not early, and ends that arming. A repeating
 * timer's next arming is then recorded with soak_rearmed().
 */
void soak_fired(struct soak *s, size_t i, uint64_t loop_ns, uint64_t real_ns);
/* Records the re-arm of a repeating timer before its callback; `bound`:
 * the true deadline may be later (then its lateness is not measured). */
void soak_rearmed(struct soak *s, size_t i, uint64_t deadline, int bound);

/* Counts a violation and prints its message (the first few only). */
void soak_violation(struct soak *s, enum soak_violation kind, const char *fmt,
                    ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* CLOCK_MONOTONIC, ns: the real time of the soak's reports. */
uint64_t soak_now_ns(void);

/*
 * The driver calls this once per loop iteration with the real time
 * (soak_now_ns(), or uv_hrtime(), which reads the same clock). It
 * samples RSS and prints progress every second (active = timers the wheel
 * holds), moves the phase on, and returns how many resets the driver
 * should do now to keep to the target rate (0 outside SOAK_RUN).
 */
uint64_t soak_tick(struct soak *s, uint64_t real_ns, const tw_wheel *wheel);

/*
 * End of the run, at loop time `loop_ns`: classifies every record as
 * pending or missing, checks `is_active(i)` agrees with it (state of the
 * adapter), compares the adapter's counters, the wheel's count, RSS and
 * rate, and prints the report. Returns the exit status: 0 pass, 1 fail.
 */
int soak_finish(struct soak *s, uint64_t loop_ns, const tw_stats *stats,
                size_t wheel_count, int (*is_active)(size_t i));

/* Resident set size in kB from /proc/self/statm; 0 if unreadable. */
uint64_t soak_rss_kb(void);

#endif /* TWHEEL_SOAK_H */
