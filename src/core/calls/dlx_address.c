/* dlx_address.c - what can be checked about a raw address a producer hands over
 * (the legacy `__c_dlpack_exchange_api__` int) before it is dereferenced. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "dlx_core.h"

int dlx_address_plausible(uint64_t addr, uint64_t align, uint64_t page, char *err,
                          size_t errlen) {
  if (addr == 0) return dlx_set_err(err, errlen, "is 0 (a NULL pointer)");
  if (addr < page)
    return dlx_set_err(err, errlen, "0x%llx lies in the first page of memory, which is never mapped",
                       (unsigned long long)addr);
  if (align > 1 && addr % align != 0)
    return dlx_set_err(err, errlen, "0x%llx is not aligned to %llu bytes",
                       (unsigned long long)addr, (unsigned long long)align);
  return 0;
}

int dlx_address_readable(const void *p, size_t n) {
  /* The kernel reads the bytes for us: an unmapped address is EFAULT, not SIGSEGV. */
  int fd[2];
  if (n == 0) return 1;
  if (pipe2(fd, O_CLOEXEC) != 0) return -1;
  ssize_t w;
  do w = write(fd[1], p, n);
  while (w < 0 && errno == EINTR);
  int e = errno;
  close(fd[0]);
  close(fd[1]);
  if (w == (ssize_t)n) return 1;
  return w >= 0 || e == EFAULT ? 0 : -1; /* a short write stopped at a fault */
}
