/*
 * twheel: a hierarchical timing wheel for event loops.
 *
 * One wheel per loop keeps any number of timers while the loop itself holds
 * one timer: ask tw_next_wakeup() when to wake (tw_next_expiry() is the
 * earliest deadline, or a bound before it: rule 8), call tw_advance_slice()
 * or tw_advance() when woken.
 * The wheel knows nothing about clocks: time is an unsigned 64-bit tick count
 * in the caller's unit (the adapters use milliseconds).
 *
 * Guarantees (the numbered rules of the design contract):
 *  - never early: a timer fires in the first tw_advance(now) with
 *    now >= deadline, exact to the tick whatever level it waited in (unless
 *    a budget or tw_break ended that advance first, the timer was started
 *    during it, or a fence holds it back: then in a later one, rule 1);
 *  - FIFO: one advance runs callbacks in deadline order, equal deadlines in
 *    the order of their latest start (start, start_at, again, repeat re-arm);
 *  - O(1) start, stop and re-arm; tw_advance and tw_next_expiry cost
 *    O(levels + timers fired + timers moved), never O(ticks elapsed);
 *  - no stall: timers move down the wheel ahead of time, a paced slice per
 *    advance, so an advance does little more than fire what is due; and
 *    tw_advance_slice() bounds all of an advance's work;
 *  - no allocation after tw_wheel_new, no global state.
 *
 * A wheel is single-threaded, like the loop that drives it. Errors are
 * negative errno values (-EINVAL); 0 is success; tw_strerror() names them.
 */
#ifndef TWHEEL_H
#define TWHEEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(TW_BUILDING)
#define TW_EXTERN __attribute__((visibility("default")))
#else
#define TW_EXTERN
#endif

/* The two start functions, tw_timer_stop, tw_driver_started and
 * tw_driver_stopped are inline (see "Inline fast paths" at the end); the
 * library itself defines them out of line. */
#ifdef TW__NO_INLINE
#define TW__INLINE_API TW_EXTERN
#else
#define TW__INLINE_API static inline
#endif

#define TW_NEVER UINT64_MAX /* tw_next_expiry(): nothing pending */
#define TW_ALL SIZE_MAX     /* tw_advance(): no budget */

typedef struct tw_wheel tw_wheel; /* opaque, one per loop */
typedef struct tw_timer tw_timer; /* caller-owned, embed it in your struct */
typedef void (*tw_timer_cb)(tw_timer *timer);

/* Doubly-linked list node; private to the wheel. */
struct tw__link {
  struct tw__link *next;
  struct tw__link *prev;
};

/*
 * A timer. Embed it anywhere; the wheel never allocates or frees it.
 * Only `data` is yours; read everything else through the functions below.
 * Call tw_timer_init() before any other use: a timer that was never
 * initialised (zeroed memory included) is refused with -EINVAL.
 */
struct tw_timer {
  void *data; /* public: for the caller */

  /* private. Their order was measured: with tw__order, tw__deadline,
   * tw__repeat and tw__cb right after data (a reset's fields together),
   * bench's reset at N = 1e6 had fewer L1 read misses (core 1.27 -> 1.15
   * per reset, tw_uv 1.80 -> 1.32: callgrind's cache simulation, whose
   * last-level misses rose, 0.20 -> 0.31 and 0.33 -> 0.81) but took no
   * measurably less time (core 33.2 -> 32.9 ns, tw_uv 42.5 -> 44.3:
   * interleaved, medians of 7), so this order (frozen: "Inline fast
   * paths") stays. */
  struct tw__link tw__link; /* in a slot, the due list or the firing list */
  tw_timer_cb tw__cb;       /* NULL until the first start (twheel-uv sets it at
                               init) */
  uint64_t tw__deadline; /* absolute; may be later than the slot it sits in */
  uint64_t tw__repeat;
  uint64_t tw__order; /* start sequence << TW__SEQ_SHIFT | where it waits */
};

/*
 * Private, but part of the ABI (see "Inline fast paths" below): the low
 * bits of tw__order say where a timer waits; the start sequence, which
 * orders equal deadlines, is above them.
 */
#define TW__SEQ_SHIFT 17
#define TW__TAG_MASK ((1u << TW__SEQ_SHIFT) - 1)
#define TW__STATE_MASK                                                         \
  0x1c000u                   /* bits 14-16; other values: not initialised      \
                              */
#define TW__IN_SLOT 0x1c000u /* waiting in a slot of the wheel */
#define TW__IDLE 0x14000u    /* inactive */
#define TW__MAY_HOLD_MIN                                                       \
  0x1000u                      /* it may hold its slot's earliest deadline     \
                                */
#define TW__FIXED_RATE 0x2000u /* tw_timer_set_fixed_rate, kept by moves */
#define TW__INDEX_MASK 0x0fffu /* in a slot: the slot's index */
#define TW__PLACE_MASK (TW__STATE_MASK | TW__MAY_HOLD_MIN | TW__INDEX_MASK)

/* Creates a wheel whose time starts at `now`. NULL when out of memory. */
TW_EXTERN tw_wheel *tw_wheel_new(uint64_t now);

/*
 * Frees the wheel. NULL is a no-op. Every timer still active becomes
 * inactive and is never called; its memory is the caller's again.
 * Called from inside one of this wheel's callbacks, the timers are released
 * at once and the memory when that tw_advance() returns; until then the
 * wheel refuses every use (starts, stop and again give -EINVAL,
 * tw_next_expiry and tw_now TW_NEVER, tw_count 0) and a second free does
 * nothing.
 */
TW_EXTERN void tw_wheel_free(tw_wheel *w);

