/*
 * uv-idle-reaper: a TCP echo server on 127.0.0.1 that closes connections
 * idle for longer than a timeout, with its own load generator in the same
 * loop. Every connection's idle timeout, every client's chat timer and the
 * progress ticker are tw_uv timers: the loop holds one uv_timer_t.
 *
 *   uv-idle-reaper [-n|--connections N] [-t|--timeout MS] [-s|--share F]
 *                  [-c|--chat MS] [-q|--quiet]
 *
 * Defaults: 10,000 connections, 2,000 ms, 0.2 chatty (a few bytes every
 * ~300 ms), the rest silent. The clients connect evenly over 1 s (half the
 * timeout if that is shorter). Silent connections are reaped about `timeout`
 * after they were accepted; chatty ones are kept until the run ends, half a
 * timeout after the last silent one was due, then closed by their clients. A
 * reap is early if it happens before the connection's deadline: uv_now() at its
 * last activity plus the timeout, checked against uv_hrtime(). Exit status 1 if
 * any reap was early, 2 if the run could not be set up or did not complete.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <twheel-uv.h>

enum {
  FD_RESERVE = 64,   /* stdio, the listener, the loop's own fds, valgrind */
  MAX_INFLIGHT = 128 /* connects pending at once: stay inside the backlog */
};

static struct {
  long n;
  uint64_t timeout, chat;
  double share;
  int quiet;
} opt = {10000, 2000, 300, 0.2, 0};

struct server_conn {
  uv_tcp_t tcp;
  tw_uv_timer_t idle; /* the idle timeout: 80 bytes, no allocation */
  uint64_t deadline;  /* measurement only: uv_now at last activity + timeout */
};

struct client {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  tw_uv_timer_t chat; /* chatty clients only */
  int chatty, writing, open;
};

static uv_loop_t loop;
static tw_uv *wheel;
static uv_tcp_t listener;
static struct sockaddr_storage server_addr;
static struct client *clients;
static tw_uv_timer_t ticker, ramp;
static long allowed; /* connections the ramp lets us open by now */
static uint64_t ramp_ms;
static tw_stats final_stats;

static struct {
  long attempted, connected, connect_failed, inflight, chatty_connected;
  long accepted, server_open, reaped, early, chatty_reaped, kept;
  long clients_open;
  unsigned long long bytes_echoed;
  unsigned long iterations;
  int max_uv_timers;
  size_t max_twheel_timers;
  uint64_t t0, ramp_done; /* uv_now */
  uint64_t hr0;
  int phase; /* 0 ramp, 1 run, 2 shutdown, 3 done */
  int incomplete;
} st;

static double *lateness;       /* ms, one per reap */
static double *first_lateness; /* ms, the first reap of each loop pass */
static long n_first;
static unsigned long last_reap_pass = (unsigned long)-1;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static char read_buf[65536];
static void alloc_cb(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  (void)size;
  *buf = uv_buf_init(read_buf, sizeof read_buf); /* consumed before return */
}

/* ---- server side ---- */

static void server_conn_closed(uv_handle_t *h) {
  free(h->data);
  st.server_open--;
}

static void server_close(struct server_conn *c) {
  tw_uv_timer_stop(&c->idle);
  uv_close((uv_handle_t *)&c->tcp, server_conn_closed);
}

static void on_idle(tw_uv_timer_t *t) {
  struct server_conn *c = t->data;
  uint64_t hr = uv_hrtime();
  uint64_t due_ns = c->deadline * 1000000;
  if (hr < due_ns)
    st.early++;
  else
    lateness[st.reaped - st.early] = (double)(hr - due_ns) / 1e6;
  if (hr >= due_ns && st.iterations != last_reap_pass) {
    /* The first reap of a pass waited only for the loop timer; later ones
     * also for the sockets closed before them in the same pass. */
    first_lateness[n_first++] = (double)(hr - due_ns) / 1e6;
    last_reap_pass = st.iterations;
  }
  st.reaped++;
  server_close(c);
}

