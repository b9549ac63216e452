/*
 * event-idle-reaper: a libevent echo server on 127.0.0.1 that closes
 * connections idle for longer than a timeout, with every idle timeout on one
 * twheel behind one libevent timer event, and a built-in load generator.
 *
 *   event-idle-reaper [-n|--connections N] [-t|--timeout MS]
 *                     [-s|--share CHATTY_SHARE] [-c|--chat MS] [-q|--quiet]
 *
 * The load generator runs in a forked child (its own event base, its own
 * descriptor table, so N connections need N descriptors per process, not
 * 2N). Its chatty clients write more often than the timeout and must be
 * kept; its idle clients write a few times, then go silent and must be
 * reaped, never before their last activity plus the timeout. The server
 * prints progress every second and a summary at the end; the exit status
 * is 1 if any reap came early.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <twheel-event.h>

#define MS 1000000LL /* ns */
#define FD_SPARE 64  /* descriptors a process needs besides its connections */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct timeval tv_ms(long ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
  return tv;
}

static unsigned long rand_next(unsigned long *state) { /* LCG, good enough */
  *state = *state * 6364136223846793005UL + 1442695040888963407UL;
  return (*state >> 33) & 0x7fffffff;
}

static struct {
  long n;       /* connections */
  long timeout; /* idle timeout, ms */
  double share; /* of the connections that keep talking */
  long chat;    /* ms between their writes; 0: random, timeout/10..timeout/3 */
  int quiet;    /* no progress lines */
} opt = {10000, 2000, 0.2, 0, 0};

/* Client i is chatty: spreads floor(n * share) chatty ones evenly. */
static int is_chatty(long i) {
  return (long)((double)(i + 1) * opt.share) != (long)((double)i * opt.share);
}

/* ------------------------------------------------------------------------
 * The server: what a real program keeps per connection is `struct conn`,
 * with its idle timeout embedded (no allocation per timer).
 */
struct conn {
  struct bufferevent *bev;
  tw_ev_timer idle; /* reset on every read */
  int64_t last;     /* CLOCK_MONOTONIC just before the latest reset */
  char kind;        /* 'C' chatty, 'I' idle, 0 not yet known */
  struct conn *prev, *next;
};

static struct server {
  struct event_base *base;
  tw_ev *timers;
  struct evconnlistener *listener;
  struct conn live; /* list head */
  tw_ev_timer progress, end;
  struct timeval idle_tv;
  int64_t started;
  long accepted, open, reaped, reaped_chatty, early, closed_by_client;
  int64_t *lateness; /* ns, one per reap */
  int timer_events, max_timer_events, timer_events_at_max;
  size_t max_timers;
  long reads;
  pid_t child;
  int ending;
} srv;

static int count_timeouts(const struct event_base *b, const struct event *ev,
                          void *arg) {
  (void)b;
  if (event_pending(ev, EV_TIMEOUT, NULL))
    ++*(int *)arg;
  return 0;
}

/*
 * Counts the events in the base that have a timeout pending. Sampled from
 * I/O callbacks: inside a twheel callback the adapter's own event has just
 * fired and is not pending, so a sample there would say 0.
 */
static void sample_timer_events(void) {
  int n = 0;
  size_t timers = tw_count(tw_ev_wheel(srv.timers));
  event_base_foreach_event(srv.base, count_timeouts, &n);
  srv.timer_events = n;
  if (n > srv.max_timer_events)
    srv.max_timer_events = n;
  if (timers > srv.max_timers) {
    srv.max_timers = timers;
    srv.timer_events_at_max = n;
  }
}

static void conn_unlink(struct conn *c) {
  c->prev->next = c->next;
  c->next->prev = c->prev;
  srv.open--;
}

static void conn_touch(struct conn *c) {
  c->last = mono_ns();
  tw_ev_timer_add(&c->idle, &srv.idle_tv); /* the idle reset: O(1) */
}

