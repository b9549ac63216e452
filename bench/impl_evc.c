/* libevent common timeouts: one FIFO per duration, only its head in the heap. */
#define EV_COMMON 1
#include "event_family.h"

BENCH_IMPL_DEFINE(bench_impl_evc, "evc", "libevent common timeouts");
