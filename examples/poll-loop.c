/* The smallest complete use of twheel: a poll() loop with one timeout for
 * any number of timers, kept by a tw_driver (the rule the libuv and
 * libevent adapters use too). Real time in ms from CLOCK_MONOTONIC. */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdio.h>
#include <time.h>

#include <twheel.h>

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct request { /* a connection would embed its timer the same way */
  tw_timer timeout;
  uint64_t due;
  int id;
};

static int early; /* callbacks that ran before their deadline: must stay 0 */

static void on_timeout(tw_timer *t) {
  struct request *r = t->data;
  uint64_t now = now_ms();
  early += now < r->due;
  printf("request %d timed out, %d ms late\n", r->id, (int)(now - r->due));
}

static void on_tick(tw_timer *t) {
  printf("tick, %zu timers active\n", tw_count(t->data) - 1);
  if (tw_count(t->data) == 1) /* only the tick is left */
    tw_timer_stop(t->data, t);
}

/* The loop's one timer is the poll() timeout: it reads driver.armed. */
static int arm(tw_driver *d, uint64_t at, int from_expiry) {
  (void)d, (void)at, (void)from_expiry;
  return 0;
}

int main(void) {
  tw_wheel *wheel = tw_wheel_new(now_ms());
  tw_driver driver;
  struct request requests[5];
  tw_timer tick;

  if (!wheel || tw_driver_init(&driver, wheel, arm) != 0)
    return 1;
  for (int i = 0; i < 5; i++) {
    requests[i].id = i;
    tw_timer_init(&requests[i].timeout);
    requests[i].timeout.data = &requests[i];
    requests[i].due = tw_now(wheel) + 30 + 40 * (uint64_t)i;
    tw_timer_start_at(wheel, &requests[i].timeout, on_timeout, requests[i].due,
                      0);
    tw_driver_started(&driver, requests[i].due);
  }
  tw_timer_init(&tick);
  tick.data = wheel;
  tw_timer_start(wheel, &tick, on_tick, 50, 50);
  tw_driver_started(&driver, tw_timer_deadline(&tick));

  while (tw_count(wheel) > 0) {
    uint64_t next = driver.armed, now = now_ms();
    int wait = next <= now ? 0 : next - now > 60000 ? 60000 : (int)(next - now);
    poll(NULL, 0, wait); /* your sockets go here */
    if (now_ms() >= driver.armed)
      tw_driver_expired(&driver, now_ms());
  }
  tw_wheel_free(wheel);
  printf("done, %d early\n", early);
  return early != 0;
}
