/*
 * twheel-uv: any number of timers behind one uv_timer_t per libuv loop.
 *
 * Create one tw_uv per uv_loop_t, then use tw_uv_timer_t exactly like
 * uv_timer_t: rename uv_timer_* to tw_uv_timer_* and pass the tw_uv instead
 * of the loop to tw_uv_timer_init(). Each function mirrors its uv_timer_*
 * twin (same arguments, same UV_E* codes, deadlines from uv_now(loop)); the
 * few places where it cannot, or where libuv is silent, are said at the
 * function concerned.
 *
 * How the adapter drives the loop:
 *  - one uv_timer_t, one uv_prepare_t, one uv_idle_t and one uv_check_t
 *    (started on libuv < 1.45 only) per tw_uv, whatever the number of
 *    timers. The timer is armed
 *    for the wheel's next expiry and re-armed only when that becomes earlier:
 *    moving a deadline later (the idle-timeout reset) or stopping a timer never
 *    touches it, and at worst costs one wakeup that fires nothing, after which
 *    it is re-armed. It is stopped when no timer is active. When it fires the
 *    wheel advances to uv_now(loop) and runs the due callbacks in deadline
 *    order, equal deadlines in the order of their latest start, as libuv
 *    does: at most one slice of work (TW_SLICE, twheel.h) per loop
 *    iteration, so past a few thousand timers due at once the rest run in
 *    the next iterations, in order, and more than TW_SLICE due in the same
 *    millisecond run none until all are put in start order, a slice per
 *    iteration (libuv runs them all in one pass).
 *  - loop liveness as in Node.js: the shared handles are referenced only
 *    while at least one referenced timer is active (on libuv 1.44, the
 *    prepare and idle handles also until a wakeup owed to the prepare
 *    phase has run: see below), so uv_run() returns when only unreferenced
 *    timers remain.
 *  - a callback that restarts a timer with 0 ms never starves I/O: a timer
 *    started while callbacks run fires at the earliest in the next loop
 *    iteration (libuv >= 1.48 does the same). When that leaves a timer due
 *    at once, the uv_timer_t is re-armed from the prepare phase instead of
 *    from its own callback (libuv 1.44 would rerun it in the same pass), so
 *    I/O and check callbacks run between two calls.
 *  - each timer is called at most once per uv_run(UV_RUN_ONCE) or
 *    uv_run(UV_RUN_NOWAIT), as libuv >= 1.45 does (its test
 *    timer_no_double_call_once). libuv 1.44 runs the timer phase before the
 *    poll and again after it in UV_RUN_ONCE, so a repeating uv_timer_t due
 *    again by the second runs twice there; the adapter does not. It cannot
 *    see which mode uv_run() is in, so on libuv < 1.45 it follows one rule
 *    in every mode: when its callbacks ran before the poll of an iteration,
 *    the wakeup that comes due during that poll runs its callbacks at the
 *    next prepare phase, in order and never early. In UV_RUN_DEFAULT that
 *    is the same iteration, before its poll, after the loop's idle and
 *    pending callbacks (instead of before them); in UV_RUN_ONCE it is the
 *    start of the next uv_run(). That wakeup runs only the timers started
 *    before it (tw_driver_fence, twheel.h): one started meanwhile, from an
 *    idle or pending callback or between two calls, never runs in the
 *    iteration that started it, but at a wakeup after, which the same rule
 *    may leave to the next prepare phase: in UV_RUN_DEFAULT the next
 *    iteration's, in UV_RUN_ONCE the call after next (one call after a
 *    uv_timer_t started with it). The wakeup waits only when a referenced
 *    timer is active, and the adapter's prepare and idle handles stay
 *    referenced until it has run, even if the last referenced timer stops
 *    meanwhile, so that no unreferenced timer that came due while the loop
 *    was alive is left behind when uv_run() returns 0 (unless more than
 *    one slice of them came due at once: the rest wait for later slices,
 *    for which unreferenced timers alone keep no loop alive). With
 *    unreferenced timers alone it runs at once (holding the loop for it
 *    could hold it for ever), and a repeating one may then run in both
 *    timer phases of a UV_RUN_ONCE, as libuv 1.44's own do. The check
 *    handle, which marks the end of each poll, is active while the wheel
 *    has timers. On libuv >= 1.45 none of this runs (only 1.44 is tested:
 *    Debian 12 has nothing newer).
 *
 * Differences from uv_timer_t that remain, on purpose:
 *  - a timer is not a uv_handle_t: no uv_close (stop it; its memory may
 *    then be freed at once), uv_ref, uv_is_active or `loop` member (use
 *    tw_uv_timer_ref, tw_uv_timer_is_active, tw_uv_loop); the adapter's own
 *    handles appear in uv_walk() and are not yours to close;
 *  - a huge timeout saturates at UINT64_MAX - 1 ms (libuv: UINT64_MAX);
 *  - tw_uv_timer_get_due_in of a stopped timer is 0 (libuv keeps the
 *    stopped deadline);
 *  - tw_uv_timer_again on a closing adapter gives UV_EINVAL (libuv's again
 *    on a closing handle returns 0), and so do start, stop and again on a
 *    zeroed, never initialised timer (its getters give 0, and set_repeat,
 *    ref and unref do nothing);
 *    once close_cb has run, the adapter's memory is gone, and starting one
 *    of its timers again is undefined (tw_uv_close);
 *  - on libuv 1.44, the newer libuvs' behaviours above (0 ms from a
 *    callback waits for the next iteration; at most one call per
 *    UV_RUN_ONCE), with the prepare-phase shift they need. The adapter
 *    infers where it is from the loop's phases, and six rare sequences
 *    escape it: a timer that comes due in the instant between the check
 *    phase and the timer phase (the millisecond turns after an I/O wakeup)
 *    can make the next UV_RUN_ONCE return without running the callbacks due
 *    at its end (they run first in the call after); the UV_RUN_ONCE right
 *    after a uv_run() that returned from its check phase (UV_RUN_NOWAIT,
 *    uv_stop) can run a repeating timer twice, as libuv 1.44 itself would,
 *    if a timer came due between the two calls; and so can the UV_RUN_ONCE
 *    after one that no wakeup of the adapter's ended (a plain uv_timer_t or
 *    I/O did), if a timer due at once was started between the two within
 *    the millisecond of the first one's check phase: the adapter takes that
 *    start for one from a check or close callback, whose timer phase comes
 *    after the poll. It tells the two by the loop's time, which every timer
 *    phase updates (test
 *    a_timer_started_before_the_poll_after_a_call_s_check_runs_once_per_call),
 *    and no libuv 1.44 callback tells them apart within that millisecond
 *    without making the loop spin; a check or close callback that calls
 *    uv_update_time() before it starts a timer due at once is taken for a
 *    start before a poll by that test, and a repeating timer may then run
 *    twice in that UV_RUN_ONCE; with unreferenced timers alone, a
 *    repeating one may run twice in one UV_RUN_ONCE (above); and a plain
 *    uv_timer_t whose callback, in the timer phase that ran the adapter's
 *    wakeup, starts a twheel timer due at once re-arms the loop timer for
 *    now, which libuv 1.44 runs again in that same phase: that timer can
 *    run twice in it, as 1.44's own (the adapter cannot tell that phase
 *    from the time between two uv_run() calls after it, where deferring
 *    such a start would make UV_RUN_NOWAIT skip it);
 *  - re-arming is lazy: a stop, or a reset to a later deadline, of the
 *    timer the loop timer waits for leaves the loop timer as it is; its
 *    wakeup then runs nothing (empty_wakeups, tw_uv_stats) and re-arms, so
 *    uv_run(UV_RUN_ONCE) can return after it with no callback run, where
 *    libuv's would block until the next timer ran: loop until what you
 *    wait for has run;
 *  - between twheel timers and the plain uv_timer_ts of the same loop, the
 *    order within one pass is not defined: the twheel timers all run when
 *    the one loop timer does (on libuv 1.44 possibly at the prepare phase).
 *
 * Threads: like libuv handles, a tw_uv and its timers belong to the loop's
 * thread.
 */
