/*
 * A disk that refuses to confirm SQLite's writes, for test/store/sqlite-commit-io-error.test.ts: loaded
 * with LD_PRELOAD into a server, it makes fsync and fdatasync of a WAL file (a path ending in -wal)
 * fail with EIO while the file named by FSYNC_FAILS_WHILE exists, as a failing disk, a thin volume
 * out of space or a network block device does. Everything else is passed through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failing(int fd) {
  const char *flag = getenv("FSYNC_FAILS_WHILE");
  if (flag == NULL || access(flag, F_OK) != 0) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 4) return 0;
  path[n] = '\0';
  return strcmp(path + n - 4, "-wal") == 0;
}

int fsync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (failing(fd)) { errno = EIO; return -1; }
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  if (failing(fd)) { errno = EIO; return -1; }
  return real(fd);
}