static void reset_idle(struct server_conn *c) {
  /* The idle reset: a later deadline is a store in the wheel and never
   * touches the loop timer. */
  tw_uv_timer_start(&c->idle, on_idle, opt.timeout, 0);
  c->deadline = uv_now(&loop) + opt.timeout;
}

struct echo_req {
  uv_write_t req;
  char data[];
};

static void echo_done(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static void server_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct server_conn *c = s->data;
  if (n < 0) { /* EOF or reset: the client left */
    server_close(c);
    return;
  }
  if (n == 0)
    return;
  reset_idle(c);
  struct echo_req *e = malloc(sizeof *e + (size_t)n);
  if (!e)
    return;
  memcpy(e->data, buf->base, (size_t)n);
  uv_buf_t out = uv_buf_init(e->data, (unsigned)n);
  if (uv_write(&e->req, s, &out, 1, echo_done))
    free(e);
}

static void on_connection(uv_stream_t *server, int status) {
  struct server_conn *c;
  if (status < 0 || !(c = malloc(sizeof *c)))
    return;
  uv_tcp_init(&loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp)) {
    uv_close((uv_handle_t *)&c->tcp, server_conn_closed);
    st.server_open++;
    return;
  }
  st.accepted++;
  st.server_open++;
  tw_uv_timer_init(wheel, &c->idle);
  c->idle.data = c;
  reset_idle(c);
  uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, server_read);
}

/* ---- load generator ---- */

static void client_closed(uv_handle_t *h) {
  (void)h;
  st.clients_open--;
}

static void client_close(struct client *cl) {
  if (!cl->open)
    return;
  cl->open = 0;
  tw_uv_timer_stop(&cl->chat);
  uv_close((uv_handle_t *)&cl->tcp, client_closed);
}

static void chat_written(uv_write_t *req, int status) {
  struct client *cl = req->data;
  (void)status;
  cl->writing = 0;
}

static void on_chat(tw_uv_timer_t *t) {
  static char msg[] = "still here\n";
  struct client *cl = t->data;
  if (cl->writing)
    return;
  uv_buf_t buf = uv_buf_init(msg, sizeof msg - 1);
  cl->write.data = cl;
  if (uv_write(&cl->write, (uv_stream_t *)&cl->tcp, &buf, 1, chat_written) == 0)
    cl->writing = 1;
}

static void client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct client *cl = s->data;
  (void)buf;
  if (n > 0) {
    st.bytes_echoed += (unsigned long long)n;
  } else if (n < 0) { /* the server reaped us */
    if (cl->chatty && st.phase < 2)
      st.chatty_reaped++;
    client_close(cl);
  }
}

static void open_more(void);

static void on_connect(uv_connect_t *req, int status) {
  struct client *cl = req->data;
  st.inflight--;
  if (status < 0) {
    st.connect_failed++;
    client_close(cl);
  } else {
    st.connected++;
    uv_read_start((uv_stream_t *)&cl->tcp, alloc_cb, client_read);
    if (cl->chatty) {
      st.chatty_connected++;
      tw_uv_timer_start(&cl->chat, on_chat, 1 + next_rand() % opt.chat,
                        opt.chat);
    }
  }
  open_more();
}

static void open_more(void) {
  while (st.attempted < allowed && st.inflight < MAX_INFLIGHT) {
    long i = st.attempted++;
    struct client *cl = &clients[i];
    cl->chatty =
        (long)((double)(i + 1) * opt.share) > (long)((double)i * opt.share);
    cl->tcp.data = cl->connect.data = cl;
    tw_uv_timer_init(wheel, &cl->chat);
    cl->chat.data = cl;
    if (uv_tcp_init(&loop, &cl->tcp)) {
      st.connect_failed++;
      continue;
    }
    cl->open = 1;
    st.clients_open++;
    if (uv_tcp_connect(&cl->connect, &cl->tcp, (struct sockaddr *)&server_addr,
                       on_connect)) {
      st.connect_failed++;
      client_close(cl);
      continue;
    }
    st.inflight++;
  }
}