/* Bytes one wheel takes (its single allocation in tw_wheel_new), whatever
 * the number of timers: the per-loop cost next to sizeof(tw_timer). */
TW_EXTERN size_t tw_wheel_size(void);

/* Time of the latest advance (or of tw_wheel_new). 0 for NULL. */
TW_EXTERN uint64_t tw_now(const tw_wheel *w);

/* Number of active timers (one-shot or repeating, due or not). 0 for NULL. */
TW_EXTERN size_t tw_count(const tw_wheel *w);

/* Resets `t` to never started, repeat 0, inactive. Do not call it on an
 * active timer (stop it first): the wheel would keep a dangling link. */
TW_EXTERN void tw_timer_init(tw_timer *t);

/*
 * Arms `t` to call `cb` at tw_now(w) + timeout, then every `repeat` ticks if
 * repeat > 0. The deadline saturates at TW_NEVER - 1. Starting an active
 * timer re-arms it: the old deadline is forgotten and the timer counts as
 * started now for the FIFO order. Moving a deadline later is a store: the
 * timer moves when its old slot is drained or collected.
 * A timer started while tw_advance() runs never fires in that same call.
 * A timer belongs to the wheel it was started on until it is stopped or
 * fires; passing it to another wheel meanwhile is undefined.
 * Returns 0, or -EINVAL for a NULL argument or an uninitialised timer
 * (nothing changed).
 */
TW__INLINE_API int tw_timer_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                  uint64_t timeout, uint64_t repeat);

/*
 * Like tw_timer_start() with an absolute deadline (saturated at
 * TW_NEVER - 1). A deadline at or before tw_now(w) is kept as given and
 * fires at the next advance, in deadline order. Such starts cost O(1) too:
 * the timers waiting for the next advance are put in order when it (or
 * tw_next_expiry) reads them, once, O(k log k) for k of them at worst, and
 * each joins what a budget left of the last advance at the cost of the
 * fewer of those timers before and after its place: none at either end,
 * up to half of them in the middle (docs/contract.md, rule 10).
 */
TW__INLINE_API int tw_timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                     uint64_t deadline, uint64_t repeat);

/* Makes `t` inactive; stopping an inactive timer is a no-op returning 0.
 * -EINVAL for NULL or an uninitialised timer. After it returns the timer's
 * memory may be freed. */
TW__INLINE_API int tw_timer_stop(tw_wheel *w, tw_timer *t);

/*
 * libuv's uv_timer_again(): a timer with repeat > 0 is re-armed at
 * tw_now(w) + repeat (started or not); with repeat 0 nothing happens and 0 is
 * returned. -EINVAL if the timer was never started (no callback yet), or for
 * NULL arguments.
 */
TW_EXTERN int tw_timer_again(tw_wheel *w, tw_timer *t);

/*
 * Fixed rate (libevent's EV_PERSIST): a repeating timer is re-armed at the
 * deadline it fired for + repeat, so its period does not drift by the
 * advances' lateness; when that time has already passed, at now + repeat
 * (missed periods collapse into one call). Off (the default, libuv's rule):
 * at now + repeat. Kept by starts and re-arms; tw_timer_init clears it.
 * NULL or an uninitialised timer: no-op (is_fixed_rate: 0).
 */
TW_EXTERN void tw_timer_set_fixed_rate(tw_timer *t, int fixed_rate);
TW_EXTERN int tw_timer_is_fixed_rate(const tw_timer *t);

/* Sets the period used from the next re-arm on; the current deadline stays.
 * NULL is a no-op. */
TW_EXTERN void tw_timer_set_repeat(tw_timer *t, uint64_t repeat);

/* The period; 0 for a one-shot timer or NULL. */
TW_EXTERN uint64_t tw_timer_get_repeat(const tw_timer *t);

/* 1 if armed (inside its own callback: 1 only for a repeating timer). */
TW_EXTERN int tw_timer_is_active(const tw_timer *t);

/* Absolute deadline, TW_NEVER when inactive (or NULL). */
TW_EXTERN uint64_t tw_timer_deadline(const tw_timer *t);

/*
 * When the caller must call tw_advance() next: the earliest deadline of any
 * active timer, TW_NEVER when none is active (or for NULL). When
 * tw_advance() stopped at max_fire (or at a fence) with timers left to
 * run, the result is <= tw_now(w); after a work budget (tw_advance_slice),
 * ask tw_next_wakeup() when to come back.
 * It is never later than the earliest deadline, and exact except in two
 * cases, where it is a time at which nothing fires (a "wasted wakeup"):
 *  - the timer with the earliest deadline was stopped or moved later after
 *    this call: the next call after the wasted advance is right again;
 *  - it was stopped, moved later, or re-armed for a time before the part
 *    of the wheel it sat in (which then keeps its former deadline as a
 *    bound) before this call, and making the answer exact would re-file
 *    too many timers in this call (that part holds more than 64, or, with
 *    more than 64 timers active, such parts come one after another past
 *    1,024 re-filings):
 *    the answer is then the former deadline, and the advance at that time
 *    moves those timers on (work it would do a moment later anyway)
 *    instead of this call visiting them all. With a million timers this
 *    keeps the answer O(1).
 * In the randomized differential test about 0.01% of answers are early.
 * It re-files at most 1,024 timers whose deadlines were moved later (hence
 * the non-const wheel), or, with no more than 64 active, as many as make
 * the answer exact; that work is paid for by those moves.
 */
TW_EXTERN uint64_t tw_next_expiry(tw_wheel *w);