static void on_idle(evutil_socket_t fd, short what, void *arg) {
  struct conn *c = arg;
  int64_t late = mono_ns() - (c->last + srv.idle_tv.tv_sec * 1000 * MS +
                              srv.idle_tv.tv_usec * 1000LL);
  (void)fd;
  (void)what;
  if (late < 0)
    srv.early++;
  if (srv.reaped < opt.n) /* a stranger may connect too */
    srv.lateness[srv.reaped] = late;
  srv.reaped++;
  srv.reaped_chatty += c->kind == 'C';
  conn_unlink(c);
  bufferevent_free(c->bev); /* closes the socket */
  free(c);                  /* the timer with it: safe in its own callback */
}

static void on_read(struct bufferevent *bev, void *arg) {
  struct conn *c = arg;
  struct evbuffer *in = bufferevent_get_input(bev);
  if (!c->kind)
    evbuffer_copyout(in, &c->kind, 1);
  evbuffer_add_buffer(bufferevent_get_output(bev), in); /* echo */
  conn_touch(c);
  if (++srv.reads % 1000 == 0)
    sample_timer_events();
}

static void on_conn_event(struct bufferevent *bev, short what, void *arg) {
  struct conn *c = arg;
  (void)bev;
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
    srv.closed_by_client++;
    tw_ev_timer_del(&c->idle);
    conn_unlink(c);
    bufferevent_free(c->bev);
    free(c);
  }
}

static void on_end(evutil_socket_t fd, short what, void *arg);

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int len, void *arg) {
  struct conn *c = calloc(1, sizeof *c);
  (void)l;
  (void)sa;
  (void)len;
  (void)arg;
  if (!c ||
      !(c->bev = bufferevent_socket_new(srv.base, fd, BEV_OPT_CLOSE_ON_FREE))) {
    free(c);
    evutil_closesocket(fd);
    return;
  }
  c->next = srv.live.next;
  c->prev = &srv.live;
  c->next->prev = c;
  srv.live.next = c;
  srv.accepted++;
  srv.open++;
  bufferevent_setcb(c->bev, on_read, NULL, on_conn_event, c);
  bufferevent_enable(c->bev, EV_READ | EV_WRITE);
  tw_ev_timer_assign(&c->idle, srv.timers, 0, on_idle, c);
  conn_touch(c);
  if (srv.accepted % 1000 == 0 || srv.accepted == opt.n)
    sample_timer_events();
  if (srv.accepted == opt.n) {
    /* Everyone is in. Idle clients go silent within timeout/2 of their
     * connect: give them a full timeout more to be reaped; the chatty ones
     * live through more than two timeouts. */
    struct timeval tv = tv_ms(opt.timeout * 5 / 2);
    tw_ev_timer_add(&srv.end, &tv);
  }
}

static void on_progress(evutil_socket_t fd, short what, void *arg) {
  tw_stats s;
  size_t timers = tw_count(tw_ev_wheel(srv.timers));
  (void)fd;
  (void)what;
  (void)arg;
  tw_ev_stats(srv.timers, &s);
  if (opt.quiet)
    return;
  printf("%5.1fs  accepted %6ld  open %6ld  reaped %6ld  early %ld  "
         "twheel timers %6zu  timer events %d  wakeups %llu (%llu empty)\n",
         (double)(mono_ns() - srv.started) / 1e9, srv.accepted, srv.open,
         srv.reaped, srv.early, timers, srv.timer_events,
         (unsigned long long)s.wakeups, (unsigned long long)s.empty_wakeups);
  fflush(stdout);
}