#ifndef TWHEEL_UV_H
#define TWHEEL_UV_H

#include <stdint.h>

#include <twheel.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One per loop; opaque. */
typedef struct tw_uv tw_uv;

typedef struct tw_uv_timer_s tw_uv_timer_t;
typedef void (*tw_uv_timer_cb)(tw_uv_timer_t *handle);

/*
 * A timer: caller-owned, embed it in your connection struct (no allocation
 * per timer, ever). 80 bytes on LP64, against 152 for a uv_timer_t.
 * Only `data` is yours; everything after it is private.
 */
struct tw_uv_timer_s {
  void *data; /* public, like uv_handle_t.data; the adapter never touches it */

  /* private, laid out as docs/contract.md (Adapters) says */
  tw_timer tw__timer;    /* in the adapter's wheel; its data is the tw_uv */
  tw_uv_timer_cb tw__cb; /* NULL until the first start */
  unsigned tw__flags;    /* TW_UV__REF */
};
#define TW_UV__REF 1u /* tw__flags: an active timer keeps the loop alive */

/*
 * Creates the adapter for `loop`: one wheel whose time starts at
 * uv_now(loop), one uv_timer_t, one uv_prepare_t, one uv_idle_t (active
 * while a wakeup waits for the prepare phase, so that uv_backend_timeout()
 * is 0 meanwhile) and one uv_check_t (used on libuv < 1.45 only), all
 * initialised in the loop and unreferenced until a referenced timer is
 * started. Their `data` field points at the adapter; do not uv_close() them
 * yourself (close the adapter before a uv_walk() that closes every handle,
 * or skip handles for which uv_is_closing() is true).
 * Returns 0 and stores the adapter in *out, UV_EINVAL for a NULL argument,
 * UV_ENOMEM when out of memory (*out untouched on error).
 */