/*
 * Sets the time to `now` (a value before tw_now(w) counts as tw_now(w): time
 * never runs backwards) and runs the callbacks of every timer whose deadline
 * is <= now, in deadline order, equal deadlines by latest start. Runs at most
 * `max_fire` callbacks (TW_ALL: no budget); what is left fires first at the
 * next advance, as what a fence (tw_driver_fence) holds back does. With
 * max_fire 0 time still moves and nothing runs.
 * Before a callback runs, a repeating timer is re-armed at now + repeat
 * (missed periods collapse) and a one-shot timer becomes inactive. Callbacks
 * may start, stop and (once stopped or fired) free any timer; a timer stopped
 * or re-armed before its turn does not fire in this call. A callback that
 * calls tw_advance() on the same wheel gets 0 and changes nothing.
 * Returns the number of callbacks run (0 for NULL).
 */
TW_EXTERN size_t tw_advance(tw_wheel *w, uint64_t now, size_t max_fire);

/*
 * From inside a callback: the advance running now runs no other callback
 * and returns once that callback returns (libevent's
 * event_base_loopbreak), having moved the timers it owed the pace
 * (tw_next_wakeup: a few, for a loop that advances every tick) up to the
 * time it had reached, so that a loop that breaks at every advance still
 * moves them a few at a time, also when its breaks leave the wheel behind
 * its time (two callbacks that break at every tick).
 * Timers due and not run yet stay due, in order, and run first at the next
 * advance; until then tw_next_expiry() is <= tw_now(w). Outside an
 * advance, or for NULL, nothing happens.
 */
TW_EXTERN void tw_break(tw_wheel *w);

/*
 * When the caller should call tw_advance() next: tw_next_expiry(), or an
 * earlier time at which the wheel wants an advance to move timers down
 * ahead of their deadlines (a "maintenance" wakeup, which fires nothing),
 * or a time <= tw_now(w) when the last advance used up its work budget
 * (there may be work left). Loops that sleep until the next call should sleep
 * until this, not tw_next_expiry(): a loop that sleeps through the wheel's
 * paced work owes it all at its next advance. A loop that advances at least
 * once per millisecond tick (or whatever its unit) never needs a maintenance
 * wakeup. TW_NEVER when no timer is active (or for NULL).
 */
TW_EXTERN uint64_t tw_next_wakeup(tw_wheel *w);

/*
 * tw_advance() with a work budget: at most `max_work` units, where each
 * timer moved between slots, each timer collected from a slot, each timer
 * moved to put a tick collected over several budgets in start order
 * (docs/contract.md, rule 7) and each callback run is one unit. What is
 * left is done by the next advance, from where this one stopped, in order
 * and never early: then tw_next_wakeup() returns a time <= tw_now(w).
 * max_work 0 moves the time and does nothing else. TW_SLICE is the slice
 * the loop adapters use (about a millisecond of work with a million
 * timers). Returns the number of callbacks run.
 */
#define TW_SLICE 4096
TW_EXTERN size_t tw_advance_slice(tw_wheel *w, uint64_t now, size_t max_work);

/* Timers moved between slots since tw_wheel_new: the wheel's own work
 * besides running callbacks (0 for NULL). */
TW_EXTERN uint64_t tw_moves(const tw_wheel *w);

/*
 * Counters a tw_driver (below) keeps about its one loop timer; the loop
 * adapters report them (tw_uv_stats, tw_ev_stats). The wheel keeps none.
 */
typedef struct tw_stats {
  uint64_t wakeups;       /* the loop timer fired */
  uint64_t empty_wakeups; /* ... and no twheel callback ran, though a timer
                             was due (its deadline had moved later) */
  uint64_t fired;         /* twheel callbacks run */
  uint64_t rearms;        /* the loop timer was started again or stopped */
  uint64_t maintenance;   /* wakeups for the wheel's paced work only
                             (tw_next_wakeup), not counted as empty; also
                             one that ran nothing because its slice went
                             to putting more timers than it holds, due in
                             one tick, in start order, or because the
                             first timer due was fenced out
                             (tw_driver_fence) */
} tw_stats;

/*
 * Driving one loop timer: the rule every loop adapter follows, written once.
 *
 * A loop gives the whole wheel one timer of its own (a uv_timer_t, a timer
 * event, a poll() timeout). A tw_driver keeps that timer armed:
 *  - never later than the wheel's next expiry, and early enough for its
 *    paced work (tw_next_wakeup);
 *  - re-armed only when that time moves earlier: a start earlier than the
 *    time armed re-arms, a later start (the idle reset) or a stop leaves it
 *    (the wakeup may then fire nothing, and re-arms for the true next time);
 *  - stopped when no timer is left;
 *  - and when it fires, the wheel advances one slice (TW_SLICE units of
 *    work, tw_advance_slice), so no loop iteration does more than that;
 *    work left re-arms the loop timer at once, with the loop's I/O between.
 * The loop supplies one function, `arm`, that sets its timer for an
 * absolute time in the wheel's unit (TW_NEVER: stop it), and calls the
 * tw_driver_* functions below after its own starts and stops and when its
 * timer fires. `arm` is called with `from_expiry` set when it runs inside
 * tw_driver_expired (some loops must not re-arm for "now" from inside their
 * timer's callback: libuv 1.44 would rerun it in the same pass). It returns
 * 0, or -1 if the loop refused (the driver then holds nothing armed, and
 * the next tw_driver_started or tw_driver_rearm arms for the wheel's next
 * wakeup when that is earlier than the time it is given).
 *
 * The driver is embedded in the adapter and initialised by
 * tw_driver_init(); its public fields are read-only. Single-threaded, like
 * the loop.
 */
typedef struct tw_driver tw_driver;
typedef int (*tw_driver_arm_fn)(tw_driver *d, uint64_t at, int from_expiry);

