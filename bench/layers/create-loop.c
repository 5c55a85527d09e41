/*
 * The create-heavy core of an install or a build, without a shell or an interpreter
 * around it: N exclusive creates of one-byte files in DIR. Prints "N nanoseconds" for
 * the loop alone, so a sandbox's start and exit are not part of the figure.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: create-loop DIR COUNT\n");
    return 2;
  }
  long count = strtol(argv[2], NULL, 10);
  char path[4096];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/f%ld", argv[1], i);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0) {
      perror(path);
      return 1;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%ld %lld\n", count, (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
  return 0;
}
