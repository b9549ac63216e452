/*
 * The loader refuses a program built with the inline paths when its
 * library is older than the header (twheel.h, "Inline fast paths"; the same
 * in twheel-uv.h). An older library is this build's own, relinked with the
 * one name hidden that the inline paths require (tests/abi/stale-*). The
 * probes (tests/abi/probe.c) run in a child process with LD_LIBRARY_PATH
 * naming the stale library's directory. The paths come from the
 * environment that tests/abi/meson.build gives this test.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct outcome {
  int exit_code;     /* -1: killed by a signal */
  char output[8192]; /* stdout and stderr, in the order written */
};

static const char *env(const char *name) {
  const char *value = getenv(name);
  cr_assert_not_null(value, "%s is unset: run this through meson test", name);
  return value;
}

/* Runs the probe named by the variable `probe` with LD_LIBRARY_PATH = the
 * directories named by `libdirs` (unset when NULL). */
static struct outcome run(const char *probe, const char *libdirs) {
  const char *path = env(probe), *dirs = libdirs ? env(libdirs) : NULL;
  struct outcome o;
  size_t used = 0;
  ssize_t n;
  int pipe_fds[2], status;
  pid_t pid;
  cr_assert_eq(pipe(pipe_fds), 0);
  pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    close(pipe_fds[0]);
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[1]);
    if (dirs)
      setenv("LD_LIBRARY_PATH", dirs, 1);
    else
      unsetenv("LD_LIBRARY_PATH");
    execl(path, path, (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
    _exit(126);
  }
  close(pipe_fds[1]);
  while ((n = read(pipe_fds[0], o.output + used, sizeof o.output - 1 - used)) >
         0)
    used += (size_t)n;
  o.output[used] = '\0';
  close(pipe_fds[0]);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

static void assert_fired(struct outcome o) {
  cr_assert_eq(o.exit_code, 0, "exit %d: %s", o.exit_code, o.output);
  cr_assert_str_eq(o.output, "fired\n");
}

static void assert_refused(struct outcome o, const char *name) {
  cr_assert_neq(o.exit_code, 0, "ran with the stale library: %s", o.output);
  cr_assert_null(strstr(o.output, "fired"), "%s", o.output);
  cr_assert_not_null(strstr(o.output, "undefined symbol"), "%s", o.output);
  cr_assert_not_null(strstr(o.output, name), "%s", o.output);
}

Test(abi, core_inline_paths_run_with_the_library_they_were_built_for) {
  assert_fired(run("ABI_PROBE_CORE", NULL));
  assert_fired(run("ABI_PROBE_CORE_GC", NULL));
}

Test(abi, core_inline_paths_refuse_a_library_without_their_layout_name) {
  assert_refused(run("ABI_PROBE_CORE", "ABI_STALE_CORE_DIR"),
                 "tw__inline_abi_1");
  /* Linked with --gc-sections, which drops what nothing calls. */
  assert_refused(run("ABI_PROBE_CORE_GC", "ABI_STALE_CORE_DIR"),
                 "tw__inline_abi_1");
  /* The same library serves a program built without the inline paths. */
  assert_fired(run("ABI_PROBE_CORE_EXPORTED", "ABI_STALE_CORE_DIR"));
}

#ifdef ABI_UV
Test(abi, uv_inline_paths_run_with_the_library_they_were_built_for) {
  assert_fired(run("ABI_PROBE_UV", NULL));
}

Test(abi, uv_inline_paths_refuse_a_library_without_their_layout_name) {
  assert_refused(run("ABI_PROBE_UV", "ABI_STALE_UV_DIR"),
                 "tw__uv_inline_abi_1");
  assert_fired(run("ABI_PROBE_UV_EXPORTED", "ABI_STALE_UV_DIR"));
}
#endif
