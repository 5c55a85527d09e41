/*
 * The network bench's client and server, so both sides do the same work natively and
 * in the sandbox, and time themselves (their start is not what is measured):
 *   net-client serve PORT          accept forever; read each connection to its end, answer "k"
 *   net-client connect PORT N      N connections to 127.0.0.1:PORT, each closed at once
 *   net-client send PORT BYTES     one connection, BYTES written in 1 MiB write(2)s, then
 *                                  shutdown and wait for the server's "k"
 * connect and send print the seconds their loop took.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in at(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  struct sockaddr_in a = at(atoi(argv[2]));
  static char buf[1 << 20];
  if (strcmp(argv[1], "serve") == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 1024) != 0) return 3;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
      int c = accept(s, NULL, NULL);
      if (c < 0) continue;
      while (read(c, buf, sizeof buf) > 0) {
      }
      (void)!write(c, "k", 1);
      close(c);
    }
  }
  if (argc < 4) return 2;
  long n = atol(argv[3]);
  double start = now();
  if (strcmp(argv[1], "connect") == 0) {
    for (long i = 0; i < n; i++) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) return 4;
      close(s);
    }
  } else if (strcmp(argv[1], "send") == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) return 4;
    for (long sent = 0; sent < n;) {
      ssize_t w = write(s, buf, (size_t)(n - sent < (long)sizeof buf ? n - sent : (long)sizeof buf));
      if (w <= 0) return 5;
      sent += w;
    }
    shutdown(s, SHUT_WR);
    char k;
    if (read(s, &k, 1) != 1) return 6;
    close(s);
  } else {
    return 2;
  }
  printf("%.6f\n", now() - start);
  return 0;
}
