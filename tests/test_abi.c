/*
 * The loader refuses a program built with the inline paths when its
 * library is older than the header (twheel.h, "Inline fast paths"; the same
 * in twheel-uv.h). An older library is simulated by this build's own
 * library with the one name hidden that the inline paths require
 * (tests/abi/hide-*.map): ABI_STALE_CORE and ABI_STALE_UV. The probes
 * (tests/abi/probe.c) run in a child process, with LD_LIBRARY_PATH naming a
 * directory where the stale library stands under its soname.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct outcome {
  int exit_code; /* -1: killed by a signal */
  char out[4096];
  char err[4096];
};

/* Reads what is left on `fd` into buf (NUL-terminated, truncated). */
static void drain(int fd, char *buf, size_t size) {
  size_t used = 0;
  ssize_t n;
  while ((n = read(fd, buf + used, size - 1 - used)) > 0)
    used += (size_t)n;
  buf[used] = '\0';
  close(fd);
}

/* Runs `probe` with LD_LIBRARY_PATH = libdir (unset when NULL). The probes
 * print a line or two, which a pipe holds until the child has exited. */
static struct outcome run(const char *probe, const char *libdir) {
  struct outcome o;
  int out[2], err[2], status;
  pid_t pid;
  cr_assert_eq(pipe(out), 0);
  cr_assert_eq(pipe(err), 0);
  pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (libdir)
      setenv("LD_LIBRARY_PATH", libdir, 1);
    else
      unsetenv("LD_LIBRARY_PATH");
    execl(probe, probe, (char *)NULL);
    _exit(126);
  }
  close(out[1]);
  close(err[1]);
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  drain(out[0], o.out, sizeof o.out);
  drain(err[0], o.err, sizeof o.err);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

/* A fresh directory holding `link` -> `target` (and a second pair when
 * link2 is not NULL); written into dir. */
static void lib_dir(char *dir, size_t size, const char *link,
                    const char *target, const char *link2,
                    const char *target2) {
  char path[PATH_MAX];
  cr_assert(snprintf(dir, size, "/tmp/twheel-abi-XXXXXX") < (int)size);
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/%s", dir, link);
  cr_assert_eq(symlink(target, path), 0);
  if (link2) {
    snprintf(path, sizeof path, "%s/%s", dir, link2);
    cr_assert_eq(symlink(target2, path), 0);
  }
}

static void remove_lib_dir(const char *dir, const char *link,
                           const char *link2) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, link);
  unlink(path);
  if (link2) {
    snprintf(path, sizeof path, "%s/%s", dir, link2);
    unlink(path);
  }
  rmdir(dir);
}

static void assert_fired(struct outcome o) {
  cr_assert_eq(o.exit_code, 0, "exit %d, stderr: %s", o.exit_code, o.err);
  cr_assert_str_eq(o.out, "fired\n");
}

static void assert_refused(struct outcome o, const char *name) {
  cr_assert_neq(o.exit_code, 0, "ran with the stale library: %s", o.out);
  cr_assert_str_empty(o.out);
  cr_assert_not_null(strstr(o.err, "undefined symbol"), "stderr: %s", o.err);
  cr_assert_not_null(strstr(o.err, name), "stderr: %s", o.err);
}

Test(abi, core_inline_paths_run_with_the_library_they_were_built_for) {
  assert_fired(run(ABI_PROBE_CORE, NULL));
}

Test(abi, core_inline_paths_refuse_a_library_without_their_layout_name) {
  char dir[64];
  lib_dir(dir, sizeof dir, "libtwheel.so.0", ABI_STALE_CORE, NULL, NULL);
  struct outcome inline_probe = run(ABI_PROBE_CORE, dir);
  struct outcome exported_probe = run(ABI_PROBE_CORE_EXPORTED, dir);
  remove_lib_dir(dir, "libtwheel.so.0", NULL);
  assert_refused(inline_probe, "tw__inline_abi_1");
  /* The same library serves a program built without the inline paths. */
  assert_fired(exported_probe);
}

#ifdef ABI_PROBE_UV
Test(abi, uv_inline_paths_run_with_the_library_they_were_built_for) {
  assert_fired(run(ABI_PROBE_UV, NULL));
}

Test(abi, uv_inline_paths_refuse_a_library_without_their_layout_name) {
  char dir[64];
  lib_dir(dir, sizeof dir, "libtwheel-uv.so.0", ABI_STALE_UV, "libtwheel.so.0",
          ABI_CORE);
  struct outcome inline_probe = run(ABI_PROBE_UV, dir);
  struct outcome exported_probe = run(ABI_PROBE_UV_EXPORTED, dir);
  remove_lib_dir(dir, "libtwheel-uv.so.0", "libtwheel.so.0");
  assert_refused(inline_probe, "tw__uv_inline_abi_1");
  assert_fired(exported_probe);
}
#endif
