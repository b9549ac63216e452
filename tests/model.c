/*
 * The reference model: each rule of DESIGN.md in the most direct form.
 * No levels, no slots, no laziness: a timer is its deadline and its
 * sequence number, and "what is due" is a scan of every timer.
 */
#include "model.h"

#include <errno.h>
#include <stdlib.h>

#include <twheel.h>

#define MODEL_MAX_DEADLINE (TW_NEVER - 1)

int model_init(model *m, size_t n, uint64_t now) {
  *m = (model){.now = now, .n = n};
  m->timers = calloc(n ? n : 1, sizeof *m->timers);
  m->firing = calloc(n ? n : 1, sizeof *m->firing);
  if (!m->timers || !m->firing) {
    model_free(m);
    return -1;
  }
  return 0;
}

void model_free(model *m) {
  free(m->timers);
  free(m->firing);
  m->timers = NULL;
  m->firing = NULL;
}

void model_new_wheel(model *m, uint64_t now) {
  for (size_t i = 0; i < m->n; i++) {
    m->timers[i].active = 0;
    m->timers[i].collected = 0;
  }
  m->count = 0;
  m->now = now;
}

static void disarm(model *m, size_t id) {
  model_timer *t = &m->timers[id];
  if (t->active)
    m->count--;
  t->active = 0;
  t->collected = 0;
}

void model_timer_init(model *m, size_t id) {
  model_timer *t = &m->timers[id];
  disarm(m, id);
  t->started = 0;
  t->collected = 0;
  t->repeat = 0;
  t->fixed_rate = 0;
}

void model_set_fixed_rate(model *m, size_t id, int fixed_rate) {
  m->timers[id].fixed_rate = fixed_rate != 0;
}

int model_fixed_rate(const model *m, size_t id) {
  return m->timers[id].fixed_rate;
}

void model_break(model *m) {
  m->broken = 1;
}

/* Rule 3: deadlines saturate at TW_NEVER - 1. */
static uint64_t saturating_add(uint64_t base, uint64_t delta) {
  if (delta > MODEL_MAX_DEADLINE - base || base > MODEL_MAX_DEADLINE)
    return MODEL_MAX_DEADLINE;
  return base + delta;
}

/* Rules 2, 4, 5: arming forgets the old deadline, counts as the latest
 * start, and takes the timer out of the advance running now. */
static void arm(model *m, size_t id, uint64_t deadline) {
  model_timer *t = &m->timers[id];
  if (!t->active)
    m->count++;
  t->active = 1;
  t->collected = 0;
  t->deadline = deadline > MODEL_MAX_DEADLINE ? MODEL_MAX_DEADLINE : deadline;
  t->seq = m->next_seq++;
}

void model_start(model *m, size_t id, uint64_t timeout, uint64_t repeat) {
  model_start_at(m, id, saturating_add(m->now, timeout), repeat);
}

void model_start_at(model *m, size_t id, uint64_t deadline, uint64_t repeat) {
  m->timers[id].started = 1;
  m->timers[id].repeat = repeat;
  arm(m, id, deadline);
}

void model_stop(model *m, size_t id) {
  disarm(m, id);
}

/* Rule 9: libuv's uv_timer_again. */
int model_again(model *m, size_t id) {
  model_timer *t = &m->timers[id];
  if (!t->started)
    return -EINVAL;
  if (t->repeat)
    arm(m, id, saturating_add(m->now, t->repeat));
  return 0;
}

void model_set_repeat(model *m, size_t id, uint64_t repeat) {
  m->timers[id].repeat = repeat;
}

int model_is_active(const model *m, size_t id) {
  return m->timers[id].active;
}

uint64_t model_deadline(const model *m, size_t id) {
  return m->timers[id].active ? m->timers[id].deadline : TW_NEVER;
}

uint64_t model_repeat(const model *m, size_t id) {
  return m->timers[id].repeat;
}

size_t model_count(const model *m) {
  return m->count;
}

int model_check_count(const model *m) {
  size_t count = 0;
  for (size_t i = 0; i < m->n; i++)
    count += m->timers[i].active ? 1 : 0;
  return count == m->count;
}

uint64_t model_now(const model *m) {
  return m->now;
}

uint64_t model_earliest(const model *m) {
  uint64_t earliest = TW_NEVER;
  for (size_t i = 0; i < m->n; i++)
    if (m->timers[i].active && m->timers[i].deadline < earliest)
      earliest = m->timers[i].deadline;
  return earliest;
}

struct due {
  uint64_t deadline;
  uint64_t seq;
  size_t id;
};

/* Rule 2: deadline order, equal deadlines by latest start. */
static int due_cmp(const void *a, const void *b) {
  const struct due *x = a, *y = b;
  if (x->deadline != y->deadline)
    return x->deadline < y->deadline ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return 0;
}

/* Rules 1, 2, 7: clamp now, then everything due by it, in firing order. */
void model_advance_begin(model *m, uint64_t now, size_t max_fire) {
  struct due *due = malloc((m->n ? m->n : 1) * sizeof *due);
  size_t len = 0;

  if (!due)
    abort();
  if (now > m->now)
    m->now = now;
  for (size_t i = 0; i < m->n; i++) {
    model_timer *t = &m->timers[i];
    if (t->active && t->deadline <= m->now) {
      due[len].deadline = t->deadline;
      due[len].seq = t->seq;
      due[len].id = i;
      len++;
    }
  }
  qsort(due, len, sizeof *due, due_cmp);
  for (size_t i = 0; i < len; i++) {
    m->firing[i] = due[i].id;
    m->timers[due[i].id].collected = 1;
  }
  free(due);
  m->firing_len = len;
  m->firing_pos = 0;
  m->max_fire = max_fire;
  m->ran = 0;
  m->advancing = 1;
  m->broken = 0;
}

/* Rules 5-7: only what was collected and not since stopped or re-armed
 * fires; a repeating timer is re-armed at now + repeat before its
 * callback, a one-shot timer is inactive during it. */
int model_advance_next(model *m, size_t *id) {
  if (m->ran >= m->max_fire || m->broken)
    return 0;
  while (m->firing_pos < m->firing_len) {
    size_t i = m->firing[m->firing_pos++];
    model_timer *t = &m->timers[i];
    if (!t->collected)
      continue;
    disarm(m, i);
    m->last_deadline = t->deadline;
    if (t->repeat) {
      /* Rule 6: now + repeat; a fixed rate keeps the period unless the
       * next one has already passed. */
      uint64_t next = saturating_add(t->deadline, t->repeat);
      if (!t->fixed_rate || next < m->now)
        next = saturating_add(m->now, t->repeat);
      arm(m, i, next);
    }
    m->ran++;
    *id = i;
    return 1;
  }
  return 0;
}

int model_advance_pending(const model *m) {
  for (size_t i = m->firing_pos; i < m->firing_len; i++)
    if (m->timers[m->firing[i]].collected)
      return 1;
  return 0;
}

size_t model_advance_end(model *m) {
  for (size_t i = 0; i < m->firing_len; i++)
    m->timers[m->firing[i]].collected = 0;
  m->firing_len = m->firing_pos = 0;
  m->advancing = 0;
  return m->ran;
}
