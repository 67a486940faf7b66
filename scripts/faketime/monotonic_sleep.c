/* Preloaded before Debian 12's libfaketime 0.9.10 by scripts/test-dates.
 *
 * Python 3.11's time.sleep() waits with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME).
 * With the monotonic clock faked (libfaketime's default), Python's lock timeouts
 * (sem_clockwait on CLOCK_MONOTONIC, which libfaketime does not intercept) wait for ever;
 * with it excluded (FAKETIME_DONT_FAKE_MONOTONIC=1), libfaketime still shifts that absolute
 * deadline by the fake offset and the kernel answers EINVAL (libfaketime issue #426, fixed
 * after 0.9.10). The monotonic clock being real, its deadline needs no shifting: this
 * passes monotonic sleeps straight to the kernel and every other one on to libfaketime.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *req,
                    struct timespec *rem) {
  static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
  if (clock_id == CLOCK_MONOTONIC) {
    /* clock_nanosleep returns the error number; the raw syscall sets errno. */
    return syscall(SYS_clock_nanosleep, clock_id, flags, req, rem) == 0 ? 0 : errno;
  }
  if (!next) next = dlsym(RTLD_NEXT, "clock_nanosleep");
  return next(clock_id, flags, req, rem);
}