struct tw_driver {
  tw_wheel *wheel;           /* read-only: the wheel driven */
  uint64_t armed;            /* read-only: the loop timer's time; TW_NEVER */
  tw_stats stats;            /* read-only: counters (see tw_stats) */
  unsigned char dispatching; /* read-only: inside tw_driver_expired */
  unsigned char closed;      /* read-only: tw_driver_close was called */

  /* private */
  tw_driver_arm_fn tw__arm;
  size_t tw__slice;                  /* work units per wakeup */
  unsigned char tw__for_maintenance; /* armed earlier than the next expiry */
};

/* Drives `w` through `arm`; nothing is armed yet. -EINVAL for NULL. */
TW_EXTERN int tw_driver_init(tw_driver *d, tw_wheel *w, tw_driver_arm_fn arm);

/*
 * After the loop started (or re-armed) a timer of the wheel for `deadline`:
 * arms the loop timer for it if that is earlier than what is armed. After
 * a refused arm (nothing armed while other timers wait) it reads the wheel
 * (tw_next_wakeup, which may re-file a slot) and arms for its next wakeup
 * when that is earlier, so that the waiting timers are not overtaken; a
 * first timer on an empty wheel reads nothing more. Nothing happens inside
 * tw_driver_expired (it re-arms when the callbacks return) or after
 * tw_driver_close. Returns what `arm` returned, or 0; -EINVAL for NULL.
 * Inline: a deadline no earlier than `armed` costs no call.
 */
TW__INLINE_API int tw_driver_started(tw_driver *d, uint64_t deadline);

/* After the loop stopped a timer: stops the loop timer when the wheel is
 * empty (so an empty wheel never keeps a loop alive); lazy otherwise.
 * NULL: nothing. It reads the wheel unless the driver is closed: close the
 * driver (tw_driver_close) before freeing its wheel. Inline: while timers
 * remain it costs no call. */
TW__INLINE_API void tw_driver_stopped(tw_driver *d);

/* Arms the loop timer for min(at, armed) even when it is armed already.
 * In a loop where re-arming cancels a wakeup already queued (libevent's
 * event_add on an activated event), that wakeup's due timers wait for the
 * next one: a program that does it at every loop iteration holds them back
 * for ever. tw_driver_fence keeps a start out of a queued wakeup without
 * cancelling it; a re-arm ends a fence. With nothing armed while timers
 * wait (after a refused arm), arms for min(at, tw_next_wakeup). Returns
 * what `arm` returned; -EINVAL for NULL. */
TW_EXTERN int tw_driver_rearm(tw_driver *d, uint64_t at);

/*
 * For loops that queue their timer's callback when an iteration starts and
 * run it after other callbacks of the same iteration (libevent activates a
 * timer event, then runs the I/O callbacks before it). Call it while the
 * loop timer's callback is queued that way, before starting a timer from
 * one of the other callbacks: the timers started from then on do not run
 * in the queued wakeup. That wakeup stops before the first of them in
 * firing order (what follows that one waits too) and re-arms the loop
 * timer at once, so they run at the wakeup after, in the next iteration.
 * A timer due at once thus runs at the next loop iteration, never in the
 * one that started it, as libevent's own timers do, and the queued wakeup
 * still runs the timers due before it. Until that wakeup,
 * tw_driver_started arms nothing: re-arming would cancel it, and it re-arms
 * for every timer when it returns. tw_driver_rearm does re-arm, and ends
 * the fence: for a queued wakeup that will not run in this iteration
 * (libevent: event_base_loopbreak was called). The fence ends with the next
 * advance of the wheel, or when tw_driver_stopped finds the wheel empty
 * (the loop timer, queued wakeup included, is then stopped). It has no
 * effect inside tw_driver_expired (a start there never runs in the same
 * wakeup); nothing happens after tw_driver_close or for NULL. Starts are
 * numbered modulo 2^47: the fence tells the timers started since it from
 * the others while fewer than 2^47 (1.4e14) starts come between it and
 * its wakeup.
 */
TW_EXTERN void tw_driver_fence(tw_driver *d);

/*
 * The loop timer fired at `now`: advances the wheel one slice, counts the
 * wakeup, and re-arms the loop timer for tw_next_wakeup() (nothing when no
 * timer is left). Returns the callbacks run (0 for NULL). If a callback
 * closed the driver (tw_driver_close), nothing after the advance touches
 * the wheel. Once the driver is closed, a late firing of the loop timer (a
 * loop of one's own that closed the driver and left its timer armed) does
 * nothing and returns 0: the loop may have freed the wheel by then.
 * Called from inside a callback of its own wakeup, it does nothing and
 * returns 0, as tw_advance() does: the running wakeup still counts once
 * and re-arms when its slice returns.
 */
TW_EXTERN size_t tw_driver_expired(tw_driver *d, uint64_t now);

/* The loop is closing its timer: the driver arms nothing more and `armed`
 * becomes TW_NEVER at once, without a call to `arm` (the loop stops its
 * timer and frees the wheel itself). Safe from inside a callback. */
TW_EXTERN void tw_driver_close(tw_driver *d);

/* A static English message for 0 or -EINVAL, the one error of the core
 * ("unknown error" for anything else). */
TW_EXTERN const char *tw_strerror(int err);

