/*
 * soak-uv: twheel timers under load in a live libuv loop.
 *
 *   soak-uv [--timers N] [--seconds S] [--rate R] [--small] ... (--help)
 *
 * Defaults: 1,000,000 tw_uv timers for 60 s, 500,000 resets per second.
 * A plain uv_timer_t repeating every --tick-ms (1 ms) drives the load: each
 * time it runs it re-arms a batch of random timers, paced to --rate, with
 * random stops and starts among them; time passes between batches, and the
 * loop blocks in poll in between, as a server's does (--tick-ms 0: a
 * uv_idle_t drives every iteration instead and the loop never blocks).
 * Callbacks restart their own timer or start and stop others. Every callback
 * checks uv_now(loop) (and uv_hrtime()) against the deadline recorded at its
 * arming, uv_now(loop) + timeout; a repeating timer's re-arm is checked at
 * uv_now(loop) + repeat. At the end the driver stops starting timers,
 * pulls the near ones into a short drain window, lets them fire and checks
 * that every arming fired exactly once, was stopped or replaced, or is still
 * pending far in the future. See soak.h for the ledger.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include <twheel-uv.h>

#include "soak.h"

#define SAMPLES_PER_ITERATION 16 /* timers whose adapter state is compared */

static struct soak S;
static uv_loop_t loop;
static tw_uv *D;
static tw_uv_timer_t *T; /* timer i is T[i]; the soak's record is S.recs[i] */
static uv_timer_t tick;  /* the driver, or: */
static uv_idle_t idle;   /* the driver with --tick-ms 0 */
static int status = 2;   /* until the run completes */

static uint64_t now_ns(void) {
  return uv_now(&loop) * SOAK_NS_PER_MS;
}

static void on_fire(tw_uv_timer_t *h);

/* After `call` (tw_uv_timer_start or _again) of timer i returned rc:
 * records an arming due in `ms`, repeating every `repeat` ms. */
static void record_arming(size_t i, const char *call, int rc, uint64_t ms,
                          uint64_t repeat) {
  if (rc != 0) {
    soak_violation(&S, SOAK_V_API, "%s(%zu): %s", call, i, uv_strerror(rc));
    return;
  }
  soak_armed(&S, i, (uv_now(&loop) + ms) * SOAK_NS_PER_MS,
             repeat * SOAK_NS_PER_MS);
}

static void arm(size_t i, struct soak_arm a) {
  uint64_t ms = a.timeout_us / 1000, repeat = a.period_us / 1000;
  int rc = tw_uv_timer_start(&T[i], on_fire, ms, repeat);
  record_arming(i, "tw_uv_timer_start", rc, ms, repeat);
}

static void stop(size_t i) {
  int rc = tw_uv_timer_stop(&T[i]);
  if (rc != 0)
    soak_violation(&S, SOAK_V_API, "tw_uv_timer_stop(%zu): %s", i,
                   uv_strerror(rc));
  soak_stopped(&S, i);
}

/* uv_timer_again(): a repeating timer re-armed at uv_now + repeat. */
static void again(size_t i) {
  uint64_t repeat = tw_uv_timer_get_repeat(&T[i]);
  int rc = tw_uv_timer_again(&T[i]);
  record_arming(i, "tw_uv_timer_again", rc, repeat, repeat);
}

static const struct soak_ops ops = {arm, stop, again};

static void on_fire(tw_uv_timer_t *h) {
  size_t i = (size_t)(h - T);
  uint64_t now = uv_now(&loop);
  uint64_t repeat = tw_uv_timer_get_repeat(h);
  int armed = S.recs[i].armed;

  soak_fired(&S, i, now * SOAK_NS_PER_MS, uv_hrtime());
  if (repeat) { /* re-armed before the callback at now + repeat */
    if (!tw_uv_timer_is_active(h) || tw_uv_timer_get_due_in(h) != repeat)
      soak_violation(&S, SOAK_V_REPEAT,
                     "timer %zu: repeat %llu ms, active %d, due in %llu ms", i,
                     (unsigned long long)repeat, tw_uv_timer_is_active(h),
                     (unsigned long long)tw_uv_timer_get_due_in(h));
    if (armed)
      soak_rearmed(&S, i, (now + repeat) * SOAK_NS_PER_MS, 0);
  } else if (tw_uv_timer_is_active(h)) {
    soak_violation(&S, SOAK_V_STATE,
                   "one-shot timer %zu is active in its own callback", i);
  }
  soak_after_fire(&S, i, repeat != 0);
}

