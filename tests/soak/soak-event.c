/*
 * soak-event: twheel timers under load in a live libevent loop.
 *
 *   soak-event [--timers N] [--seconds S] [--rate R] [--small] ... (--help)
 *
 * The libevent twin of soak-uv (same options, same report): 1,000,000
 * tw_ev_timers, one-shot or EV_PERSIST, driven by a plain libevent
 * EV_PERSIST timer event every --tick-ms (1 ms; with 0, a timer event
 * re-added with a zero timeout from its own callback, so it runs in every
 * loop iteration and the loop never blocks). Timeouts carry random
 * microseconds. The never-early check is the adapter's promise: a callback
 * runs no earlier than CLOCK_MONOTONIC read before the add plus the
 * timeval (in ns; the adapter rounds up to the ms). An EV_PERSIST timer's
 * next run is checked against its previous deadline plus the period.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <twheel-event.h>

#include "soak.h"

#define SAMPLES_PER_ITERATION 16 /* timers whose adapter state is compared */

static struct soak S;
static struct event_base *base;
static tw_ev *D;
static tw_ev_timer *T;   /* timer i is T[i]; the soak's record is S.recs[i] */
static uint8_t *persist; /* T[i] was assigned with EV_PERSIST */
static struct event *driver;
static int status = 2; /* until the run completes */

static void on_fire(evutil_socket_t fd, short what, void *arg);

static void stop(size_t i) {
  if (tw_ev_timer_del(&T[i]) != 0)
    soak_violation(&S, SOAK_V_API, "tw_ev_timer_del(%zu) failed", i);
  soak_stopped(&S, i);
}

/* An EV_PERSIST arming uses its period as the timeval, as libevent does. */
static void arm(size_t i, struct soak_arm a) {
  uint8_t want = a.period_us > 0;
  uint64_t us = want ? a.period_us : a.timeout_us;
  struct timeval tv;
  uint64_t t0;

  if (persist[i] != want) { /* as with libevent: delete, then assign */
    if (tw_ev_timer_del(&T[i]) != 0 ||
        tw_ev_timer_assign(&T[i], D, want ? EV_PERSIST : 0, on_fire, &T[i]) !=
            0) {
      soak_violation(&S, SOAK_V_API, "tw_ev_timer_assign(%zu) failed", i);
      return;
    }
    persist[i] = want;
  }
  tv.tv_sec = (time_t)(us / 1000000);
  tv.tv_usec = (suseconds_t)(us % 1000000);
  t0 = soak_now_ns();
  if (tw_ev_timer_add(&T[i], &tv) != 0) {
    soak_violation(&S, SOAK_V_API, "tw_ev_timer_add(%zu) failed", i);
    return;
  }
  soak_armed(&S, i, t0 + us * 1000, want ? us * 1000 : 0);
}

static const struct soak_ops ops = {arm, stop, NULL}; /* no again */

static void on_fire(evutil_socket_t fd, short what, void *arg) {
  size_t i = (size_t)((tw_ev_timer *)arg - T);
  uint64_t now = soak_now_ns();
  const struct soak_rec *rec = &S.recs[i];
  int armed = rec->armed;
  uint64_t next = rec->deadline + rec->period;

  if (fd != -1 || what != EV_TIMEOUT)
    soak_violation(&S, SOAK_V_API, "timer %zu called with fd %d, what %d", i,
                   (int)fd, (int)what);
  soak_fired(&S, i, now, now);
  if (persist[i]) {
    /* Re-armed before the callback at the previous deadline + period, or
     * at the wheel's now + period if that has passed: never before either
     * our previous bound + period or the wheel's now. */
    uint64_t wheel_now = tw_now(tw_ev_wheel(D)) * SOAK_NS_PER_MS;
    if (tw_ev_timer_pending(&T[i], NULL) != EV_TIMEOUT)
      soak_violation(&S, SOAK_V_REPEAT,
                     "EV_PERSIST timer %zu not pending in its callback", i);
    if (armed)
      soak_rearmed(&S, i, next > wheel_now ? next : wheel_now, 1);
  } else if (tw_ev_timer_pending(&T[i], NULL)) {
    soak_violation(&S, SOAK_V_STATE,
                   "one-shot timer %zu is pending in its own callback", i);
  }
  soak_after_fire(&S, i, persist[i]);
}

