/*
 * brokered-request: send one line to the broker's Unix socket and print its one-line
 * answer. Shell scripts (the brokered-bin dispatcher) call it, so it starts in a
 * millisecond where a Node client would take tens.
 *
 *   brokered-request [--timeout-ms N] [LINE]
 *
 * LINE is the argument, or else the first line of stdin. The socket is
 * $BROKERED_SHELL_SOCKET. The answer line goes to stdout with its newline.
 *
 * Exit status:
 *   0  answered: the answer is on stdout (whatever it says);
 *   2  no broker there: the variable is unset or empty, the socket does not exist, or
 *      nothing listens on it (ENOENT, ENOTDIR, ECONNREFUSED);
 *   1  anything else, so a caller fails closed: no answer within the timeout after
 *      connecting, the broker closed without a whole line, an oversized or NUL-bearing
 *      answer, a connect refused for another reason (EACCES, a path too long for
 *      sun_path, a full backlog until the deadline), or a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EXIT_ANSWERED 0
#define EXIT_FAILED 1
#define EXIT_NO_BROKER 2

#define SOCKET_VARIABLE "BROKERED_SHELL_SOCKET"
#define DEFAULT_TIMEOUT_MS 30000L
#define MAX_TIMEOUT_MS 86400000L
/* Longer than the broker accepts (64 KiB by default); the broker then answers an error. */
#define MAX_REQUEST_BYTES (1024 * 1024)
#define MAX_ANSWER_BYTES (4 * 1024 * 1024)
/* While the broker's backlog is full, retry the connect this often until the deadline. */
#define BUSY_RETRY_MS 5

static const char *program = "brokered-request";

static void complain(const char *format, const char *detail) {
  fprintf(stderr, "%s: ", program);
  fprintf(stderr, format, detail);
  fputc('\n', stderr);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until the deadline, at least 0, at most INT_MAX for poll(). */
static int remaining(int64_t deadline) {
  int64_t left = deadline - now_ms();
  if (left < 0) return 0;
  return left > INT_MAX ? INT_MAX : (int)left;
}

static int parse_timeout(const char *text, long *out) {
  if (text == NULL || *text == '\0') return -1;
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == NULL || *end != '\0' || value <= 0 || value > MAX_TIMEOUT_MS) return -1;
  *out = value;
  return 0;
}

/* Waits until fd is ready for `events` or the deadline passes. 1 ready, 0 timed out, -1 error. */
static int wait_for(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int rc = poll(&p, 1, remaining(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return -1;
    if (rc == 0) return 0;
    return 1;
  }
}

/* The request line from stdin: up to the first newline or EOF, without the newline. */
static char *read_stdin_line(size_t *length) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) return NULL;
  for (;;) {
    int c = getchar();
    if (c == EOF || c == '\n') break;
    if (len + 1 >= MAX_REQUEST_BYTES) {
      free(buf);
      errno = EMSGSIZE;
      return NULL;
    }
    if (len + 1 >= cap) {
      char *grown = realloc(buf, cap * 2);
      if (grown == NULL) {
        free(buf);
        return NULL;
      }
      buf = grown;
      cap *= 2;
    }
    buf[len++] = (char)c;
  }
  if (ferror(stdin)) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[len] = '\0';
  *length = len;
  return buf;
}

/* 0 connected; EXIT_NO_BROKER or EXIT_FAILED otherwise (message already printed). */
static int connect_to(int fd, const char *path, int64_t deadline) {
  struct sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  size_t length = strlen(path);
  if (length >= sizeof address.sun_path) {
    complain("socket path too long for a Unix socket: %s", path);
    return EXIT_FAILED;
  }
  memcpy(address.sun_path, path, length + 1);
  for (;;) {
    if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) return 0;
    int error = errno;
    if (error == EINTR) continue;
    if (error == EINPROGRESS) {
      int ready = wait_for(fd, POLLOUT, deadline);
      if (ready <= 0) {
        complain("timed out connecting to %s", path);
        return EXIT_FAILED;
      }
      int so_error = 0;
      socklen_t so_length = sizeof so_error;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &so_length) != 0) so_error = errno;
      if (so_error == 0) return 0;
      error = so_error;
    }
    if (error == EAGAIN) {
      /* The broker is there but its backlog is full: wait for room until the deadline. */
      if (remaining(deadline) == 0) {
        complain("broker busy until the deadline: %s", path);
        return EXIT_FAILED;
      }
      struct timespec pause = {.tv_sec = 0, .tv_nsec = BUSY_RETRY_MS * 1000000L};
      nanosleep(&pause, NULL);
      continue;
    }
    if (error == ENOENT || error == ENOTDIR || error == ECONNREFUSED) {
      fprintf(stderr, "%s: no broker at %s: %s\n", program, path, strerror(error));
      return EXIT_NO_BROKER;
    }
    fprintf(stderr, "%s: cannot connect to %s: %s\n", program, path, strerror(error));
    return EXIT_FAILED;
  }
}

static int send_all(int fd, const char *data, size_t length, int64_t deadline) {
  size_t sent = 0;
  while (sent < length) {
    ssize_t n = send(fd, data + sent, length - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int ready = wait_for(fd, POLLOUT, deadline);
      if (ready == 0) {
        complain("%s", "timed out sending the request");
        return -1;
      }
      if (ready < 0) return -1;
      continue;
    }
    fprintf(stderr, "%s: sending the request failed: %s\n", program, n < 0 ? strerror(errno) : "connection closed");
    return -1;
  }
  return 0;
}