TW_EXTERN int tw_uv_init(uv_loop_t *loop, tw_uv **out);

/*
 * Closes the adapter; safe from inside any callback, including a timer
 * callback of this adapter. At once: every timer becomes inactive and is
 * never called again (its memory is the caller's again), and starts return
 * UV_EINVAL. Then libuv closes the shared handles; when it has, `close_cb`
 * (may be NULL) runs once and the adapter's memory is freed: the loop must
 * run for that to happen, as for uv_close(). NULL, or a second call while
 * closing, is a no-op (the first close_cb stays).
 * After close_cb the adapter is gone: its timers may still be stopped,
 * queried and freed, but starting one (tw_uv_timer_start, _again) is
 * undefined until tw_uv_timer_init() gives it a live adapter: the adapter
 * cannot reach timers that were inactive when it closed to mark them, as
 * a uv_timer_t of a closed loop cannot be started either.
 */
TW_EXTERN void tw_uv_close(tw_uv *d, void (*close_cb)(tw_uv *d));

/*
 * The adapter's wheel (NULL when closing, or for NULL), for reading:
 * tw_count(), tw_now(), tw_next_expiry(). Start and stop timers through
 * tw_uv_timer_*: the loop timer only knows about those; a timer started on
 * the wheel directly may never be woken for, and the adapter would count
 * it as a referenced timer of its own (see tw__uv_referenced below).
 */
TW_EXTERN tw_wheel *tw_uv_wheel(tw_uv *d);

/* The loop the adapter was created for (NULL for NULL). */
TW_EXTERN uv_loop_t *tw_uv_loop(const tw_uv *d);

/*
 * Copies the adapter's counters about its one loop timer into *out:
 * wakeups (the uv_timer_t fired), empty_wakeups (of those, how many ran no
 * callback though a timer was due: the price of lazy re-arming, see
 * above), fired (twheel callbacks run), rearms (the shared uv_timer_t
 * started again or stopped; a stop and a start made together count once)
 * and maintenance (wakeups that ran no callback because they only moved
 * timers for the wheel's paced work, put a crowded millisecond in order,
 * or met a fence: tw_stats, twheel.h). Valid until close_cb has run. 0, or
 * UV_EINVAL for NULL.
 */
TW_EXTERN int tw_uv_stats(const tw_uv *d, tw_stats *out);

/*
 * Like uv_timer_init(): the timer is inactive, never started, repeat 0,
 * referenced; `data` is left as it is. Do not call it on an active timer
 * (stop it first), as with libuv. UV_EINVAL for NULL or a closing adapter.
 * A timer that was never initialised is refused by start, stop and again
 * with UV_EINVAL when its memory is zeroed (its getters give 0, and
 * set_repeat, ref and unref do nothing; garbage memory cannot be detected).
 */
TW_EXTERN int tw_uv_timer_init(tw_uv *d, tw_uv_timer_t *handle);

