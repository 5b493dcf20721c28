#define _GNU_SOURCE /* pipe2 */
#include "agent/ncclenv/run_fabric_env.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Executable and not a folder (no stat: glibc 2.33 made it a symbol of its own). */
static int executable(const char* path) {
  if (access(path, X_OK) != 0) return 0;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) close(fd);
  return fd < 0;
}

/* The file mapped at `anchor`, from /proc/self/maps (dladdr would need glibc 2.34's libc). */
static int own_file(const void* anchor, char* path, size_t size) {
  FILE* f = fopen("/proc/self/maps", "re");
  if (f == NULL) return -1;
  char line[4096 + 256];
  int found = -1;
  const uintptr_t at = (uintptr_t)anchor;
  while (found != 0 && fgets(line, sizeof line, f) != NULL) {
    unsigned long lo = 0, hi = 0;
    int name_at = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &name_at) < 2 || name_at == 0)
      continue;
    if (at < lo || at >= hi || line[name_at] != '/') continue;
    size_t n = strcspn(line + name_at, "\n");
    if (n + 1 > size) break;
    memcpy(path, line + name_at, n);
    path[n] = '\0';
    found = 0;
  }
  fclose(f);
  return found;
}

int fabric_env_find(const void* anchor, char* path, size_t size, char* why, size_t why_size) {
  const char* given = getenv("FABRIC_ENV_BIN");
  if (given != NULL && *given) {
    if (strlen(given) + 1 > size || !executable(given)) {
      snprintf(why, why_size, "FABRIC_ENV_BIN=%.200s is not an executable file", given);
      return -1;
    }
    strcpy(path, given);
    return 0;
  }
  char self[4096];
  if (own_file(anchor, self, sizeof self) == 0) {
    char* slash = strrchr(self, '/');
    if (slash != NULL) *slash = '\0';
    /* Beside it (a folder mounted into a container), the package's folder
     * (/usr/lib/<triplet>/fabric-agent), a Debian libdir, or a plain lib/ under a prefix. */
    static const char* const kRelative[] = {"/fabric-env", "/../../../bin/fabric-env",
                                            "/../../bin/fabric-env", "/../bin/fabric-env"};
    for (size_t i = 0; i < sizeof kRelative / sizeof kRelative[0]; i++) {
      int n = snprintf(path, size, "%s%s", self, kRelative[i]);
      if (n > 0 && (size_t)n < size && executable(path)) return 0;
    }
  }
  if (executable("/usr/bin/fabric-env") && size > sizeof "/usr/bin/fabric-env") {
    strcpy(path, "/usr/bin/fabric-env");
    return 0;
  }
  snprintf(why, why_size, "no fabric-env beside %s nor in /usr/bin (FABRIC_ENV_BIN names one)",
           self[0] == '/' ? self : "this library");
  return -1;
}

/* Keeps the last `cap - 1` bytes of stderr: its last line is the reason. */
static void keep_tail(char* err, size_t cap, size_t* err_len, const char* buf, size_t r) {
  if (r >= cap - 1) {
    memcpy(err, buf + r - (cap - 1), cap - 1);
    *err_len = cap - 1;
    return;
  }
  if (*err_len + r > cap - 1) {
    size_t drop = *err_len + r - (cap - 1);
    memmove(err, err + drop, *err_len - drop);
    *err_len -= drop;
  }
  memcpy(err + *err_len, buf, r);
  *err_len += r;
}

static const char* last_line(char* err, size_t err_len) {
  err[err_len] = '\0';
  while (err_len > 0 && (err[err_len - 1] == '\n' || err[err_len - 1] == '\r')) {
    err[--err_len] = '\0';
  }
  char* last = strrchr(err, '\n');
  return last != NULL ? last + 1 : err;
}

int fabric_env_run(char* const argv[], long timeout_ms, size_t max_out, char** out, size_t* out_len,
                   char* why, size_t why_size) {
  *out = NULL;
  *out_len = 0;
  why[0] = '\0';
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0) {
    snprintf(why, why_size, "pipe: %s", strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (out_pipe[i] >= 0) close(out_pipe[i]);
      if (err_pipe[i] >= 0) close(err_pipe[i]);
    }
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none); /* A thread may have signals blocked. */
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    snprintf(why, why_size, "cannot run %.200s: %s", argv[0], strerror(rc));
    close(out_pipe[0]);
    close(err_pipe[0]);
    return -1;
  }

  size_t cap = 8192, len = 0, err_len = 0;
  char* buf = malloc(cap);
  char err[512];
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2, failed = buf == NULL;
  if (failed) snprintf(why, why_size, "out of memory");
  const long deadline = now_ms() + timeout_ms;
  while (!failed && open_fds > 0) {
    long left = deadline - now_ms();
    if (left <= 0) {
      snprintf(why, why_size, "%.200s did not answer within %ld ms", argv[0], timeout_ms);
      failed = 1;
      break;
    }
    int n = poll(fds, 2, (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      snprintf(why, why_size, "poll: %s", strerror(errno));
      failed = 1;
      break;
    }
    for (int i = 0; i < 2 && !failed; i++) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char chunk[4096];
      ssize_t r = read(fds[i].fd, chunk, sizeof chunk);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
        continue;
      }
      if (i == 1) {
        keep_tail(err, sizeof err, &err_len, chunk, (size_t)r);
        continue;
      }
      if (len + (size_t)r > max_out) {
        snprintf(why, why_size, "%.200s printed more than %zu bytes", argv[0], max_out);
        failed = 1;
        break;
      }
      if (len + (size_t)r + 1 > cap) {
        while (len + (size_t)r + 1 > cap) cap *= 2;
        char* grown = realloc(buf, cap);
        if (grown == NULL) {
          snprintf(why, why_size, "out of memory");
          failed = 1;
          break;
        }
        buf = grown;
      }
      memcpy(buf + len, chunk, (size_t)r);
      len += (size_t)r;
    }
  }
  for (int i = 0; i < 2; i++) {
    if (fds[i].fd >= 0) close(fds[i].fd);
  }
  /* Reaped, bounded: one that closed its pipes may still run. A process that ignores SIGCHLD
   * has its children reaped by the kernel (ECHILD): then only the output says how it went. */
  int status = 0, known = 1;
  for (;;) {
    if (failed) kill(pid, SIGKILL);
    pid_t w = waitpid(pid, &status, failed ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      known = 0;
      break;
    }
    if (now_ms() >= deadline) {
      snprintf(why, why_size, "%.200s did not exit within %ld ms", argv[0], timeout_ms);
      failed = 1;
      continue;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  if (!failed && known && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    const char* last = last_line(err, err_len);
    if (WIFSIGNALED(status)) {
      snprintf(why, why_size, "%.200s killed by signal %d", argv[0], WTERMSIG(status));
    } else {
      snprintf(why, why_size, "%.200s exited with %d%s%.300s", argv[0], WEXITSTATUS(status),
               *last ? ": " : "", last);
    }
    failed = 1;
  }
  if (failed) {
    free(buf);
    return -1;
  }
  buf[len] = '\0';
  *out = buf;
  *out_len = len;
  return 0;
}
