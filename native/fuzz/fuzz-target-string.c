/*
 * libFuzzer target: reading a NUL-terminated string out of a target's memory
 * (native/sandbox/target-memory.c, bsh_mem_read_string), the first step of every path
 * the supervisor decides on. The "target" is this process (process_vm_readv on our own
 * pid): the input's bytes are placed so they end at a chosen distance before an
 * unmapped guard page, and the result must be exactly:
 *   the string's length, when its NUL comes within `cap` bytes and before the guard;
 *   -ENAMETOOLONG with buf[cap-1] == NUL, when `cap` bytes hold no NUL;
 *   -EFAULT, when the guard page comes first;
 * and nothing is written past buf[cap-1]. Chunking at page boundaries is what is tested.
 * Input: u16 cap, u16 gap (bytes between the data's end and the guard), u8 flags, data.
 */
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz-input.h"

#define PAGES 4 /* mapped pages before the guard */
static uint8_t *g_region;
static size_t g_page;
static pid_t g_self;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_page = (size_t)sysconf(_SC_PAGESIZE);
  g_region = mmap(NULL, (PAGES + 1) * g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_region == MAP_FAILED || mprotect(g_region + PAGES * g_page, g_page, PROT_NONE) != 0) abort();
  g_self = getpid();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_input in = {data, size, 0};
  /* Callers pass BSH_PATH_MAX or the size of a name buffer; any capacity from 1 is tested. */
  size_t cap = 1 + (size_t)(fuzz_u16(&in) % (2 * BSH_PATH_MAX));
  size_t gap = (size_t)(fuzz_u16(&in) % (2 * g_page));
  uint8_t flags = fuzz_u8(&in);
  const uint8_t *bytes = data + in.at;
  size_t len = size - in.at;
  size_t room = PAGES * g_page;
  if (len + gap > room) len = room > gap ? room - gap : 0;

  /* Fill the mapped pages with a non-NUL filler (or NULs), then the data right before the gap. */
  memset(g_region, (flags & 1) ? 0 : 'x', room);
  uint8_t *start = g_region + room - gap - len;
  memcpy(start, bytes, len);
  size_t avail = room - (size_t)(start - g_region); /* readable bytes from start */

  uint8_t *buf = malloc(cap); /* exactly cap bytes */
  if (!buf) abort();
  memset(buf, 0xA5, cap);
  uint64_t addr = (flags & 2) ? 0 : (uint64_t)(uintptr_t)start;
  int rc = bsh_mem_read_string(g_self, addr, (char *)buf, cap);

  if (addr == 0) {
    FUZZ_CHECK(rc == -EFAULT, "NULL address gave %d", rc);
  } else {
    const uint8_t *nul = memchr(start, 0, avail < cap ? avail : cap);
    if (nul) {
      size_t want = (size_t)(nul - start);
      FUZZ_CHECK(rc == (int)want, "rc=%d want length %zu (cap %zu, avail %zu)", rc, want, cap, avail);
      FUZZ_CHECK(memcmp(buf, start, want + 1) == 0, "copied bytes differ");
    } else if (cap <= avail) {
      FUZZ_CHECK(rc == -ENAMETOOLONG, "rc=%d want -ENAMETOOLONG (cap %zu, avail %zu)", rc, cap, avail);
      FUZZ_CHECK(buf[cap - 1] == '\0', "not terminated");
      FUZZ_CHECK(memcmp(buf, start, cap - 1) == 0, "copied bytes differ");
    } else {
      FUZZ_CHECK(rc == -EFAULT, "rc=%d want -EFAULT (cap %zu, avail %zu)", rc, cap, avail);
    }
  }
  free(buf);
  return 0;
}