/*
 * Inline fast paths. tw_timer_start, tw_timer_start_at and tw_timer_stop
 * are compiled into the caller, with their common cases:
 *  - the idle-timeout reset, a timer waiting in a slot, not holding its
 *    minimum (TW__MAY_HOLD_MIN), re-armed for the same or a later
 *    deadline, or an earlier one after the slot's minimum, still in the
 *    future: a few stores;
 *  - the start of an inactive timer for the future (not a fixed-rate
 *    one): it joins the tail of the slot the filing rule names
 *    (src/wheel.h) when that slot is occupied (it holds timers, or a stop
 *    left it empty), keeping the slot's count and minimum; no bound of the
 *    wheel moves;
 *  - the stop of a timer waiting in a slot: it leaves the slot, which is
 *    dirty if the timer held its minimum.
 * Every other case calls the library (tw__timer_start_nonnull once the
 * pointers are tested, else tw__timer_start_at; tw__timer_stop), which
 * goes the same ways, and so do the exported symbols tw_timer_start,
 * tw_timer_start_at and tw_timer_stop.
 * tw_driver_started's and tw_driver_stopped's common cases are inline too
 * (a deadline no earlier than the loop timer's; timers remaining): nothing
 * to do.
 * They are static inline, so the compiler decides: clang 14 keeps
 * tw_timer_start out of line in the peer benchmark (a call to the file's
 * own copy), and forcing it inline (always_inline) made the pair longer
 * there, 139.1 -> 141.1 instructions under callgrind, so it is not forced.
 * Nor are the branches hinted: __builtin_expect on the tests that choose
 * the inline paths (pointers, a deadline in the future, a stop in a slot),
 * which lays them out as the fall-through, took one instruction from a
 * reset (52.9 -> 51.9 under callgrind, the peer benchmark at N = 1e5; a
 * start+stop stayed at 121.1) but made it slower (28.1 -> 30.9 ns at
 * N = 1e6, interleaved, medians of 7).
 *
 * ABI: this freezes, for the library's soname 0, the layout of struct
 * tw_timer and of its tw__order bits above; the start of a wheel, struct
 * tw__wheel_head, slots included, and what a slot's minimum bounds (no
 * later than any deadline in the slot, no earlier than its start); the
 * filing rule (tw__filing_slot); and struct tw_driver (public already); a
 * change to any of these is a new soname. A wheel starts with a struct
 * tw__wheel_head, through which the library reads and writes the same fields
 * (src/wheel.h).
 *
 * A program built against this header needs libtwheel.so.0 version 0.6 or
 * later, and the loader enforces it: a file compiled with these inline
 * paths refers to tw__inline_abi_1, which the library defines from 0.6 on,
 * so the program refuses to start with an older one ("undefined symbol:
 * tw__inline_abi_1") rather than write through a layout it may not share
 * (0.4 and 0.5 share it; 0.3 does not). The suffix names this layout: a
 * change to it is a new soname and a new name. The reference is a pointer
 * kept by the attributes `used` and `retain`, so that it survives
 * -Wl,--gc-sections. It is missing with compilers that do not define
 * __GNUC__, and with --gc-sections where `retain` is not honoured: before
 * gcc 11 and clang 13, with binutils before 2.36 or gold, and on targets
 * other than ELF.
 * Every file that includes this header without TW__NO_INLINE makes the
 * reference, so it must be linked with libtwheel even if it only uses the
 * types. A file built with TW__NO_INLINE calls the exported functions only
 * and needs no such symbol (but see twheel-uv.h).
 */
#define TW__LEVEL_BITS 8 /* a level's digit: 256 slots per half */
#define TW__LEVELS (64 / TW__LEVEL_BITS)
#define TW__LEVEL_SLOTS (2u << TW__LEVEL_BITS) /* two halves; the top: one */
#define TW__SLOT_COUNT                                                         \
  ((TW__LEVELS - 1) * TW__LEVEL_SLOTS + TW__LEVEL_SLOTS / 2)

struct tw__slot { /* 32 bytes on LP64, in one cache line of the wheel */
  struct tw__link timers;
  uint64_t min;           /* no later than any deadline in it, no
                             earlier than its start */
  uint32_t count;         /* timers in it */
  unsigned char occupied; /* its bit in the wheel's bitmap (src/wheel.h) */
  unsigned char dirty;    /* min is only a bound */
};

struct tw__wheel_head {
  uint64_t now;      /* tw_now(): the latest advance's time */
  uint64_t next_seq; /* the next start's sequence: orders equal deadlines */
  uint64_t pos;      /* the slots' reference time, <= now */
  size_t count;      /* tw_count(): active timers */
  uint64_t level_end[TW__LEVELS]; /* where each level's two blocks end */
  struct tw__slot slots[TW__SLOT_COUNT];
};

TW_EXTERN int tw__timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                 uint64_t deadline, uint64_t repeat);
/* tw__timer_start_at for w, t and cb known not to be NULL. */
TW_EXTERN int tw__timer_start_nonnull(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                      uint64_t deadline, uint64_t repeat);
TW_EXTERN int tw__timer_stop(tw_wheel *w, tw_timer *t);
TW_EXTERN int tw__driver_started(tw_driver *d, uint64_t deadline);
/* tw_driver_stopped once the wheel of `d` (open) is found empty. */
TW_EXTERN void tw__driver_emptied(tw_driver *d);

static inline struct tw__wheel_head *tw__head(tw_wheel *w) {
  return (struct tw__wheel_head *)(void *)w;
}

static inline unsigned tw__highest_bit(uint64_t x) { /* x != 0 */
#if defined(__GNUC__)
  return 63u ^ (unsigned)__builtin_clzll(x); /* 63 - clz, in one bsr */
#else
  unsigned bit = 0;
  while (x >>= 1)
    bit++;
  return bit;
#endif
}

