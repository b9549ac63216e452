/*
 * The loader refuses a program built with the inline paths when its
 * library is older than the header (twheel.h, "Inline fast paths"; the same
 * in twheel-uv.h). An older library is this build's own, relinked with the
 * one name hidden that the inline paths require (tests/abi/stale-*). The
 * probes (tests/abi/probe.c) run in a child process with LD_LIBRARY_PATH
 * naming the stale library's directory. The paths come from the
 * environment that tests/abi/meson.build gives this test.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

struct outcome {
  int exit_code;     /* -1: killed by a signal */
  char output[8192]; /* stdout and stderr, in the order written */
};

static const char *env(const char *name) {
  const char *value = getenv(name);
  cr_assert_not_null(value, "%s is unset: run this through meson test", name);
  return value;
}

/* This environment with LD_LIBRARY_PATH set to `dirs` (removed when NULL):
 * built before the fork, so that the child only calls execve. */
static char **child_environment(const char *dirs, char *setting, size_t size) {
  size_t n = 0, kept = 0;
  char **envp;
  while (environ[n])
    n++;
  envp = calloc(n + 2, sizeof *envp);
  cr_assert_not_null(envp);
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LD_LIBRARY_PATH=", 16) != 0)
      envp[kept++] = environ[i];
  if (dirs) {
    cr_assert(snprintf(setting, size, "LD_LIBRARY_PATH=%s", dirs) < (int)size);
    envp[kept++] = setting;
  }
  return envp;
}

/* Runs the probe named by the variable `probe` with LD_LIBRARY_PATH = the
 * directories named by `libdirs` (unset when NULL). */
static struct outcome run(const char *probe, const char *libdirs) {
  const char *path = env(probe);
  char setting[4096];
  char **envp =
      child_environment(libdirs ? env(libdirs) : NULL, setting, sizeof setting);
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
    execve(path, (char *[]){(char *)path, NULL}, envp);
    fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
    _exit(126);
  }
  close(pipe_fds[1]);
  free(envp);
  while ((n = read(pipe_fds[0], o.output + used, sizeof o.output - 1 - used)) !=
         0) {
    if (n < 0 && errno == EINTR)
      continue;
    cr_assert_gt(n, 0, "read: %s", strerror(errno));
    used += (size_t)n;
  }
  o.output[used] = '\0';
  close(pipe_fds[0]);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

/* The probe fired its timer on `library` from the directory named by the
 * variable `dir` (the first of a list separated by ':'). The loader names
 * the file as it found it (through $ORIGIN/.. for the real ones), so the
 * directories are compared resolved. */
static void assert_fired(struct outcome o, const char *library,
                         const char *dir) {
  char first_dir[PATH_MAX], wanted[PATH_MAX], found[PATH_MAX], *path, *slash;
  const char *dirs = env(dir);
  size_t first = strcspn(dirs, ":");
  cr_assert_eq(o.exit_code, 0, "exit %d: %s", o.exit_code, o.output);
  cr_assert_eq(strncmp(o.output, "fired by ", 9), 0, "%s", o.output);
  path = o.output + 9;
  path[strcspn(path, "\n")] = '\0';
  slash = strrchr(path, '/');
  cr_assert_not_null(slash, "%s", path);
  cr_assert_str_eq(slash + 1, library);
  *slash = '\0';
  cr_assert_not_null(realpath(path, found), "%s", path);
  cr_assert(first < sizeof first_dir);
  memcpy(first_dir, dirs, first);
  first_dir[first] = '\0';
  cr_assert_not_null(realpath(first_dir, wanted), "%s", first_dir);
  cr_assert_str_eq(found, wanted);
}

static void assert_refused(struct outcome o, const char *name) {
  cr_assert_neq(o.exit_code, 0, "ran with the stale library: %s", o.output);
  cr_assert_null(strstr(o.output, "fired"), "%s", o.output);
  cr_assert_not_null(strstr(o.output, "undefined symbol"), "%s", o.output);
  cr_assert_not_null(strstr(o.output, name), "%s", o.output);
}

Test(abi, core_inline_paths_run_with_the_library_they_were_built_for) {
  assert_fired(run("ABI_PROBE_CORE", NULL), "libtwheel.so.0", "ABI_CORE_DIR");
#ifdef ABI_GC
  assert_fired(run("ABI_PROBE_CORE_GC", NULL), "libtwheel.so.0",
               "ABI_CORE_DIR");
#endif
}

Test(abi, core_inline_paths_refuse_a_library_without_their_layout_name) {
  assert_refused(run("ABI_PROBE_CORE", "ABI_STALE_CORE_DIR"),
                 "tw__inline_abi_1");
#ifdef ABI_GC
  /* Linked with --gc-sections, which drops what nothing calls. */
  assert_refused(run("ABI_PROBE_CORE_GC", "ABI_STALE_CORE_DIR"),
                 "tw__inline_abi_1");
#endif
  /* The same library serves a program built without the inline paths. */
  assert_fired(run("ABI_PROBE_CORE_EXPORTED", "ABI_STALE_CORE_DIR"),
               "libtwheel.so.0", "ABI_STALE_CORE_DIR");
}

#ifdef ABI_UV
Test(abi, uv_inline_paths_run_with_the_library_they_were_built_for) {
  /* The adapter's library is built in adapters/uv. */
  assert_fired(run("ABI_PROBE_UV", NULL), "libtwheel-uv.so.0", "ABI_UV_DIR");
}

Test(abi, uv_inline_paths_refuse_a_library_without_their_layout_name) {
  assert_refused(run("ABI_PROBE_UV", "ABI_STALE_UV_DIR"),
                 "tw__uv_inline_abi_2");
  assert_fired(run("ABI_PROBE_UV_EXPORTED", "ABI_STALE_UV_DIR"),
               "libtwheel-uv.so.0", "ABI_STALE_UV_DIR");
}
#endif