static int is_active(size_t i) {
  return tw_ev_timer_pending(&T[i], NULL) == EV_TIMEOUT;
}

/* Compares the adapter's view of a few random timers with the ledger. */
static void sample_state(void) {
  for (int k = 0; k < SAMPLES_PER_ITERATION; k++) {
    size_t i = soak_pick_timer(&S);
    int active = is_active(i);
    if (active != S.recs[i].armed)
      soak_violation(&S, SOAK_V_STATE,
                     "timer %zu: adapter says %s, the soak expects %s", i,
                     active ? "pending" : "not pending",
                     S.recs[i].armed ? "armed" : "not armed");
  }
}

/*
 * The end check runs from the driver, which libevent may call before the
 * adapter's event in the same iteration; it still holds exactly because
 * of the drain: every deadline left is either within the first half of the
 * drain window (so due at least drain/2 ago) or far in the future.
 */
static void finish(void) {
  tw_stats stats;
  tw_ev_stats(D, &stats);
  status = soak_finish(&S, soak_now_ns(), &stats, tw_count(tw_ev_wheel(D)),
                       is_active);
  for (size_t i = 0; i < S.opt.timers; i++)
    tw_ev_timer_del(&T[i]); /* the wheel empties: the loop can end */
}

static void on_drive(evutil_socket_t fd, short what, void *arg) {
  static const struct timeval zero = {0, 0};
  enum soak_phase before = S.phase;
  uint64_t quota = soak_tick(&S, soak_now_ns(), tw_ev_wheel(D));
  (void)fd;
  (void)what;
  (void)arg;

  if (before == SOAK_RUN && S.phase != SOAK_RUN)
    soak_start_drain(&S, soak_now_ns());
  if (S.phase == SOAK_DONE) {
    finish();
    event_del(driver); /* the loop ends */
    return;
  }
  sample_state();
  soak_drive(&S, quota, tw_ev_wheel(D));
  if (S.opt.tick_ms == 0 && event_add(driver, &zero) != 0)
    soak_violation(&S, SOAK_V_API, "event_add(driver) failed");
}

/* libevent's default base, or one whose clock is the precise monotonic
 * clock rather than the coarse one (4 ms steps on a 250 Hz kernel). */
static struct event_base *new_base(int precise_timer) {
  struct event_config *config;
  struct event_base *b;
  if (!precise_timer)
    return event_base_new();
  if (!(config = event_config_new()))
    return NULL;
  b = event_config_set_flag(config, EVENT_BASE_FLAG_PRECISE_TIMER) == 0
          ? event_base_new_with_config(config)
          : NULL;
  event_config_free(config);
  return b;
}

int main(int argc, char **argv) {
  struct soak_opts opt;
  struct timeval period;
  int rc = soak_parse(&opt, argc, argv, "soak-event");

  if (rc != 0)
    return rc > 0 ? 0 : 2;
  if (soak_init(&S, &opt, "soak-event", &ops) != 0)
    return 2;
  T = calloc(opt.timers, sizeof *T);
  persist = malloc(opt.timers); /* touched below, like T */
  if (!T || !persist || !(base = new_base(opt.precise_timer)) ||
      !(D = tw_ev_new(base)) ||
      !(driver = event_new(base, -1, opt.tick_ms ? EV_PERSIST : 0, on_drive,
                           NULL))) {
    fprintf(stderr, "soak-event: setup failed\n");
    return 2;
  }
  S.setup_ns = soak_now_ns();
  for (size_t i = 0; i < opt.timers; i++) {
    persist[i] = 0;
    tw_ev_timer_assign(&T[i], D, 0, on_fire, &T[i]);
    arm(i, soak_pick(&S));
  }
  S.setup_ns = soak_now_ns() - S.setup_ns;
  period.tv_sec = (time_t)(opt.tick_ms / 1000);
  period.tv_usec = (suseconds_t)(opt.tick_ms % 1000 * 1000);
  event_add(driver, &period);
  rc = event_base_dispatch(base);
  if (status != 2 && rc < 0) {
    fprintf(stderr, "soak-event: the loop did not end cleanly (%d)\n", rc);
    status = 1;
  }
  if (S.phase != SOAK_DONE)
    fprintf(stderr, "soak-event: the run did not complete\n");
  tw_ev_free(D);
  event_free(driver);
  event_base_free(base);
  libevent_global_shutdown();
  free(persist);
  free(T);
  soak_free(&S);
  return status;
}