/*
 * The filing rule (src/wheel.h): the slot for a deadline after pos, at the
 * lowest level L whose two blocks hold it (deadline < level_end[L]), by its
 * digit there and its block's parity. The distance's highest bit gives
 * that level or the one below, g: the distance lies in [2^(8g+1), 2^(8g+9))
 * (in [1, 2^9) for g = 0), at least two level-(g-1) blocks and less than
 * one level-(g+1) block, so one compare with level_end[g] decides.
 * The ends grow with the level, so a deadline before level_end[1] (which
 * includes every one less than 2^16 ticks after pos: 65 s in milliseconds,
 * as most timeouts are) files at level 0 or 1, and its slot is found first,
 * from two compares and constant shifts, without the highest-bit search: 5
 * instructions fewer per start+stop (116 -> 111 under callgrind, the peer
 * benchmark at N = 1e5) and 7% less time there at 1e5, 4% at 1e6, 12% in
 * twbench's start+stop at 1e6 (each interleaved with the build before).
 * It takes the wheel's head, not pos, so that pos is read on the general
 * path only (passed by value, gcc read it before the fast path's test:
 * one instruction per start+stop; bench/HISTORY.md, 2026-11-29).
 * tests/test_wheel.c files timers at every level end and asks the
 * invariant checker (src/check.c, rule_slot) whether each is where the rule
 * puts it.
 */
static inline size_t tw__filing_slot(const struct tw__wheel_head *head,
                                     uint64_t deadline) {
  const uint64_t *level_end = head->level_end;
  unsigned level;
  if (deadline < level_end[1])
    return deadline < level_end[0]
               ? (size_t)(deadline & (TW__LEVEL_SLOTS - 1))
               : TW__LEVEL_SLOTS + (size_t)(deadline >> TW__LEVEL_BITS &
                                            (TW__LEVEL_SLOTS - 1));
  level = tw__highest_bit((deadline - head->pos) >> 1 | 1) / TW__LEVEL_BITS;
  level += deadline >= level_end[level];
  return (size_t)level * TW__LEVEL_SLOTS +
         (size_t)(deadline >> level * TW__LEVEL_BITS & (TW__LEVEL_SLOTS - 1));
}

/* The slot's minimum becomes `deadline`, exact; the caller marks the timer
 * with it as the holder (TW__MAY_HOLD_MIN, returned). */
static inline unsigned tw__slot_hold_min(struct tw__slot *slot,
                                         uint64_t deadline) {
  slot->min = deadline;
  slot->dirty = 0;
  return TW__MAY_HOLD_MIN;
}

/* A slot that holds timers receives `deadline`: below its minimum, or
 * meeting the bound of a dirty slot, it becomes the minimum (returns
 * TW__MAY_HOLD_MIN, for the timer); otherwise nothing changes (0). */
static inline unsigned tw__slot_lower_min(struct tw__slot *slot,
                                          uint64_t deadline) {
  if (deadline < slot->min || (deadline == slot->min && slot->dirty))
    return tw__slot_hold_min(slot, deadline);
  return 0;
}

/* The address of slot `index`, formed once: the compiler may not rebuild
 * it from the wheel and the index at each use, as gcc 12 does when a start
 * both stores it (in the links) and reads the slot's fields through it,
 * keeping two bases. Per start+stop, callgrind, the peer benchmark: 8
 * instructions fewer with gcc 12 (also in twbench), 6 with clang 14. */
static inline struct tw__slot *tw__slot_at(struct tw__wheel_head *head,
                                           size_t index) {
  struct tw__slot *slot = &head->slots[index];
#if defined(__GNUC__)
  __asm__("" : "+r"(slot)); /* an opaque copy: nothing is emitted */
#endif
  return slot;
}

/* Whether a timer filed in `slot`, which holds `count` timers, needs
 * nothing but tw__slot_join: the slot holds timers, or a stop left it
 * empty (it is occupied still, and the wheel's bounds cover it). Otherwise
 * only the library can file there (src/wheel.c, now_occupied). */
static inline int tw__slot_is_ready(const struct tw__slot *slot,
                                    uint32_t count) {
  return count != 0 || slot->occupied;
}

/*
 * Links a detached `t` with `deadline` (after pos; the caller stores it)
 * into slot `index` at its head or tail, keeps the slot's count and
 * minimum, and sets its tw__order to `order` (sequence and option bits)
 * with its place. The timer's two link stores are apart: stored together,
 * gcc pairs them into one vector store, which costs two instructions more
 * (2 per start+stop under callgrind).
 * `count` is the slot's count as the caller read it for
 * tw__slot_is_ready: read once, so that a slot holding timers is known
 * not to be empty without a second load (the peer benchmark's start+stop,
 * callgrind: 121.1 -> 116.1 instructions and one load fewer per pair).
 */
static inline void tw__slot_join(struct tw__slot *slot, uint32_t count,
                                 size_t index, tw_timer *t, uint64_t deadline,
                                 uint64_t order, int at_head) {
  struct tw__link *prev, *next;
  unsigned holds = count == 0 ? tw__slot_hold_min(slot, deadline)
                              : tw__slot_lower_min(slot, deadline);
  slot->count = count + 1;
  prev = at_head ? &slot->timers : slot->timers.prev;
  next = at_head ? slot->timers.next : &slot->timers;
  t->tw__link.prev = prev;
  prev->next = &t->tw__link;
  t->tw__link.next = next;
  next->prev = &t->tw__link;
  t->tw__order = order | holds | TW__IN_SLOT | index;
}

/* Unlinks `t` from `slot`, which it is in, and keeps the count; only the
 * timer holding the minimum can take it away (the slot is then dirty).
 * Returns the timers left. */
static inline uint32_t tw__slot_leave(struct tw__slot *slot, tw_timer *t) {
  struct tw__link *prev = t->tw__link.prev, *next = t->tw__link.next;
  prev->next = next;
  next->prev = prev;
  if (--slot->count != 0 && (t->tw__order & TW__MAY_HOLD_MIN) &&
      t->tw__deadline == slot->min)
    slot->dirty = 1;
  return slot->count;
}