/*
 * Like uv_timer_start(): calls `cb` at uv_now(loop) + timeout, then every
 * `repeat` ms if repeat > 0. Starting an active timer re-arms it (the old
 * deadline is forgotten; it counts as started now for the order of equal
 * deadlines). The deadline saturates at UINT64_MAX - 1 (libuv: UINT64_MAX),
 * so a huge timeout is an ordinary active timer that never fires.
 * A timer started while this adapter's callbacks run fires at the earliest
 * in the next loop iteration, whatever its timeout (libuv >= 1.48 does the
 * same; 1.44 reruns a 0 ms timer in the same pass), and a timer is called
 * at most once per uv_run(UV_RUN_ONCE) (libuv >= 1.45; see the top for
 * the sequences that escape it on 1.44).
 * UV_EINVAL for a NULL callback or handle, an uninitialised handle, or a
 * closing adapter (nothing changed).
 */
#ifdef TW_UV__NO_INLINE
TW_EXTERN int tw_uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                                uint64_t timeout, uint64_t repeat);
#else
static inline int tw_uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                                    uint64_t timeout, uint64_t repeat);
#endif

/* Like uv_timer_stop(): idempotent, 0. UV_EINVAL for NULL or an
 * uninitialised handle. Afterwards the handle's memory may be freed.
 * Touches the loop's uv_timer_t only when no timer is left (it is stopped);
 * otherwise, when this was the earliest timer, the loop timer's next wakeup
 * fires nothing (counted in tw_stats.empty_wakeups). That keeps a request
 * timeout that is started and cancelled free of uv_timer_start calls. */
#ifdef TW_UV__NO_INLINE
TW_EXTERN int tw_uv_timer_stop(tw_uv_timer_t *handle);
#else
static inline int tw_uv_timer_stop(tw_uv_timer_t *handle);
#endif

/*
 * Like uv_timer_again(): UV_EINVAL if the timer was never started; with
 * repeat 0 nothing happens and 0 is returned; otherwise the timer is
 * (re)started at uv_now(loop) + repeat with its callback, started or not.
 * On a closing adapter it returns UV_EINVAL where libuv's again on a closing
 * handle returns 0 and does nothing.
 */
TW_EXTERN int tw_uv_timer_again(tw_uv_timer_t *handle);

/* Like uv_timer_set_repeat(): the period used from the next re-arm on; the
 * current deadline stays. NULL is a no-op. */
TW_EXTERN void tw_uv_timer_set_repeat(tw_uv_timer_t *handle, uint64_t repeat);

/* Like uv_timer_get_repeat(). 0 for NULL. */
TW_EXTERN uint64_t tw_uv_timer_get_repeat(const tw_uv_timer_t *handle);

/*
 * Like uv_timer_get_due_in(): max(0, deadline - uv_now(loop)) for an active
 * timer. Inside its own callback a repeating timer reports `repeat` (it is
 * already re-armed, as libuv does, from uv_now() at its turn, which an
 * earlier callback may have moved on with uv_update_time()) and a one-shot
 * 0. For an inactive timer it returns 0 (libuv keeps reporting the deadline
 * of a stopped timer). 0 for NULL.
 */
TW_EXTERN uint64_t tw_uv_timer_get_due_in(const tw_uv_timer_t *handle);

/* Like uv_is_active() on a timer: 1 while armed; inside its own callback 1
 * only for a repeating timer. 0 for NULL. */
TW_EXTERN int tw_uv_timer_is_active(const tw_uv_timer_t *handle);

/*
 * Like uv_ref()/uv_unref()/uv_has_ref() on a timer: an active referenced
 * timer keeps uv_run() going, an unreferenced one does not (it still fires
 * while something else keeps the loop running). Timers start referenced.
 * NULL and uninitialised handles: no-op, and has_ref returns 0.
 */
TW_EXTERN void tw_uv_timer_ref(tw_uv_timer_t *handle);
TW_EXTERN void tw_uv_timer_unref(tw_uv_timer_t *handle);
TW_EXTERN int tw_uv_timer_has_ref(const tw_uv_timer_t *handle);