/* Compares the adapter's view of a few random timers with the ledger. */
static void sample_state(void) {
  uint64_t now = uv_now(&loop);
  for (int k = 0; k < SAMPLES_PER_ITERATION; k++) {
    size_t i = soak_pick_timer(&S);
    const struct soak_rec *r = &S.recs[i];
    int active = tw_uv_timer_is_active(&T[i]);
    uint64_t due = tw_uv_timer_get_due_in(&T[i]);
    uint64_t want = r->deadline / SOAK_NS_PER_MS;

    if (active != r->armed)
      soak_violation(
          &S, SOAK_V_STATE, "timer %zu: adapter says %s, the soak expects %s",
          i, active ? "active" : "inactive", r->armed ? "armed" : "not armed");
    else if (active && want > now && due != want - now)
      soak_violation(&S, SOAK_V_STATE,
                     "timer %zu: due in %llu ms, the soak expects %llu ms", i,
                     (unsigned long long)due, (unsigned long long)(want - now));
  }
}

static int is_active(size_t i) {
  return tw_uv_timer_is_active(&T[i]);
}

static void finish(void) {
  tw_stats stats;
  tw_uv_stats(D, &stats);
  status =
      soak_finish(&S, now_ns(), &stats, tw_count(tw_uv_wheel(D)), is_active);
  for (size_t i = 0; i < S.opt.timers; i++)
    tw_uv_timer_stop(&T[i]);
  uv_idle_stop(&idle);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_close((uv_handle_t *)&idle, NULL);
  tw_uv_close(D, NULL);
}

static void on_finish(uv_idle_t *handle) {
  (void)handle;
  finish();
}

static void drive(void) {
  enum soak_phase before = S.phase;
  uint64_t quota = soak_tick(&S, uv_hrtime(), tw_uv_wheel(D));

  if (before == SOAK_RUN && S.phase != SOAK_RUN)
    soak_start_drain(&S, now_ns());
  if (S.phase == SOAK_DONE) {
    /* Check from the idle phase: it runs after the timer phase at the same
     * uv_now, so every deadline <= uv_now must have fired by then. */
    uv_timer_stop(&tick);
    uv_idle_stop(&idle);
    uv_idle_start(&idle, on_finish);
    return;
  }
  sample_state();
  soak_drive(&S, quota, tw_uv_wheel(D));
}

static void on_tick(uv_timer_t *handle) {
  (void)handle;
  drive();
}

static void on_idle(uv_idle_t *handle) {
  (void)handle;
  drive();
}

int main(int argc, char **argv) {
  struct soak_opts opt;
  int rc = soak_parse(&opt, argc, argv, "soak-uv");

  if (rc != 0)
    return rc > 0 ? 0 : 2;
  if (soak_init(&S, &opt, "soak-uv", &ops) != 0)
    return 2;
  T = calloc(opt.timers, sizeof *T);
  if (!T || uv_loop_init(&loop) != 0 || tw_uv_init(&loop, &D) != 0) {
    fprintf(stderr, "soak-uv: setup failed\n");
    return 2;
  }
  uv_update_time(&loop);
  S.setup_ns = uv_hrtime();
  for (size_t i = 0; i < opt.timers; i++) {
    tw_uv_timer_init(D, &T[i]);
    arm(i, soak_pick(&S));
  }
  S.setup_ns = uv_hrtime() - S.setup_ns;
  uv_timer_init(&loop, &tick);
  uv_idle_init(&loop, &idle);
  if (opt.tick_ms)
    uv_timer_start(&tick, on_tick, opt.tick_ms, opt.tick_ms);
  else
    uv_idle_start(&idle, on_idle);
  rc = uv_run(&loop, UV_RUN_DEFAULT);
  if (status != 2 && (rc != 0 || uv_loop_close(&loop) != 0)) {
    fprintf(stderr, "soak-uv: the loop did not end cleanly\n");
    status = 1;
  }
  if (S.phase != SOAK_DONE)
    fprintf(stderr, "soak-uv: the run did not complete\n");
  free(T);
  soak_free(&S);
  return status;
}
