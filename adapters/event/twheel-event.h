/*
 * twheel-event: libevent timers on a twheel, behind one timer event.
 *
 * One tw_ev per struct event_base owns one wheel (in milliseconds) and one
 * libevent timer event. That event is armed for the wheel's next expiry,
 * re-armed only when the earliest deadline moves earlier, a wakeup consumed
 * it, or a zero timeout is added while it is not activated (see
 * tw_ev_timer_add), and deleted when the wheel is empty, so
 * event_base_dispatch() returns when nothing else is pending. Any number of
 * tw_ev_timers add exactly one event to the base.
 *
 * The tw_ev_timer_* calls are drop-in replacements for evtimer_* (and for
 * event_assign/event_new with EV_PERSIST and fd -1): the callback is an
 * ordinary event_callback_fn, called as cb(-1, EV_TIMEOUT, arg).
 *
 *   libevent                            twheel-event (d = tw_ev_new(base))
 *   struct event ev                     tw_ev_timer ev
 *   evtimer_assign(&ev, base, cb, arg)  tw_ev_timer_assign(&ev, d, 0, cb, arg)
 *   evtimer_add(&ev, &tv)               tw_ev_timer_add(&ev, &tv)
 *   evtimer_del(&ev)                    tw_ev_timer_del(&ev)
 *   evtimer_pending(&ev, &tv)           tw_ev_timer_pending(&ev, &tv)
 *
 * Time and the never-early promise. A timer's expiry is CLOCK_MONOTONIC
 * read at the add (fresh, never libevent's cached clock) plus the timeval,
 * kept to the nanosecond; tw_ev_timer_pending reports it, as libevent
 * reports its own. The timer runs at that expiry rounded up to a whole
 * millisecond, and a wakeup reads the clock fresh again: a timer never runs
 * before CLOCK_MONOTONIC at its add plus its timeval. It runs late by the
 * rounding (< 1 ms), plus up to one coarse tick (4 ms on a 250 Hz kernel),
 * plus the loop's wake-up latency: the one event's wait is measured from
 * CLOCK_MONOTONIC_COARSE, libevent's default clock, which lags the fresh
 * one by up to a tick, so that libevent does not wake it early. In three
 * runs of a test program on 2026-11-29 (a timer re-added for 10-17 ms, 8
 * times; an ASan build), the adapter ran it 2.2-8.7 ms late, and libevent's
 * own timers, which can run a tick early instead (below), 0.1-5.8 ms late.
 * A base made with EVENT_BASE_FLAG_PRECISE_TIMER may likewise wake up to
 * one coarse tick later than it could.
 *
 * Order. Timers due in one wakeup run by deadline (ms), equal deadlines in
 * the order of their latest add (libevent leaves this unspecified).
 *
 * Threads. Like the wheel, a tw_ev and its timers are single-threaded: use
 * them only from the thread running the base's loop.
 *
 * Priorities. The one timer event has the base's default priority; every
 * tw_ev_timer callback runs at that priority.
 *
 * Loop control, as libevent. event_base_loopbreak() from a tw_ev_timer
 * callback takes effect when that callback returns: no other callback runs
 * in that dispatch, and the timers that were due with it stay due and run
 * first, in order, at the next dispatch, before the I/O callbacks it polls
 * (libevent leaves its activated events for the next dispatch too: the
 * adapter's event is activated again). event_base_loopexit(base, NULL) lets
 * the other timers due at that wakeup run first, as libevent runs the
 * events it had activated before the exit. event_base_get_running_event()
 * inside a callback names the adapter's one event.
 *
 * Differences from libevent that remain, on purpose:
 *  - timers only: no fds, signals, event_active(), event_base_once() or
 *    event_remove_timer() (for a timer, tw_ev_timer_del); and no per-timer
 *    priority (see Priorities);
 *  - a timer runs at its expiry rounded up to the ms and never before it;
 *    libevent counts from its cached coarse clock and can run a tick early;
 *  - equal deadlines run in the order of their latest add (see Order);
 *  - event_base_loopcontinue() from a callback takes effect once the other
 *    timers due at that wakeup have run (libevent: when that callback
 *    returns): it has no getter to look at;
 *  - one wakeup does a bounded slice of work (TW_SLICE, twheel.h): with
 *    more than a few thousand timers due at once, the rest run in the next
 *    loop iterations, in order, and more than TW_SLICE due in the same
 *    millisecond run none until all are put in start order, a slice per
 *    iteration (libevent runs them all in one);
 *  - a zero or negative EV_PERSIST period runs once (libevent re-arms a
 *    negative one at every iteration), and a period's sub-millisecond part
 *    is rounded up (libevent keeps the microseconds: a 1.5 ms period runs
 *    every 2 ms here);
 *  - event_base_loop(base, EVLOOP_ONCE) may return after a wakeup of the
 *    adapter's event that ran no timer: a later re-add or a delete leaves
 *    the event armed for the old time (see tw_ev_timer_add's cost and
 *    tw_ev_timer_del), and a wakeup whose first due timer was added after
 *    the event was activated leaves it to the next (see tw_ev_timer_add),
 *    and so does a wakeup that only put in start order more than TW_SLICE
 *    timers due in the same millisecond (above).
 *    Loop with EVLOOP_ONCE until what you wait for ran (libevent's own
 *    timers would block until one of them ran);
 *  - tw_ev_timer_pending returns EV_TIMEOUT or 0, and 0 for NULL;
 *  - an EV_PERSIST timer's next expiry is counted from the time of the
 *    wakeup it runs in (or its previous expiry, while that is not passed),
 *    not from libevent's cached time at its callback's turn: after an
 *    earlier callback of the same wakeup calls
 *    event_base_update_cache_time() and runs past its period, it may run
 *    again at once, where libevent moves it a period on (not fixed);
 *  - arming its event, from an add or at the end of a wakeup, the adapter
 *    refreshes libevent's cached time (event_base_update_cache_time), so
 *    that the wait is counted from the present: a plain event added after
 *    that in the same callback counts its timeout from the refreshed time,
 *    not from the iteration's start (it runs later than with libevent,
 *    never earlier);
 *  - no evthread locking: one thread (see Threads).
 *
 * Errors. Functions return 0 or -1 like libevent's; NULL arguments and an
 * adapter that is being freed give -1 (tw_ev_timer_pending: 0, and
 * tw_ev_timer_del: 0, its timers being inactive already; see there).
 */