/*
 * Inline fast paths. tw_uv_timer_start and tw_uv_timer_stop are compiled
 * into the caller, with the core's (twheel.h):
 *  - the idle-timeout reset of a timer waiting in the wheel: the core's
 *    store;
 *  - the start of an inactive timer on an open adapter (its wheel
 *    callback is the adapter's, set by tw_uv_timer_init), for a deadline
 *    after the wheel's time, into an occupied slot: the core's inline
 *    start, the first start of a timer included;
 *  - the stop of a timer waiting in a slot: the core's inline stop.
 * They call out only where the library would too: when the first
 * referenced timer becomes active or the last one inactive
 * (tw__uv_recount refs or unrefs the adapter's handles, and stops the
 * loop timer once no timer is left), and when the loop timer must be
 * armed earlier (tw_driver_started). Every other case calls
 * tw__uv_timer_start or tw__uv_timer_stop, which are also what the
 * exported symbols tw_uv_timer_start and tw_uv_timer_stop do.
 * They read the loop's time as uv_now() does, from the uv_loop_t field that
 * uv_now() returns (libuv 1.x keeps uv_loop_t's layout within its ABI; a
 * test compares the two), which takes no call into libuv.
 * A timer waiting in a slot has an open adapter, with its wheel:
 * tw_uv_close frees the wheel, which makes every timer inactive.
 *
 * ABI: besides what twheel.h freezes, this freezes for the library's soname
 * 0 the layout of tw_uv_timer_t, TW_UV__REF, and the start of every tw_uv,
 * struct tw_uv__head (placed before the libuv handles, whose sizes vary
 * between libuv versions), with what its counts mean. A program built
 * against this header needs libtwheel-uv 0.7 or later, and the loader
 * enforces it as twheel.h says: a file compiled with these inline paths
 * refers to tw__uv_inline_abi_2, which libtwheel-uv defines from 0.7 on,
 * so the program refuses to start with an older library (0.6 defines
 * tw__uv_inline_abi_1 instead: its head counts the referenced timers, not
 * the unreferenced ones; 0.5 has that layout but no name; 0.4 lays the
 * head out otherwise). They use the core's inline paths too, so they
 * refer to tw__inline_abi_1 as well, even in a file built with
 * TW__NO_INLINE (libtwheel-uv itself refers to it, as a user of those
 * paths). A file built with TW_UV__NO_INLINE and TW__NO_INLINE needs
 * neither name.
 */
struct tw_uv__head {
  tw_driver driver; /* its wheel is the adapter's; closed once closing */
  uv_loop_t *loop;
  size_t unrefd_active; /* active unreferenced timers (tw_uv_timer_unref) */
};

TW_EXTERN int tw__uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                                 uint64_t timeout, uint64_t repeat);
TW_EXTERN int tw__uv_timer_stop(tw_uv_timer_t *handle);

/*
 * Liveness. Every active timer of the wheel is one of the adapter's
 * handles, so the active referenced ones number tw_count(wheel) -
 * unrefd_active, and the adapter's handles are referenced while that is
 * above 0 (and the prepare and idle handles while a wakeup is owed to the
 * prepare phase: ref_prepare, twheel-uv.c). A referenced timer's start and stop
 * write nothing of the adapter's own for it: they compare the wheel's count,
 * which the core keeps anyway, with unrefd_active, and call tw__uv_recount when
 * the difference may have crossed 0. Counting the referenced timers instead
 * (0.6) took a read-modify-write of the adapter per start and per stop, at
 * an address known only once the handle's line, mostly a cache miss, had
 * come, and the next call's reads of that count waited for it, we read:
 * twbench's start+stop through these calls at N = 1e6 took 164 ns then,
 * 119 this way, interleaved (bench/HISTORY.md, "Morning (2026-11-29)").
 */
static inline size_t tw__uv_referenced(const struct tw_uv__head *d) {
  return tw__head(d->driver.wheel)->count - d->unrefd_active;
}

/* The referenced active timers may have become 0 or 1: refs or unrefs the
 * adapter's handles to match, and stops the loop timer when no timer is
 * left (tw_driver_stopped). */
TW_EXTERN void tw__uv_recount(struct tw_uv__head *d);

/* A start made handle `h` of `d` active, and the wheel has counted it: its
 * share of unrefd_active, or liveness if it is the first referenced one. */
static inline void tw__uv_activated(struct tw_uv__head *d,
                                    const tw_uv_timer_t *h) {
  if (!(h->tw__flags & TW_UV__REF))
    d->unrefd_active++;
  else if (tw__uv_referenced(d) == 1)
    tw__uv_recount(d);
}

/* A stop, or a one-shot's firing, made `h` inactive, and the wheel has
 * counted it: liveness if it was the last referenced one; or its share of
 * unrefd_active, and the loop timer if no timer is left. */