/* Opens the connections evenly over ramp_ms, as arrivals would come. */
static void on_ramp(tw_uv_timer_t *t) {
  uint64_t elapsed = uv_now(&loop) - st.t0;
  allowed = elapsed >= ramp_ms
                ? opt.n
                : (long)((double)opt.n * (double)elapsed / (double)ramp_ms) + 1;
  if (allowed > opt.n)
    allowed = opt.n;
  open_more();
  if (allowed == opt.n)
    tw_uv_timer_stop(t);
}

/* ---- progress, phases, summary ---- */

static void count_timers(uv_handle_t *h, void *arg) {
  if (h->type == UV_TIMER)
    ++*(int *)arg;
}

static void on_iteration(uv_check_t *c) {
  (void)c;
  st.iterations++;
}

static void adapter_closed(tw_uv *d) {
  tw_uv_stats(d, &final_stats); /* still valid inside close_cb */
}

static void progress(int final) {
  static int tty = -1;
  static uint64_t last_line;
  uint64_t now = uv_now(&loop);
  tw_stats s;
  if (opt.quiet)
    return;
  if (tty < 0)
    tty = isatty(2);
  if (!tty && !final && now - last_line < 1000)
    return;
  last_line = now;
  tw_uv_stats(wheel, &s);
  fprintf(stderr,
          "%s%5.1fs  open %ld/%ld  reaped %ld  alive %ld  twheel timers %zu  "
          "loop wakeups %llu%s",
          tty ? "\r" : "", (double)(now - st.t0) / 1000, st.connected, opt.n,
          st.reaped, st.server_open, tw_count(tw_uv_wheel(wheel)),
          (unsigned long long)s.wakeups, tty && !final ? "   " : "\n");
}

