/*
 * Test helper: timers with ids whose callbacks append to a log, so a test
 * states the exact expected firing sequence.
 */
#ifndef TW_TEST_RECORD_H
#define TW_TEST_RECORD_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <twheel.h>

#define LOG_MAX 4096

struct probe {
  tw_timer timer;
  int id;
  void (*then)(struct probe *p); /* optional extra action in the callback */
  void *arg;
};

struct fired {
  int id;
  uint64_t now;      /* tw_now() inside the callback */
  int active;        /* tw_timer_is_active() inside the callback */
  uint64_t deadline; /* tw_timer_deadline() inside the callback */
};

/* The wheel's invariant checker (src/check.c): NULL, or what is wrong. */
const char *tw__check(const tw_wheel *w, int full);

static struct fired log_[LOG_MAX];
static size_t log_len;
static tw_wheel *wheel_;

static void probe_cb(tw_timer *t) {
  struct probe *p = t->data;
  cr_assert_lt(log_len, LOG_MAX);
  log_[log_len].id = p->id;
  log_[log_len].now = tw_now(wheel_);
  log_[log_len].active = tw_timer_is_active(t);
  log_[log_len].deadline = tw_timer_deadline(t);
  log_len++;
  if (p->then)
    p->then(p);
}

static void probes_init(struct probe *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tw_timer_init(&p[i].timer);
    p[i].timer.data = &p[i];
    p[i].id = (int)i;
    p[i].then = NULL;
    p[i].arg = NULL;
  }
}

static void start(struct probe *p, uint64_t timeout, uint64_t repeat) {
  cr_assert_eq(tw_timer_start(wheel_, &p->timer, probe_cb, timeout, repeat), 0);
}

static void start_at(struct probe *p, uint64_t deadline) {
  cr_assert_eq(tw_timer_start_at(wheel_, &p->timer, probe_cb, deadline, 0), 0);
}

/* Asserts the log holds exactly these ids, in this order, then clears it. */
static void expect_fired(const int *ids, size_t n) {
  cr_assert_eq(log_len, n, "fired %zu timers, expected %zu", log_len, n);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(log_[i].id, ids[i],
                 "position %zu: timer %d fired, expected %d", i, log_[i].id,
                 ids[i]);
  log_len = 0;
}

#define EXPECT_FIRED(...)                                                      \
  do {                                                                         \
    const int ids_[] = {__VA_ARGS__};                                          \
    expect_fired(ids_, sizeof ids_ / sizeof ids_[0]);                          \
  } while (0)
#define EXPECT_NONE() expect_fired(NULL, 0)

static void wheel_setup(void) {
  log_len = 0;
  wheel_ = tw_wheel_new(0);
  cr_assert_not_null(wheel_);
}

/* Probes are static in the tests: the wheel outlives the test body, and
 * freeing it touches the timers still active. */
static void wheel_teardown(void) {
  tw_wheel_free(wheel_);
  wheel_ = NULL;
}

#endif /* TW_TEST_RECORD_H */