#ifndef TWHEEL_EVENT_H
#define TWHEEL_EVENT_H

#include <stdint.h>

#include <event2/event.h>

#include <twheel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tw_ev tw_ev; /* opaque: one per event_base */
typedef struct tw_ev_timer tw_ev_timer;

/*
 * A timer: embed it in your connection struct (tw_ev_timer_assign) or let
 * tw_ev_timer_new allocate it. Every field is private: use the functions.
 * sizeof(tw_ev_timer) is the whole per-timer cost: 80 bytes on LP64 (72
 * before it kept its expiry to the ns for tw_ev_timer_pending), against 128
 * for a struct event.
 */
struct tw_ev_timer {
  tw_timer tw__timer;       /* private: in the adapter's wheel, data is the
                               tw_ev (docs/contract.md, Adapters); EV_PERSIST
                               is its fixed rate, the period (ms) its repeat */
  event_callback_fn tw__cb; /* private: the callback of the assign */
  void *tw__arg;            /* private: and its argument */
  uint64_t tw__expiry;      /* private: ns of CLOCK_MONOTONIC, the add time
                               + the timeval (EV_PERSIST: of this period) */
};

/*
 * Creates the adapter for `base`: one wheel and one (not yet added) timer
 * event, with the priority a new event of that base gets (call
 * event_base_priority_init first if you use priorities). NULL if base is
 * NULL or memory runs out. Free it with tw_ev_free() before
 * event_base_free(base).
 */