static inline void tw__uv_deactivated(struct tw_uv__head *d,
                                      const tw_uv_timer_t *h) {
  if (h->tw__flags & TW_UV__REF) {
    if (tw__uv_referenced(d) == 0)
      tw__uv_recount(d);
  } else {
    d->unrefd_active--;
    tw_driver_stopped(&d->driver);
  }
}

/* uv_now(loop), with no call where libuv's layout is known. */
static inline uint64_t tw__uv_now(const uv_loop_t *loop) {
#if UV_VERSION_MAJOR == 1
  return loop->time;
#else
  return uv_now(loop);
#endif
}

/* uv_now() + timeout, saturated where the wheel saturates (TW_NEVER - 1),
 * so that the driver compares with the deadline the wheel really keeps. */
static inline uint64_t tw__uv_deadline_after(const uv_loop_t *loop,
                                             uint64_t timeout) {
  uint64_t now = tw__uv_now(loop);
  return timeout >= TW_NEVER - 1 - now ? TW_NEVER - 1 : now + timeout;
}

/* The deadline of an inline start (tw__uv_deadline_after) in *deadline: 1
 * if it lies after the wheel's time, all that tw__in_future asks of it
 * (it is below TW_NEVER already). */
static inline int tw__uv_inline_deadline(const struct tw_uv__head *d,
                                         uint64_t timeout, uint64_t *deadline) {
  *deadline = tw__uv_deadline_after(d->loop, timeout);
  return *deadline > tw__head(d->driver.wheel)->now;
}

/* The adapter of a handle, through its timer's data. */
static inline struct tw_uv__head *tw__uv_owner(const tw_uv_timer_t *handle) {
  return (struct tw_uv__head *)handle->tw__timer.data;
}

/* A start's last steps: the user's callback, and the loop timer. */
static inline int tw__uv_started(struct tw_uv__head *d, tw_uv_timer_t *handle,
                                 tw_uv_timer_cb cb, uint64_t deadline) {
  handle->tw__cb = cb;
  tw_driver_started(&d->driver, deadline);
  return 0;
}

TW_EXTERN extern const unsigned char tw__uv_inline_abi_2;

#if !defined(TW_UV__NO_INLINE) && defined(TW__KEEP_REFERENCE)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
TW__KEEP_REFERENCE static const unsigned char *const tw__uv_inline_abi_ref[] = {
    &tw__uv_inline_abi_2, &tw__inline_abi_1};
#pragma GCC diagnostic pop
#endif

#ifndef TW_UV__NO_INLINE

static inline int tw_uv_timer_start(tw_uv_timer_t *handle, tw_uv_timer_cb cb,
                                    uint64_t timeout, uint64_t repeat) {
  struct tw_uv__head *d;
  tw_timer *t;
  uint64_t order, deadline;
  if (handle && cb) {
    t = &handle->tw__timer;
    order = t->tw__order;
    d = tw__uv_owner(handle); /* read through only once `order` vouches */
    /* Each branch's test is the one its core function makes first
     * (tw__store_restart, tw__file_inactive), which the compiler then
     * drops. Active already: the wheel's count, and so liveness, stay. */
    if (tw__may_store(order)) {
      if (tw__uv_inline_deadline(d, timeout, &deadline) &&
          tw__store_restart(d->driver.wheel, t, order, deadline)) {
        t->tw__repeat = repeat;
        return tw__uv_started(d, handle, cb, deadline);
      }
    } else if (tw__may_file(order) && !d->driver.closed) {
      /* Its wheel callback is the adapter's since tw_uv_timer_init. */
      if (tw__uv_inline_deadline(d, timeout, &deadline) &&
          tw__file_inactive(d->driver.wheel, t, order, t->tw__cb, deadline,
                            repeat)) {
        tw__uv_activated(d, handle);
        return tw__uv_started(d, handle, cb, deadline);
      }
    }
  }
  return tw__uv_timer_start(handle, cb, timeout, repeat);
}

static inline int tw_uv_timer_stop(tw_uv_timer_t *handle) {
  struct tw_uv__head *d;
  uint64_t order;
  if (handle && tw__in_slot(order = handle->tw__timer.tw__order)) {
    d = tw__uv_owner(handle);
    tw__stop_waiting(tw__head(d->driver.wheel), &handle->tw__timer, order);
    tw__uv_deactivated(d, handle);
    return 0;
  }
  return tw__uv_timer_stop(handle);
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* TWHEEL_UV_H */