static void on_end(evutil_socket_t fd, short what, void *arg) {
  on_progress(fd, what, arg); /* last sample, before the cleanup */
  srv.ending = 1;
  tw_ev_timer_del(&srv.progress);
  tw_ev_timer_del(&srv.end);
  evconnlistener_free(srv.listener);
  srv.listener = NULL;
  while (srv.live.next != &srv.live) { /* the kept connections */
    struct conn *c = srv.live.next;
    tw_ev_timer_del(&c->idle);
    conn_unlink(c);
    bufferevent_free(c->bev);
    free(c);
  }
  /* Nothing is left in the base: event_base_dispatch returns. */
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double pct_ms(const int64_t *sorted, long n, double p) { /* n > 0 */
  return (double)sorted[(long)(p * (double)(n - 1) + 0.5)] / 1e6;
}

/* ------------------------------------------------------------------------
 * The load generator (child process): N clients, each with one twheel
 * timer of its own on the child's base.
 */
struct client {
  struct bufferevent *bev;
  tw_ev_timer talk;
  int chatty;
  int connected;
  int extra; /* idle clients: messages left before going silent */
  long period;
};

static struct {
  struct event_base *base;
  tw_ev *timers;
  tw_ev_timer batch;
  struct sockaddr_in addr;
  long started, connected, failed, closed;
  unsigned long rng;
} lg;

static void client_free(struct client *cl) {
  tw_ev_timer_del(&cl->talk);
  bufferevent_free(cl->bev);
  free(cl);
}

static void on_talk(evutil_socket_t fd, short what, void *arg) {
  struct client *cl = arg;
  (void)fd;
  (void)what;
  bufferevent_write(cl->bev, "ping\n", 5);
  if (!cl->chatty && cl->extra-- > 0) {
    struct timeval tv = tv_ms(
        1 + (long)(rand_next(&lg.rng) % (unsigned long)(opt.timeout / 6)));
    tw_ev_timer_add(&cl->talk, &tv);
  }
}

static void on_client_read(struct bufferevent *bev, void *arg) {
  struct evbuffer *in = bufferevent_get_input(bev);
  (void)arg;
  evbuffer_drain(in, evbuffer_get_length(in));
}

static void on_client_event(struct bufferevent *bev, short what, void *arg) {
  struct client *cl = arg;
  (void)bev;
  if (what & BEV_EVENT_CONNECTED) {
    struct timeval tv;
    cl->connected = 1;
    lg.connected++;
    bufferevent_write(cl->bev, cl->chatty ? "C hello\n" : "I hello\n", 8);
    if (cl->chatty) {
      tv = tv_ms(cl->period);
      tw_ev_timer_add(&cl->talk, &tv);
    } else if (cl->extra > 0) {
      cl->extra--;
      tv = tv_ms(1 +
                 (long)(rand_next(&lg.rng) % (unsigned long)(opt.timeout / 6)));
      tw_ev_timer_add(&cl->talk, &tv);
    }
    return;
  }
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
    if (cl->connected)
      lg.closed++; /* EOF, or a reset when the server closed with data unread */
    else
      lg.failed++;
    client_free(cl);
  }
}

/* Connects in batches so the listen backlog never overflows. */
static void on_batch(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  for (int i = 0; i < 250 && lg.started < opt.n; i++, lg.started++) {
    struct client *cl = calloc(1, sizeof *cl);
    if (!cl) {
      lg.failed++;
      continue;
    }
    cl->chatty = is_chatty(lg.started);
    cl->extra = (int)(rand_next(&lg.rng) % 4);
    cl->period = opt.chat ? opt.chat
                          : opt.timeout / 10 +
                                (long)(rand_next(&lg.rng) %
                                       (unsigned long)(opt.timeout / 3 -
                                                       opt.timeout / 10 + 1));
    cl->bev = bufferevent_socket_new(lg.base, -1, BEV_OPT_CLOSE_ON_FREE);
    tw_ev_timer_assign(&cl->talk, lg.timers, cl->chatty ? EV_PERSIST : 0,
                       on_talk, cl);
    bufferevent_setcb(cl->bev, on_client_read, NULL, on_client_event, cl);
    bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(cl->bev, (struct sockaddr *)&lg.addr,
                                   sizeof lg.addr) != 0) {
      lg.failed++;
      client_free(cl);
    }
  }
  if (lg.started >= opt.n)
    tw_ev_timer_del(&lg.batch);
}