/* The index of the slot a timer whose tw__order is `order` waits in, or
 * TW__SLOT_COUNT or more if it waits in none. In a slot is the highest
 * state (all of TW__STATE_MASK) and the index bits lie below the state
 * bits (both asserted in src/wheel.c), so that one subtraction gives the
 * index, or wraps for any other state, and one compare (tw__in_slot) tests
 * the state and the index. */
static inline uint64_t tw__waiting_slot(uint64_t order) {
  return (order & (TW__STATE_MASK | TW__INDEX_MASK)) - TW__IN_SLOT;
}

/* A timer whose tw__order is `order` waits in a slot (a valid one). */
static inline int tw__in_slot(uint64_t order) {
  return tw__waiting_slot(order) < TW__SLOT_COUNT;
}

/* A timer whose tw__order is `order` waits in a slot and is not the one
 * holding the slot's minimum: it may be re-armed with the store, for a
 * later deadline (touching no slot, so the slot's index goes untested: one
 * test on the hottest path) or an earlier one (tw__may_store_earlier). */
static inline int tw__may_store(uint64_t order) {
  return (order & (TW__STATE_MASK | TW__MAY_HOLD_MIN)) == TW__IN_SLOT;
}

/* A timer whose tw__order is `order` is inactive and not fixed-rate: an
 * inline start may file it (tw__file_inactive). */
static inline int tw__may_file(uint64_t order) {
  return (order & (TW__STATE_MASK | TW__FIXED_RATE)) == TW__IDLE;
}

/* Whether such a timer (tw__may_store of `order`) may take an earlier
 * `deadline` with the store as well: one after its slot's minimum, which
 * is no earlier than the slot's start (src/wheel.h), so the timer still
 * belongs where it is and the minimum holds, as in the library (src/wheel.c,
 * arm); the minimum itself goes to the library, which may make the timer
 * its holder. An idle timeout re-armed with less jitter mostly is after
 * it: resets have moved its deadline on past the slot it was filed in. */
static inline int tw__may_store_earlier(const struct tw__wheel_head *head,
                                        uint64_t order, uint64_t deadline) {
  return tw__in_slot(order) &&
         deadline > head->slots[tw__waiting_slot(order)].min;
}

/* Stores the callback and repeat of a start, plainly: every start has
 * just read the timer's tw__order, in the same struct, so the stores
 * mostly meet a line in the cache. Storing each only where it changed
 * (1b4a9d1) costs a compare and a branch each; on 2026-11-29 the plain
 * stores ran a start+stop at N = 1e6 4-5 ns faster and at 1e5 no faster
 * (bench/HISTORY.md, "Early morning (2026-11-29)"). */
static inline void tw__set_callback(tw_timer *t, tw_timer_cb cb,
                                    uint64_t repeat) {
  t->tw__cb = cb;
  t->tw__repeat = repeat;
}

/* The stop of `t`, which waits in one of the wheel's slots (tw__in_slot of
 * `order`, its tw__order): it leaves the slot, and the wheel counts one
 * timer less. A slot a stop empties stays occupied (src/wheel.c,
 * tw__timer_stop). */
static inline void tw__stop_waiting(struct tw__wheel_head *head, tw_timer *t,
                                    uint64_t order) {
  tw__slot_leave(&head->slots[tw__waiting_slot(order)], t);
  t->tw__order = (order & ~(uint64_t)TW__PLACE_MASK) | TW__IDLE;
  head->count--;
}

/* tw__stop_waiting if `t` waits in a slot: 1 if done, 0 if not. */
static inline int tw__stop_in_slot(struct tw__wheel_head *head, tw_timer *t) {
  uint64_t order = t->tw__order;
  if (!tw__in_slot(order))
    return 0;
  tw__stop_waiting(head, t, order);
  return 1;
}

/* Whether `deadline` lies after the wheel's time and before TW_NEVER: the
 * starts the inline paths can do (the library takes the past and the
 * saturated deadline). tw__store_restart and tw__file_inactive do not test
 * it: their callers must (with TW_NEVER the filing rule names no slot). */
static inline int tw__in_future(const struct tw__wheel_head *head,
                                uint64_t deadline) {
  return deadline > head->now && deadline < TW_NEVER;
}

/* The store, for `t` whose tw__order the caller has read (`order`), and a
 * deadline tw__in_future, but for its callback and repeat, which the
 * caller stores: 1 if done, 0 if the library must do the start.
 * Tried: reading next_seq into a local first, before the tests. The peer
 * benchmark's reset (g++) ran 3.7 ns faster at N = 1e6 (24 of 24
 * interleaved pairs) and 1.6 at 1e5 (18 of 24), but an early read with
 * the sequence passed in from tw__start_in_future ran no faster (10 of 20
 * pairs): the read alone does not explain the gain, which we take to
 * follow that build's code layout. In bench (gcc, C) the start of an
 * inactive timer took 2 instructions more (start+stop 118.8 -> 120.8
 * under callgrind; 0.6 ns slower, 5 of 20 pairs faster). Not kept. */
static inline int tw__store_restart(tw_wheel *w, tw_timer *t, uint64_t order,
                                    uint64_t deadline) {
  struct tw__wheel_head *head = tw__head(w);
  if (!tw__may_store(order))
    return 0;
  if (deadline < t->tw__deadline &&
      !tw__may_store_earlier(head, order, deadline))
    return 0;
  t->tw__deadline = deadline;
  t->tw__order = head->next_seq++ << TW__SEQ_SHIFT | (order & TW__TAG_MASK);
  return 1;
}

