/* twheel core as examples/poll-loop.c drives it: see impl_core.c. */
#define CORE_POLL 1
#include "impl_core.c"
