/*
 * Copies syscall arguments out of a target's memory, once. Everything the supervisor
 * checks and acts on comes from these copies, never from a second read, so a thread
 * that rewrites the buffer afterwards changes nothing we do.
 */
#include "sandbox.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static size_t page_size(void) {
  static size_t ps;
  if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
  return ps;
}

/* Reads exactly len bytes or fails with -EFAULT (a partial read means an unmapped page). */
int bsh_mem_read(pid_t tid, uint64_t addr, void *buf, size_t len) {
  if (len == 0) return 0;
  if (addr == 0) return -EFAULT;
  struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
  ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
  if (n < 0) return errno == ESRCH ? -ESRCH : -EFAULT;
  return (size_t)n == len ? 0 : -EFAULT;
}

/*
 * Reads a NUL-terminated string of at most cap-1 bytes. Chunks stop at page
 * boundaries so a string that ends just before an unmapped page still reads.
 * Returns its length, -ENAMETOOLONG, or -EFAULT.
 */
int bsh_mem_read_string(pid_t tid, uint64_t addr, char *buf, size_t cap) {
  if (addr == 0) return -EFAULT;
  size_t got = 0;
  while (got < cap) {
    uint64_t at = addr + got;
    size_t chunk = page_size() - (size_t)(at % page_size());
    if (chunk > cap - got) chunk = cap - got;
    int rc = bsh_mem_read(tid, at, buf + got, chunk);
    if (rc != 0) return rc;
    char *nul = memchr(buf + got, '\0', chunk);
    if (nul) return (int)(nul - buf);
    got += chunk;
  }
  buf[cap - 1] = '\0';
  return -ENAMETOOLONG;
}