/* The start of an inactive `t` (tw__order `order`) for a deadline
 * tw__in_future, filed in an occupied slot: 1 if done, 0 if the library
 * must do the start. A fixed-rate timer (libevent's EV_PERSIST) is left to
 * the library, so that the new tw__order takes nothing from the old one: 5
 * instructions fewer per start (callgrind, bench's start+stop). */
static inline int tw__file_inactive(tw_wheel *w, tw_timer *t, uint64_t order,
                                    tw_timer_cb cb, uint64_t deadline,
                                    uint64_t repeat) {
  struct tw__wheel_head *head = tw__head(w);
  struct tw__slot *slot;
  size_t index;
  uint32_t count;
  if (!tw__may_file(order))
    return 0;
  index = tw__filing_slot(head, deadline);
  slot = tw__slot_at(head, index);
  count = slot->count;
  if (!tw__slot_is_ready(slot, count))
    return 0;
  tw__slot_join(slot, count, index, t, deadline,
                head->next_seq++ << TW__SEQ_SHIFT, 0);
  head->count++;
  tw__set_callback(t, cb, repeat);
  t->tw__deadline = deadline;
  return 1;
}

/* tw_timer_is_active(t) for a timer (not NULL), with no call in the
 * common cases: a timer waiting in a slot, an inactive one. */
static inline int tw__is_active(const tw_timer *t) {
  uint64_t state = t->tw__order & TW__STATE_MASK;
  if (state == TW__IN_SLOT)
    return 1;
  if (state == TW__IDLE)
    return 0;
  return tw_timer_is_active(t);
}

/* tw_timer_is_fixed_rate(t) with no call, for a timer (not NULL) that the
 * caller knows to be initialised or is about to start (the start refuses
 * zeroed memory, whatever this answered for it). */
static inline int tw__is_fixed_rate(const tw_timer *t) {
  return (t->tw__order & TW__FIXED_RATE) != 0;
}

TW_EXTERN extern const unsigned char tw__inline_abi_1;

/* Keeps a file's reference to an inline ABI name (see above) in the
 * program: a relocation the loader resolves at start, whatever the file
 * calls. `retain` only on ELF; where the toolchain cannot honour it, gcc
 * warns (-Wattributes), which the declarations below silence. */
#if defined(__GNUC__) && defined(__ELF__) && defined(__has_attribute)
#if __has_attribute(retain)
#define TW__KEEP_REFERENCE __attribute__((used, retain))
#endif
#endif
#if defined(__GNUC__) && !defined(TW__KEEP_REFERENCE)
#define TW__KEEP_REFERENCE __attribute__((used))
#endif

/* The core's own files define the name (TW__DEFINES_INLINE_ABI, src/). */
#if !defined(TW__NO_INLINE) && defined(TW__KEEP_REFERENCE) &&                  \
    !defined(TW__DEFINES_INLINE_ABI)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
TW__KEEP_REFERENCE static const unsigned char *const tw__inline_abi_ref =
    &tw__inline_abi_1;
#pragma GCC diagnostic pop
#endif

#ifndef TW__NO_INLINE

/* The inline start, for pointers tested and a deadline tw__in_future. */
static inline int tw__start_in_future(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                      uint64_t deadline, uint64_t repeat) {
  uint64_t order = t->tw__order;
  if (tw__store_restart(w, t, order, deadline)) {
    tw__set_callback(t, cb, repeat);
    return 0;
  }
  if (tw__file_inactive(w, t, order, cb, deadline, repeat))
    return 0;
  return tw__timer_start_nonnull(w, t, cb, deadline, repeat);
}

static inline int tw_timer_start_at(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                    uint64_t deadline, uint64_t repeat) {
  if (!w || !t || !cb)
    return tw__timer_start_at(w, t, cb, deadline, repeat); /* -EINVAL */
  if (!tw__in_future(tw__head(w), deadline))
    return tw__timer_start_nonnull(w, t, cb, deadline, repeat);
  return tw__start_in_future(w, t, cb, deadline, repeat);
}

/* now + timeout is tw__in_future when the timeout is not 0 and now is
 * below TW_NEVER - timeout: for a constant timeout (the idle reset), one
 * compare with a constant. Otherwise the library takes the start, with the
 * deadline TW_NEVER if the sum reaches it or wraps (it saturates). */
static inline int tw_timer_start(tw_wheel *w, tw_timer *t, tw_timer_cb cb,
                                 uint64_t timeout, uint64_t repeat) {
  uint64_t now;
  if (!w || !t || !cb)
    return tw__timer_start_at(w, t, cb, timeout, repeat); /* -EINVAL */
  now = tw__head(w)->now;
  if (timeout != 0 && now < TW_NEVER - timeout)
    return tw__start_in_future(w, t, cb, now + timeout, repeat);
  /* now itself, or a sum that reaches TW_NEVER or wraps */
  return tw__timer_start_nonnull(w, t, cb, timeout != 0 ? TW_NEVER : now,
                                 repeat);
}

static inline int tw_timer_stop(tw_wheel *w, tw_timer *t) {
  if (w && t && tw__stop_in_slot(tw__head(w), t))
    return 0;
  return tw__timer_stop(w, t);
}

static inline int tw_driver_started(tw_driver *d, uint64_t deadline) {
  if (d && deadline >= d->armed)
    return 0; /* armed early enough already */
  return tw__driver_started(d, deadline);
}

/* Timers remaining is the common case, so it is tested first (an open
 * driver's wheel is alive: the loop frees it only after closing). */
static inline void tw_driver_stopped(tw_driver *d) {
  if (d && !d->closed && tw__head(d->wheel)->count == 0)
    tw__driver_emptied(d);
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* TWHEEL_H */