TW_EXTERN tw_ev *tw_ev_new(struct event_base *base);

/*
 * Frees the adapter and its timer event. NULL is a no-op; a second call
 * while a free is deferred is a no-op.
 * Every timer becomes inactive at once and is never called again; its
 * memory stays the caller's. Afterwards a timer may only be assigned again
 * (to another adapter), deleted or freed: tw_ev_timer_del, _pending and
 * _free never touch the adapter of an inactive timer.
 * Safe from inside any tw_ev_timer callback of this adapter, including the
 * one running: no other callback of this adapter runs after it, and the
 * memory is released when that callback returns; until then adds give -1.
 * Called anywhere else, the memory is released at once.
 */
TW_EXTERN void tw_ev_free(tw_ev *d);

/*
 * The wheel, for inspection: tw_count(), tw_now(), tw_next_expiry(). Time
 * is in ms of CLOCK_MONOTONIC, and tw_now() is the time of the latest
 * wakeup, not the current time. Starting core timers directly on it is not
 * supported: the adapter would neither arm its event for them nor read
 * the clock fresh for their deadline. NULL for NULL or an adapter being
 * freed (inside the callback that called tw_ev_free).
 */
TW_EXTERN tw_wheel *tw_ev_wheel(tw_ev *d);

/*
 * Copies the adapter's counters about its one timer event into *out:
 * wakeups (the event ran), empty_wakeups (it ran and no timer was due:
 * libevent's coarse clock woke it early, or the earliest timer had been
 * deleted or moved later), fired (tw_ev_timer callbacks run), rearms
 * (the event armed again, activated again after a loopbreak, or deleted:
 * the driver's re-arms, tw_stats; one that found the event activated
 * already touches nothing) and maintenance (wakeups that ran
 * no callback because they only moved timers for the wheel's paced work,
 * put a crowded millisecond in order, or met a fence: tw_stats, twheel.h).
 * -1 for NULL arguments or an adapter being freed.
 */
TW_EXTERN int tw_ev_stats(const tw_ev *d, tw_stats *out);

/*
 * Prepares `t` like evtimer_assign()/event_assign(ev, base, -1, flags, cb,
 * arg). `flags` is 0 or EV_PERSIST (EV_TIMEOUT is accepted and ignored);
 * any other flag, a NULL t, d or cb, or an adapter being freed (inside
 * the callback that called tw_ev_free) give -1. An adapter whose memory
 * tw_ev_free released is gone: passing it is undefined.
 * As with libevent, do not assign a timer that is pending: delete it first.
 */
TW_EXTERN int tw_ev_timer_assign(tw_ev_timer *t, tw_ev *d, short flags,
                                 event_callback_fn cb, void *arg);

/* malloc + tw_ev_timer_assign, like event_new(base, -1, flags, cb, arg).
 * NULL on bad arguments (as for assign) or out of memory. */
TW_EXTERN tw_ev_timer *tw_ev_timer_new(tw_ev *d, short flags,
                                       event_callback_fn cb, void *arg);

/* Deletes (if pending) and frees a timer from tw_ev_timer_new. NULL is a
 * no-op. Safe inside any callback, including the timer's own, and after
 * tw_ev_free(). */
TW_EXTERN void tw_ev_timer_free(tw_ev_timer *t);