static void on_tick(tw_uv_timer_t *t) {
  uint64_t now = uv_now(&loop);
  int uv_timers = 0;
  (void)t;
  uv_walk(&loop, count_timers, &uv_timers);
  if (uv_timers > st.max_uv_timers)
    st.max_uv_timers = uv_timers;
  if (tw_count(tw_uv_wheel(wheel)) > st.max_twheel_timers)
    st.max_twheel_timers = tw_count(tw_uv_wheel(wheel));
  progress(0);

  if (st.phase == 0 && st.attempted == opt.n && st.inflight == 0) {
    st.phase = 1;
    st.ramp_done = now;
  }
  if (st.phase == 1) {
    long silent = st.connected - st.chatty_connected;
    int all_reaped = st.reaped >= silent;
    /* Keep chatty connections for half a timeout more than the last silent
     * one needed, so that "kept" means something. */
    if ((all_reaped && now >= st.ramp_done + opt.timeout * 3 / 2) ||
        now >= st.ramp_done + opt.timeout * 3 + 5000) {
      st.incomplete = !all_reaped;
      st.kept = st.server_open;
      st.phase = 2;
      for (long i = 0; i < opt.n; i++) /* the clients of kept ones leave */
        client_close(&clients[i]);
    }
  }
  if (st.phase == 2 && st.server_open == 0 && st.clients_open == 0) {
    st.phase = 3;
    progress(1);
    uv_close((uv_handle_t *)&listener, NULL);
    tw_uv_close(wheel, adapter_closed); /* the ticker is released with it */
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(const double *v, long n, double p) {
  long i = (long)(p * (double)(n - 1) + 0.5);
  return n ? v[i] : 0;
}

static void summary(void) {
  long n = st.reaped - st.early;
  qsort(lateness, (size_t)n, sizeof *lateness, cmp_double);
  qsort(first_lateness, (size_t)n_first, sizeof *first_lateness, cmp_double);
  printf("uv-idle-reaper: %ld connections, idle timeout %llu ms, %.0f%% chatty "
         "(every %llu ms), libuv %s\n",
         opt.n, (unsigned long long)opt.timeout, opt.share * 100,
         (unsigned long long)opt.chat, uv_version_string());
  printf("  connections opened    %ld (%ld failed)\n", st.connected,
         st.connect_failed);
  printf("  reaped (idle)         %ld\n", st.reaped);
  printf("  kept (chatty)         %ld (chatty ones reaped: %ld)\n", st.kept,
         st.chatty_reaped);
  printf(
      "  reap lateness         min %.2f  median %.2f  p99 %.2f  max %.2f ms\n",
      pct(lateness, n, 0), pct(lateness, n, 0.5), pct(lateness, n, 0.99),
      pct(lateness, n, 1));
  printf(
      "    first of each pass  median %.2f  max %.2f ms over %ld passes (later "
      "reaps in a pass\n"
      "                        also wait for the sockets closed before them)\n",
      pct(first_lateness, n_first, 0.5), pct(first_lateness, n_first, 1),
      n_first);
  printf("  reaped early          %ld\n", st.early);
  printf(
      "  UV_TIMER handles      %d in the loop, for up to %zu twheel timers\n",
      st.max_uv_timers, st.max_twheel_timers);
  printf("  loop wakeups          %llu by the loop timer, %llu of them fired "
         "nothing, %llu for the wheel's upkeep (%lu loop iterations)\n",
         (unsigned long long)final_stats.wakeups,
         (unsigned long long)final_stats.empty_wakeups,
         (unsigned long long)final_stats.maintenance, st.iterations);
  printf("  twheel callbacks      %llu fired; loop timer re-armed %llu times\n",
         (unsigned long long)final_stats.fired,
         (unsigned long long)final_stats.rearms);
  printf("  timer state per conn  %zu bytes (tw_uv_timer_t) vs %zu bytes "
         "(uv_timer_t)\n",
         sizeof(tw_uv_timer_t), sizeof(uv_timer_t));
  printf("  echoed                %llu bytes; wall time %.1f s\n",
         st.bytes_echoed, (double)(uv_hrtime() - st.hr0) / 1e9);
  if (st.incomplete)
    printf("  INCOMPLETE: %ld silent connections were never reaped\n",
           st.connected - st.chatty_connected - st.reaped);
}

/* Raises the soft fd limit to what 2n sockets need (up to the hard limit);
 * caps n when the hard limit is too low. */
static void fit_fd_limit(void) {
  struct rlimit rl;
  rlim_t need = (rlim_t)opt.n * 2 + FD_RESERVE;
  if (getrlimit(RLIMIT_NOFILE, &rl))
    return;
  if (rl.rlim_cur < need && rl.rlim_cur < rl.rlim_max) {
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur =
        rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need ? rl.rlim_max : need;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
      fprintf(stderr, "raised RLIMIT_NOFILE soft limit from %llu to %llu\n",
              (unsigned long long)old, (unsigned long long)rl.rlim_cur);
    else
      getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < need) {
    long capped =
        rl.rlim_cur > FD_RESERVE ? (long)(rl.rlim_cur - FD_RESERVE) / 2 : 0;
    fprintf(stderr,
            "RLIMIT_NOFILE %s limit is %llu: N capped at %ld (asked for %ld)\n",
            rl.rlim_cur == rl.rlim_max ? "hard" : "soft",
            (unsigned long long)rl.rlim_cur, capped, opt.n);
    opt.n = capped;
  }
}

static void usage(const char *prog) {
  fprintf(
      stderr,
      "usage: %s [-n|--connections N] [-t|--timeout MS] [-s|--share F]\n"
      "       [-c|--chat MS] [-q|--quiet]\n"
      "  N connections (default 10000), idle timeout MS (2000), share F of\n"
      "  chatty connections (0.2) writing every --chat MS (300, or a third\n"
      "  of a shorter timeout)\n",
      prog);
}

/* Reads one option: -x VALUE, --name VALUE or --name=VALUE. Returns the
 * option letter, '?' for an unknown one or a missing value. */
static int next_option(int argc, char **argv, int *i, const char **value) {
  static const char *const names[] = {"n--connections", "t--timeout",
                                      "s--share",       "c--chat",
                                      "q--quiet",       "h--help"};
  const char *arg = argv[*i];
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    const char *name = names[k] + 1;
    size_t len = strlen(name);
    int takes_value = names[k][0] != 'q' && names[k][0] != 'h';
    int is_short = arg[0] == '-' && arg[1] == names[k][0] && arg[2] == 0;
    if (!is_short && strncmp(arg, name, len) != 0)
      continue;
    if (!is_short && arg[len] == '=' && takes_value) {
      *value = arg + len + 1;
      return names[k][0];
    }
    if (!is_short && arg[len] != 0)
      continue;
    if (takes_value) {
      if (*i + 1 >= argc)
        return '?';
      *value = argv[++*i];
    }
    return names[k][0];
  }
  return '?';
}

int main(int argc, char **argv) {
  struct sockaddr_in addr;
  uv_check_t iteration_counter;
  int len = sizeof server_addr, r, chat_given = 0;

  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    switch (next_option(argc, argv, &i, &v)) {
    case 'n':
      opt.n = strtol(v, NULL, 10);
      break;
    case 't':
      opt.timeout = strtoull(v, NULL, 10);
      break;
    case 's':
      opt.share = strtod(v, NULL);
      break;
    case 'c':
      opt.chat = strtoull(v, NULL, 10);
      chat_given = 1;
      break;
    case 'q':
      opt.quiet = 1;
      break;
    case 'h':
      usage(argv[0]);
      return 0;
    default:
      fprintf(stderr, "%s: bad option %s\n", argv[0], argv[i]);
      usage(argv[0]);
      return 2;
    }
  }
  if (!chat_given && opt.chat >= opt.timeout) /* chatty must beat the timeout */
    opt.chat = opt.timeout / 3;
  if (opt.n < 1 || opt.timeout < 1 || opt.chat < 1 || opt.share < 0 ||
      opt.share > 1 || opt.chat >= opt.timeout) {
    usage(argv[0]);
    fprintf(stderr, "need n >= 1, 0 <= share <= 1, 1 <= chat interval < "
                    "timeout (3 ms or more)\n");
    return 2;
  }
  fit_fd_limit();
  if (opt.n < 1)
    return 2;
  clients = calloc((size_t)opt.n, sizeof *clients);
  lateness = calloc((size_t)opt.n, sizeof *lateness);
  first_lateness = calloc((size_t)opt.n, sizeof *first_lateness);
  if (!clients || !lateness || !first_lateness)
    return 2;

  uv_loop_init(&loop);
  if ((r = tw_uv_init(&loop, &wheel))) {
    fprintf(stderr, "tw_uv_init: %s\n", uv_strerror(r));
    return 2;
  }
  uv_ip4_addr("127.0.0.1", 0, &addr);
  uv_tcp_init(&loop, &listener);
  if ((r = uv_tcp_bind(&listener, (struct sockaddr *)&addr, 0)) ||
      (r = uv_listen((uv_stream_t *)&listener, 1024, on_connection)) ||
      (r = uv_tcp_getsockname(&listener, (struct sockaddr *)&server_addr,
                              &len))) {
    fprintf(stderr, "listen on 127.0.0.1: %s\n", uv_strerror(r));
    return 2;
  }
  uv_check_init(&loop, &iteration_counter);
  uv_check_start(&iteration_counter, on_iteration);
  uv_unref((uv_handle_t *)&iteration_counter);

  st.t0 = uv_now(&loop);
  st.hr0 = uv_hrtime();
  tw_uv_timer_init(wheel, &ticker);
  tw_uv_timer_start(&ticker, on_tick, 100, 100);
  ramp_ms = opt.timeout / 2 < 1000 ? opt.timeout / 2 : 1000;
  tw_uv_timer_init(wheel, &ramp);
  tw_uv_timer_start(&ramp, on_ramp, 0, 1);
  uv_run(&loop, UV_RUN_DEFAULT);

  uv_close((uv_handle_t *)&iteration_counter, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  r = uv_loop_close(&loop);
  summary();
  free(clients);
  free(lateness);
  free(first_lateness);
  if (r)
    fprintf(stderr, "uv_loop_close: %s\n", uv_strerror(r));
  return st.early ? 1 : st.incomplete || r ? 2 : 0;
}