static int run_load(int port) {
  struct timeval tick = tv_ms(2);
  tw_stats s;
  memset(&lg.addr, 0, sizeof lg.addr);
  lg.addr.sin_family = AF_INET;
  lg.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  lg.addr.sin_port = htons((unsigned short)port);
  lg.rng = (unsigned long)getpid();
  lg.base = event_base_new();
  lg.timers = lg.base ? tw_ev_new(lg.base) : NULL;
  if (!lg.timers)
    return 2;
  tw_ev_timer_assign(&lg.batch, lg.timers, EV_PERSIST, on_batch, NULL);
  tw_ev_timer_add(&lg.batch, &tick);
  event_base_dispatch(lg.base); /* until the server closed every client */
  tw_ev_stats(lg.timers, &s);
  printf("load generator: %ld connected, %ld failed, %ld closed by the server; "
         "its own %llu twheel timer callbacks took %llu wakeups\n",
         lg.connected, lg.failed, lg.closed, (unsigned long long)s.fired,
         (unsigned long long)s.wakeups);
  fflush(stdout);
  tw_ev_free(lg.timers);
  event_base_free(lg.base);
  libevent_global_shutdown();
  return lg.failed ? 3 : 0;
}

/* ------------------------------------------------------------------------ */

static void usage(const char *argv0, int status) {
  fprintf(stderr,
          "usage: %s [-n|--connections N] [-t|--timeout MS] "
          "[-s|--share CHATTY_SHARE] [-c|--chat MS] [-q|--quiet]\n"
          "  defaults: -n 10000 -t 2000 -s 0.2, chatty clients write every "
          "timeout/10..timeout/3 ms\n",
          argv0);
  exit(status);
}

/* Short or long options, the value in the next argument or after '='. */
static void parse_options(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    static const char *names[][2] = {{"-n", "--connections"},
                                     {"-t", "--timeout"},
                                     {"-s", "--share"},
                                     {"-c", "--chat"}};
    const char *arg = argv[i], *value = NULL;
    int which = -1;
    char *end;
    if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) {
      opt.quiet = 1;
      continue;
    }
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
      usage(argv[0], 0);
    for (int k = 0; k < 4 && which < 0; k++) {
      size_t len = strlen(names[k][1]);
      if (!strcmp(arg, names[k][0]) || !strcmp(arg, names[k][1])) {
        which = k;
        value = i + 1 < argc ? argv[++i] : NULL;
      } else if (!strncmp(arg, names[k][1], len) && arg[len] == '=') {
        which = k;
        value = arg + len + 1;
      }
    }
    if (which < 0 || !value || !*value)
      usage(argv[0], 2);
    errno = 0;
    if (which == 2)
      opt.share = strtod(value, &end);
    else {
      long v = strtol(value, &end, 10);
      *(which == 0 ? &opt.n : which == 1 ? &opt.timeout : &opt.chat) = v;
    }
    if (*end || errno)
      usage(argv[0], 2);
  }
  if (opt.n < 1 || opt.timeout < 20 || opt.timeout > 3600000 ||
      !(opt.share >= 0 && opt.share <= 1) || opt.chat < 0 ||
      opt.chat >= opt.timeout) {
    fprintf(stderr, "need N >= 1, 20 <= timeout <= 3600000, 0 <= share <= 1, "
                    "0 <= chat < timeout\n");
    usage(argv[0], 2);
  }
}

/* Raises RLIMIT_NOFILE to the hard limit; caps N if that is not enough. */
static void fit_descriptors(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)opt.n + FD_SPARE > rl.rlim_cur) {
    long cap = (long)rl.rlim_cur - FD_SPARE;
    printf("note: RLIMIT_NOFILE hard limit is %llu: connections capped from "
           "%ld to %ld\n",
           (unsigned long long)rl.rlim_cur, opt.n, cap);
    opt.n = cap;
  }
}

static int listen_loopback(int *port) {
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;
  int one = 1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
      listen(fd, 4096) != 0 ||
      getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sin.sin_port);
  return fd;
}

