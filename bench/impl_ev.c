/* Per-connection libevent timers: event_add() into the base's min-heap. */
#define EV_COMMON 0
#include "event_family.h"

BENCH_IMPL_DEFINE(bench_impl_ev, "ev", "per-connection libevent event_add (heap)");