/* Reads up to and including the first newline. Returns the length, or -1 (message printed). */
static ssize_t receive_line(int fd, char **out, int64_t deadline) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    complain("%s", "out of memory");
    return -1;
  }
  for (;;) {
    if (len == cap) {
      if (cap >= MAX_ANSWER_BYTES) {
        complain("%s", "answer longer than the limit; refusing it");
        free(buf);
        return -1;
      }
      char *grown = realloc(buf, cap * 2);
      if (grown == NULL) {
        complain("%s", "out of memory");
        free(buf);
        return -1;
      }
      buf = grown;
      cap *= 2;
    }
    ssize_t n = recv(fd, buf + len, cap - len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int ready = wait_for(fd, POLLIN, deadline);
      if (ready == 0) {
        complain("%s", "timed out waiting for the answer");
        free(buf);
        return -1;
      }
      if (ready < 0) {
        free(buf);
        return -1;
      }
      continue;
    }
    if (n < 0) {
      fprintf(stderr, "%s: reading the answer failed: %s\n", program, strerror(errno));
      free(buf);
      return -1;
    }
    if (n == 0) {
      complain("%s", len == 0 ? "the broker closed the connection without answering" : "the broker closed the connection mid-answer");
      free(buf);
      return -1;
    }
    char *newline = memchr(buf + len, '\n', (size_t)n);
    len += (size_t)n;
    if (newline != NULL) {
      size_t line = (size_t)(newline - buf) + 1;
      if (memchr(buf, '\0', line) != NULL) {
        complain("%s", "the answer contains a NUL byte; refusing it");
        free(buf);
        return -1;
      }
      *out = buf;
      return (ssize_t)line;
    }
  }
}

static void usage(void) {
  fprintf(stderr, "usage: %s [--timeout-ms N] [LINE]\n", program);
}

int main(int argc, char **argv) {
  long timeout_ms = DEFAULT_TIMEOUT_MS;
  const char *line_argument = NULL;
  int i = 1;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(arg, "--timeout-ms") == 0) {
      if (i + 1 >= argc || parse_timeout(argv[i + 1], &timeout_ms) != 0) {
        complain("%s", "--timeout-ms needs a whole number of milliseconds above 0");
        return EXIT_FAILED;
      }
      i++;
      continue;
    }
    if (strncmp(arg, "--timeout-ms=", 13) == 0) {
      if (parse_timeout(arg + 13, &timeout_ms) != 0) {
        complain("%s", "--timeout-ms needs a whole number of milliseconds above 0");
        return EXIT_FAILED;
      }
      continue;
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage();
      return EXIT_FAILED;
    }
    if (arg[0] == '-' && arg[1] == '-') {
      complain("unknown option %s", arg);
      usage();
      return EXIT_FAILED;
    }
    break;
  }
  if (i < argc) line_argument = argv[i++];
  if (i < argc) {
    complain("%s", "one LINE at most");
    usage();
    return EXIT_FAILED;
  }

  signal(SIGPIPE, SIG_IGN);

  const char *socket_path = getenv(SOCKET_VARIABLE);
  if (socket_path == NULL || *socket_path == '\0') {
    complain("%s", SOCKET_VARIABLE " is not set: no broker");
    return EXIT_NO_BROKER;
  }

  char *request = NULL;
  size_t request_length = 0;
  if (line_argument != NULL) {
    request_length = strlen(line_argument);
    if (request_length > 0 && line_argument[request_length - 1] == '\n') request_length--;
    if (memchr(line_argument, '\n', request_length) != NULL) {
      complain("%s", "LINE must be a single line");
      return EXIT_FAILED;
    }
    if (request_length >= MAX_REQUEST_BYTES) {
      complain("%s", "LINE is too long");
      return EXIT_FAILED;
    }
    request = malloc(request_length + 1);
    if (request == NULL) {
      complain("%s", "out of memory");
      return EXIT_FAILED;
    }
    memcpy(request, line_argument, request_length);
  } else {
    size_t length = 0;
    char *line = read_stdin_line(&length);
    if (line == NULL) {
      fprintf(stderr, "%s: cannot read the request from stdin: %s\n", program, strerror(errno));
      return EXIT_FAILED;
    }
    request = realloc(line, length + 1);
    if (request == NULL) {
      free(line);
      complain("%s", "out of memory");
      return EXIT_FAILED;
    }
    request_length = length;
  }
  request[request_length++] = '\n';

  int64_t deadline = now_ms() + timeout_ms;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    fprintf(stderr, "%s: socket: %s\n", program, strerror(errno));
    free(request);
    return EXIT_FAILED;
  }
  int connected = connect_to(fd, socket_path, deadline);
  if (connected != 0) {
    close(fd);
    free(request);
    return connected;
  }
  if (send_all(fd, request, request_length, deadline) != 0) {
    close(fd);
    free(request);
    return EXIT_FAILED;
  }
  free(request);

  char *answer = NULL;
  ssize_t answer_length = receive_line(fd, &answer, deadline);
  close(fd);
  if (answer_length < 0) return EXIT_FAILED;
  size_t written = fwrite(answer, 1, (size_t)answer_length, stdout);
  free(answer);
  if (written != (size_t)answer_length || fflush(stdout) != 0) {
    complain("%s", "cannot write the answer to stdout");
    return EXIT_FAILED;
  }
  return EXIT_ANSWERED;
}