/*
 * evtimer_add(): (re)arms `t` to run once CLOCK_MONOTONIC has passed
 * now + *tv, whether it was pending or not; the old deadline is forgotten
 * (earlier or later) and a call that was due but not yet run is cancelled.
 *  - tv <= 0 (negative seconds or microseconds included): due at once;
 *    runs at the next loop iteration, never in the one running the add.
 *    While the adapter's event is activated (queued to run after other
 *    callbacks of this iteration), an add keeps its timer out of that
 *    wakeup (tw_driver_fence, twheel.h) rather than re-add the event, which
 *    would cancel the activation: a program adding such timers at every
 *    iteration would then hold back every timer for ever. Should the
 *    activation itself wait for a later iteration (events of a higher
 *    priority ran first, event_base_loopcontinue, a dispatch limit), the
 *    timer runs one iteration after it; after event_base_loopbreak the
 *    activation waits for the next dispatch with no fence, and the timer
 *    runs in it, in that dispatch's first iteration (before the I/O it
 *    polls, where libevent runs its own timer added then after that I/O);
 *    any add with a timeval after the break also ends the fence of a timer
 *    added before it, which then runs with it. A timer fenced before a
 *    break with no such add after it runs one loop iteration later than
 *    libevent's would (with EVLOOP_ONCE, one dispatch later: the wakeup
 *    cannot tell that a break came between).
 *    With the event not activated, the add re-arms it to wake at the next
 *    iteration, since it may wait for an earlier deadline that libevent's
 *    coarse clock, up to a tick behind, has not reached. Whether the event is
 * activated is read from its flags, in the layout of event2/event_struct.h
 * (libevent 2.1's ABI, libevent-2.1.so.7).
 *  - A sub-millisecond remainder is rounded up; huge values saturate.
 *  - A common-timeout token from event_base_init_common_timeout() (of any
 *    base) is taken as the duration it stands for.
 *  - EV_PERSIST: tv is also the period, from this add on (a re-add sets a
 *    new period), in whole ms (rounded up). Before each call the timer is
 *    re-armed as libevent does, by the wheel's fixed rate (twheel.h): its
 *    expiry becomes the previous expiry + the period, or the wakeup's time
 *    (in ms) + the period if that is already past (missed periods collapse
 *    into one call). A zero or negative period makes the timer run once and
 *    not re-arm, as libevent does with a zero period.
 *  - tv NULL keeps a pending timer's deadline and period and returns 0; on
 *    a timer that is not pending it does nothing and returns 0: the timer
 *    stays not pending (libevent's add(NULL) on a timer-only event does
 *    not make it pending either).
 * Cost: adding with a deadline not earlier than the one the timer event is
 * armed for (the idle-timeout reset) is a clock read plus an O(1) wheel
 * store, and does not touch libevent; a zero timeout re-arms the event
 * (above) unless it is activated. -1
 * for NULL t, a timer never assigned, or a timer of an adapter being freed
 * (inside the callback that called tw_ev_free; t unchanged), or if libevent
 * refused to arm its event (t is then not pending). Adding a timer of an
 * adapter whose memory tw_ev_free released is undefined: assign it to a
 * live adapter first.
 */
TW_EXTERN int tw_ev_timer_add(tw_ev_timer *t, const struct timeval *tv);

/*
 * evtimer_del(): makes `t` not pending and cancels a call that is due but
 * not yet run. Idempotent: 0 when not pending. -1 for NULL.
 * Cost: an O(1) wheel removal. It touches libevent only when it empties the
 * wheel (the event is deleted, so the loop can end); otherwise the event
 * stays armed, and its wakeup may fire nothing (counted in empty_wakeups).
 */
TW_EXTERN int tw_ev_timer_del(tw_ev_timer *t);

/*
 * event_pending(ev, EV_TIMEOUT, tv): EV_TIMEOUT if `t` is pending (true
 * inside the callback of an EV_PERSIST timer, which is re-armed already;
 * false inside a one-shot one; true for a timer due but not run yet), else
 * 0. When pending and tv is not NULL, *tv is its expiry as libevent reports
 * it: the time of the add plus the timeval (for EV_PERSIST, inside and
 * after a call, the previous expiry + the period, or that call's wakeup
 * time in ms + the period), to the microsecond, in wall-clock time
 * converted with the current offset between the wall and monotonic clocks.
 * The timer runs at that expiry rounded up to the ms, never before it.
 * Returns 0 for NULL t: -1 would read as "pending".
 */
TW_EXTERN int tw_ev_timer_pending(const tw_ev_timer *t, struct timeval *tv);

#ifdef __cplusplus
}
#endif

#endif /* TWHEEL_EVENT_H */