int main(int argc, char **argv) {
  int port, fd, status = 0;
  long chatty_n = 0;
  tw_stats s;

  parse_options(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  fit_descriptors();
  for (long i = 0; i < opt.n; i++)
    chatty_n += is_chatty(i);
  if ((fd = listen_loopback(&port)) < 0) {
    perror("listen on 127.0.0.1");
    return 2;
  }
  printf("event-idle-reaper: %ld connections to 127.0.0.1:%d (%ld chatty, "
         "%ld idle), idle timeout %ld ms, libevent %s\n",
         opt.n, port, chatty_n, opt.n - chatty_n, opt.timeout,
         event_get_version());
  fflush(stdout);

  srv.child = fork();
  if (srv.child < 0) {
    perror("fork");
    return 2;
  }
  if (srv.child == 0) {
    close(fd);
    exit(run_load(port));
  }

  srv.base = event_base_new();
  srv.timers = srv.base ? tw_ev_new(srv.base) : NULL;
  srv.lateness = calloc((size_t)opt.n, sizeof *srv.lateness);
  if (!srv.timers || !srv.lateness || evutil_make_socket_nonblocking(fd) != 0 ||
      !(srv.listener = evconnlistener_new(srv.base, on_accept, NULL,
                                          LEV_OPT_CLOSE_ON_FREE, 0, fd))) {
    fprintf(stderr, "server setup failed\n");
    kill(srv.child, SIGTERM);
    return 2;
  }
  printf("using %s; each connection's idle timeout is a tw_ev_timer on one "
         "twheel\n",
         event_base_get_method(srv.base));
  fflush(stdout);
  srv.live.next = srv.live.prev = &srv.live;
  srv.idle_tv = tv_ms(opt.timeout);
  srv.started = mono_ns();
  tw_ev_timer_assign(&srv.progress, srv.timers, EV_PERSIST, on_progress, NULL);
  tw_ev_timer_assign(&srv.end, srv.timers, 0, on_end, NULL);
  {
    struct timeval second = {1, 0};
    /* If the load never completes, end anyway. */
    struct timeval give_up = tv_ms(10000 + opt.n + 3 * opt.timeout);
    tw_ev_timer_add(&srv.progress, &second);
    tw_ev_timer_add(&srv.end, &give_up);
  }
  event_base_dispatch(srv.base);

  if (waitpid(srv.child, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    printf("note: the load generator exited with status %d\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);

  tw_ev_stats(srv.timers, &s);
  if (srv.reaped > opt.n)
    srv.reaped = opt.n;
  qsort(srv.lateness, (size_t)srv.reaped, sizeof *srv.lateness, cmp_i64);
  printf("\nsummary\n");
  printf("  connections     %ld accepted of %ld (%ld chatty, %ld idle)\n",
         srv.accepted, opt.n, chatty_n, opt.n - chatty_n);
  printf("  reaped          %ld (idle %ld of %ld, chatty %ld)\n", srv.reaped,
         srv.reaped - srv.reaped_chatty, opt.n - chatty_n, srv.reaped_chatty);
  printf("  kept            %ld (still open at the end)\n",
         srv.accepted - srv.reaped - srv.closed_by_client);
  if (srv.reaped)
    printf("  lateness        min %.2f ms, median %.2f ms, p99 %.2f ms, max "
           "%.2f ms (after last activity + timeout)\n",
           pct_ms(srv.lateness, srv.reaped, 0),
           pct_ms(srv.lateness, srv.reaped, 0.5),
           pct_ms(srv.lateness, srv.reaped, 0.99),
           pct_ms(srv.lateness, srv.reaped, 1));
  else
    printf("  lateness        (nothing reaped)\n");
  printf("  early reaps     %ld\n", srv.early);
  printf("  timer events    %d in the base with %zu twheel timers active "
         "(most ever seen: %d)\n",
         srv.timer_events_at_max, srv.max_timers, srv.max_timer_events);
  printf("  loop wakeups    %llu (%llu fired nothing), %llu timers fired, "
         "%llu re-arms\n",
         (unsigned long long)s.wakeups, (unsigned long long)s.empty_wakeups,
         (unsigned long long)s.fired, (unsigned long long)s.rearms);
  printf("  timer state     %zu bytes per connection (tw_ev_timer) vs %zu "
         "(struct event) each, plus one wheel per base\n",
         sizeof(tw_ev_timer), event_get_struct_event_size());
  printf("  run time        %.1f s\n", (double)(mono_ns() - srv.started) / 1e9);

  tw_ev_free(srv.timers);
  event_base_free(srv.base);
  free(srv.lateness);
  libevent_global_shutdown();
  return srv.early ? 1 : 0;
}
