// fabric_spank.so: a Slurm SPANK plugin that hands each task the fabric environment the agent
// computes (NCCL_IB_HCA, UCX_NET_DEVICES...). In each task it runs
//   fabric-env --host-file=F env --gpus=job --rank-gpu=auto --format=nul
// (the agent's published host, no RPC: a few milliseconds) when the file is there and no target
// is named, else
//   fabricctl env --gpus=job --rank-gpu=auto --format=nul --timeout=T/2 [--target=...]
// (and, when the agent cannot be reached, the same with --sysfs=DIR: local discovery) with a
// small environment built from the task's variables, bounded in time and size, and sets every
// NAME=VALUE record the user has not set already. It never fails a task: when anything goes
// wrong the task gets one line on its stderr saying why, and runs without the settings.
// plugstack.conf arguments and behaviour: slurm/spank/README.md.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <slurm/spank.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/ncclenv/env_records.h"

SPANK_PLUGIN(fabric, 1);

#ifndef FABRIC_SPANK_FABRICCTL
#define FABRIC_SPANK_FABRICCTL "/usr/bin/fabricctl"
#endif
#ifndef FABRIC_SPANK_FABRIC_ENV
#define FABRIC_SPANK_FABRIC_ENV "/usr/bin/fabric-env"
#endif
#define FABRIC_SPANK_HOST_FILE "/run/fabric-env/host.pb"
#ifndef FABRIC_SPANK_NCCL_ENV_PLUGIN
#define FABRIC_SPANK_NCCL_ENV_PLUGIN "/usr/lib/fabric-agent/libnccl-env-fabric.so"
#endif

enum {
  kPathMax = 4096,
  kValueMax = 8192,        // One variable read from the task (PATH can be long).
  kOutputMax = 64 * 1024,  // fabricctl's records; more is a fault, not an environment.
  kReasonMax = 512,        // The last line of fabricctl's stderr, for the one-line report.
  kTimeoutMinMs = 20,      // fabricctl's own --timeout takes 10ms at least; it gets half.
  kTimeoutMaxMs = 60000,
};

// The plugin's settings (plugstack.conf) and the step's state. Statics survive from slurmstepd's
// callbacks into each task: the task process is forked from slurmstepd after user_init.
static char fabricctl_path[kPathMax] = FABRIC_SPANK_FABRICCTL;
static char fabric_env_path[kPathMax] = FABRIC_SPANK_FABRIC_ENV;
static char host_file[kPathMax] = FABRIC_SPANK_HOST_FILE;
static char target[kPathMax];
static char fallback_sysfs[kPathMax];
static long timeout_ms = 2000;
// nccl_env_plugin=: NCCL and RCCL get NCCL_ENV_PLUGIN (which answers with the NCCL version, so
// rails too) instead of the NCCL_* and RCCL_* variables; empty: off.
static char nccl_env_plugin[kPathMax];
static int enabled = 1;         // default=, then --fabric-env.
static char config_error[384];  // A bad plugstack.conf argument: reported in each task.
// The step's GPUs on this node, from user_init: under per-task binding the task itself only sees
// its own (SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES are both narrowed), and the job variables
// must come from the whole step's scope to be the same on every task.
static char step_gpus[kValueMax];
static int have_step_gpus;

// Marks the variables this plugin set, each with a hash of its value. Under sbatch the plugin
// also runs in the batch step, and the steps inherit what it set there; a marked variable whose
// value is unchanged is ours to replace with the step's own, a changed one is the user's.
static const char kOwnedVar[] = "FABRIC_SPANK_OWNED";

static int opt_cb(int val, const char* arg, int remote) {
  (void)val;
  (void)remote;
  if (arg && (!strcmp(arg, "on") || !strcmp(arg, "off"))) {
    enabled = !strcmp(arg, "on");
    return 0;
  }
  slurm_error("fabric-env: --fabric-env takes on or off, not '%s'", arg ? arg : "");
  return -1;
}

static struct spank_option fabric_env_option = {
    "fabric-env",
    "on|off",
    "Set the fabric environment (NCCL_IB_HCA, UCX_NET_DEVICES...) from fabric-agent in each task "
    "(on or off; default set by the administrator)",
    1,
    0,
    opt_cb};

// Milliseconds from "2000", "2000ms" or "2s"; -1 when malformed or outside the bounds.
static long parse_timeout_ms(const char* s) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || v < 0) return -1;
  if (!strcmp(end, "s")) {
    if (v > kTimeoutMaxMs / 1000) return -1;
    v *= 1000;
  } else if (*end && strcmp(end, "ms")) {
    return -1;
  }
  return v < kTimeoutMinMs || v > kTimeoutMaxMs ? -1 : v;
}

static int set_string(char* dst, size_t size, const char* value) {
  size_t n = strlen(value);
  if (n == 0 || n >= size) return -1;
  memcpy(dst, value, n + 1);
  return 0;
}

static void parse_args(int ac, char** av) {
  for (int i = 0; i < ac && !config_error[0]; i++) {
    const char* a = av[i];
    int bad = 0;
    if (!strncmp(a, "fabricctl=", 10)) {
      bad = set_string(fabricctl_path, sizeof fabricctl_path, a + 10) || a[10] != '/';
    } else if (!strncmp(a, "fabric_env=", 11)) {
      bad = set_string(fabric_env_path, sizeof fabric_env_path, a + 11) || a[11] != '/';
    } else if (!strncmp(a, "host_file=", 10)) {
      bad = set_string(host_file, sizeof host_file, a + 10) || a[10] != '/';
    } else if (!strncmp(a, "target=", 7)) {
      bad = set_string(target, sizeof target, a + 7);
    } else if (!strncmp(a, "fallback_sysfs=", 15)) {
      bad = set_string(fallback_sysfs, sizeof fallback_sysfs, a + 15);
    } else if (!strncmp(a, "timeout=", 8)) {
      timeout_ms = parse_timeout_ms(a + 8);
      bad = timeout_ms < 0;
    } else if (!strcmp(a, "nccl_env_plugin=on")) {
      bad = set_string(nccl_env_plugin, sizeof nccl_env_plugin, FABRIC_SPANK_NCCL_ENV_PLUGIN);
    } else if (!strcmp(a, "nccl_env_plugin=off")) {
      nccl_env_plugin[0] = '\0';
    } else if (!strncmp(a, "nccl_env_plugin=", 16)) {
      bad = set_string(nccl_env_plugin, sizeof nccl_env_plugin, a + 16) || a[16] != '/';
    } else if (!strcmp(a, "default=on") || !strcmp(a, "default=off")) {
      enabled = !strcmp(a, "default=on");
    } else {
      bad = 1;
    }
    if (bad) {
      snprintf(config_error, sizeof config_error,
               "plugstack.conf argument '%.80s' is not valid (fabricctl=/PATH, fabric_env=/PATH, "
               "host_file=/PATH, target=, timeout=%d..%dms, fallback_sysfs=DIR, "
               "nccl_env_plugin=on|off|/PATH, default=on|off)",
               a, kTimeoutMinMs, kTimeoutMaxMs);
    }
  }
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  parse_args(ac, av);
  if (config_error[0]) slurm_error("fabric-env: %s", config_error);
  // Registered here rather than through a spank_options[] table: only this way do sbatch and
  // salloc accept the option too.
  if (spank_option_register(sp, &fabric_env_option) != ESPANK_SUCCESS) {
    slurm_error("fabric-env: cannot register --fabric-env");
    return -1;
  }
  return 0;
}

// slurmstepd, once per step and node, before the tasks are forked.
int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  // SLURM_STEP_GPUS keeps the node's indices where a device cgroup renumbers the visible ones.
  // The batch step has none: its tasks' SLURM_JOB_GPUS is the scope then. Only without either
  // do the visible devices stand for the step's GPUs.
  char job_gpus[16];
  have_step_gpus =
      spank_getenv(sp, "SLURM_STEP_GPUS", step_gpus, sizeof step_gpus) == ESPANK_SUCCESS ||
      (spank_getenv(sp, "SLURM_JOB_GPUS", job_gpus, sizeof job_gpus) == ESPANK_ENV_NOEXIST &&
       spank_getenv(sp, "CUDA_VISIBLE_DEVICES", step_gpus, sizeof step_gpus) == ESPANK_SUCCESS);
  return 0;
}

// One line on the task's stderr (fd 2 is the task's, which srun prints), never more.
__attribute__((format(printf, 1, 2))) static void report(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  for (char* p = line; p < line + n - 1; p++) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  (void)w;
}

static uint64_t fnv1a(const char* s) {
  uint64_t h = 14695981039346656037ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

// Removes the variables an enclosing step (the batch script) set and nobody changed since.
static void drop_inherited(spank_t sp) {
  static char owned[kValueMax];
  static char value[kValueMax];
  if (spank_getenv(sp, kOwnedVar, owned, sizeof owned) != ESPANK_SUCCESS) return;
  for (char *save = NULL, *e = strtok_r(owned, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
    char* colon = strchr(e, ':');
    if (!colon) continue;
    *colon = '\0';
    char* end = NULL;
    uint64_t h = strtoull(colon + 1, &end, 16);
    if (end == colon + 1 || *end) continue;
    if (spank_getenv(sp, e, value, sizeof value) == ESPANK_SUCCESS && fnv1a(value) == h) {
      spank_unsetenv(sp, e);
    }
  }
  spank_unsetenv(sp, kOwnedVar);
}

// The variables fabricctl reads to find the job's GPUs and this task's one, copied from the task.
static const char* const kPassed[] = {
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TZ",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "SLURM_JOB_GPUS",
    "SLURM_LOCALID",
    "SLURM_PROCID",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
    "FABRICCTL_TARGET",
};
enum { kPassedCount = sizeof kPassed / sizeof kPassed[0] };

// envp for fabricctl: NAME=VALUE strings in `store`; NULL-terminated `env`. -1 when too long.
static int build_env(spank_t sp, char* store, size_t size, char** env, size_t slots) {
  size_t used = 0, n = 0;
  char value[kValueMax];
  for (size_t i = 0; i <= kPassedCount && n + 1 < slots; i++) {
    const char* name = i < kPassedCount ? kPassed[i] : "SLURM_STEP_GPUS";
    if (i == kPassedCount) {
      // The step's scope from user_init: the task's own SLURM_STEP_GPUS may be its GPU alone.
      if (!have_step_gpus) continue;
      snprintf(value, sizeof value, "%s", step_gpus);
    } else if (spank_getenv(sp, name, value, sizeof value) != ESPANK_SUCCESS) {
      continue;
    }
    int len = snprintf(store + used, size - used, "%s=%s", name, value);
    if (len < 0 || (size_t)len >= size - used) return -1;
    env[n++] = store + used;
    used += (size_t)len + 1;
  }
  env[n] = NULL;
  return 0;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

// Child side of run_fabricctl: never returns.
static void exec_child(int out_fd, int err_fd, char** argv, char** envp) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);  // The task may be forked with signals blocked.
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
      dup2(err_fd, STDERR_FILENO) < 0) {
    _exit(126);
  }
  // The task's other descriptors (slurmstepd's I/O, the user's) are none of fabricctl's business.
  closefrom(STDERR_FILENO + 1);
  execve(argv[0], argv, envp);
  dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

// Runs fabricctl until `deadline` (now_ms); its stdout into out (NUL-terminated, *out_len
// bytes). 0 on success, else -1 with the reason in `why` and its exit status in *exit_code (-1:
// killed, or it did not exit normally).
static int run_fabricctl(char** argv, char** envp, long deadline, char* out, size_t* out_len,
                         int* exit_code, char* why, size_t why_size) {
  *exit_code = -1;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) < 0) {
    snprintf(why, why_size, "pipe: %s", strerror(errno));
    return -1;
  }
  if (pipe2(err_pipe, O_CLOEXEC) < 0) {
    snprintf(why, why_size, "pipe: %s", strerror(errno));
    close(out_pipe[0]);
    close(out_pipe[1]);
    return -1;
  }
  // A SIGCHLD the task ignores would make the kernel reap fabricctl before waitpid sees it.
  struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, &old);
  pid_t pid = fork();
  if (pid == 0) exec_child(out_pipe[1], err_pipe[1], argv, envp);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    snprintf(why, why_size, "fork: %s", strerror(errno));
    close(out_pipe[0]);
    close(err_pipe[0]);
    sigaction(SIGCHLD, &old, NULL);
    return -1;
  }

  char err[kReasonMax * 2];
  size_t err_len = 0, len = 0;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2, killed = 0;
  why[0] = '\0';
  while (open_fds > 0) {
    long left = deadline - now_ms();
    if (left <= 0) {
      snprintf(why, why_size, "%s did not answer within %ldms", argv[0], timeout_ms);
      killed = 1;
      break;
    }
    int n = poll(fds, 2, (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      snprintf(why, why_size, "poll: %s", strerror(errno));
      killed = 1;
      break;
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t r = read(fds[i].fd, buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
        continue;
      }
      if (i == 0) {
        if (len + (size_t)r > kOutputMax) {
          snprintf(why, why_size, "%s printed more than %d bytes", argv[0], kOutputMax);
          killed = 1;
          break;
        }
        memcpy(out + len, buf, (size_t)r);
        len += (size_t)r;
      } else {
        // Keep the tail: the last line is the reason.
        if ((size_t)r >= sizeof err) {
          memcpy(err, buf + r - (sizeof err - 1), sizeof err - 1);
          err_len = sizeof err - 1;
        } else {
          if (err_len + (size_t)r >= sizeof err) {
            size_t drop = err_len + (size_t)r - (sizeof err - 1);
            memmove(err, err + drop, err_len - drop);
            err_len -= drop;
          }
          memcpy(err + err_len, buf, (size_t)r);
          err_len += (size_t)r;
        }
      }
    }
    if (killed) break;
  }
  for (int i = 0; i < 2; i++) {
    if (fds[i].fd >= 0) close(fds[i].fd);
  }

  // Reap it, bounded: a child that closed its pipes may still be running.
  int status = 0;
  for (;;) {
    if (killed) kill(pid, SIGKILL);
    pid_t w = waitpid(pid, &status, killed ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      status = -1;
      break;
    }
    if (w == 0 && now_ms() >= deadline) {
      snprintf(why, why_size, "%s did not exit within %ldms", argv[0], timeout_ms);
      killed = 1;
      continue;
    }
    if (w == 0) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
  }
  sigaction(SIGCHLD, &old, NULL);

  out[len] = '\0';
  *out_len = len;
  if (killed) return -1;
  if (status != -1 && WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
  if (*exit_code != 0) {
    // fabricctl's last stderr line says why.
    err[err_len] = '\0';
    while (err_len > 0 && (err[err_len - 1] == '\n' || err[err_len - 1] == '\r')) {
      err[--err_len] = '\0';
    }
    char* last = strrchr(err, '\n');
    last = last ? last + 1 : err;
    // CLI11 ends a usage error (a fabricctl older than this plugin) with this hint: the line
    // before it says what was wrong.
    if (!strncmp(last, "Run with --help", 15) && last > err) {
      last[-1] = '\0';
      char* prev = strrchr(err, '\n');
      last = prev ? prev + 1 : err;
    }
    if (status != -1 && WIFSIGNALED(status)) {
      snprintf(why, why_size, "%s killed by signal %d%s%.*s", argv[0], WTERMSIG(status),
               *last ? ": " : "", kReasonMax, last);
    } else {
      snprintf(why, why_size, "%s exited with %d%s%.*s", argv[0],
               status == -1 ? -1 : WEXITSTATUS(status), *last ? ": " : "", kReasonMax, last);
    }
    return -1;
  }
  return 0;
}

// NCCL's and RCCL's own variables, which NCCL's environment plugin answers when it is loaded.
static int nccl_owned(const char* rec) {
  return !strncmp(rec, "NCCL_", 5) || !strncmp(rec, "RCCL_", 5);
}

// Sets each valid NAME=VALUE record the task has not set (but NCCL's and RCCL's when `skip_nccl`);
// records what it set in kOwnedVar. Returns the number of records set, and counts the skipped
// ones.
static int apply(spank_t sp, char* out, size_t len, int skip_nccl, int* invalid) {
  static char owned[kValueMax];
  size_t owned_len = 0;
  int set = 0;
  owned[0] = '\0';
  for (char* rec = out; rec < out + len; rec += strlen(rec) + 1) {
    char* eq = strchr(rec, '=');
    size_t name_len = eq ? (size_t)(eq - rec) : 0;
    if (!eq || !fabric_env_name_ok(rec, name_len) ||
        (name_len == sizeof kOwnedVar - 1 && !strncmp(rec, kOwnedVar, name_len))) {
      if (*rec) (*invalid)++;
      continue;
    }
    if (skip_nccl && nccl_owned(rec) && strncmp(rec, "NCCL_ENV_PLUGIN=", 16)) continue;
    *eq = '\0';
    // overwrite=0: a variable the user set, even to "", is theirs.
    if (spank_setenv(sp, rec, eq + 1, 0) == ESPANK_SUCCESS) {
      set++;
      int n = snprintf(owned + owned_len, sizeof owned - owned_len, "%s%s:%016llx",
                       owned_len ? "," : "", rec, (unsigned long long)fnv1a(eq + 1));
      if (n > 0 && (size_t)n < sizeof owned - owned_len)
        owned_len += (size_t)n;
      else
        owned[owned_len] = '\0';  // Unmarked: a later step leaves it alone, as the user's.
    }
    *eq = '=';
  }
  if (owned_len) spank_setenv(sp, kOwnedVar, owned, 1);
  return set;
}

// Sets `out`'s records; one line when none came or some were malformed. `with_plugin`: the
// answer came from the published host, which NCCL's environment plugin reads too, so NCCL gets
// the plugin (when configured and readable) in place of its variables.
static void apply_and_report(spank_t sp, char* out, size_t len, const char* from, int with_plugin) {
  int invalid = 0;
  int skip_nccl = 0;
  if (with_plugin && nccl_env_plugin[0] && len > 0) {
    if (access(nccl_env_plugin, R_OK) != 0) {
      report("fabric-env: %s cannot be read (%s): NCCL's variables are set instead",
             nccl_env_plugin, strerror(errno));
    } else {
      // Appended as records, so that they are set and owned as the others are.
      // FABRIC_JOB_GPUS: the step's scope for the plugin's fabric-env, as build_env gives it.
      int n = snprintf(out + len, kOutputMax - len,
                       "NCCL_ENV_PLUGIN=%s%cFABRIC_HOST_FILE=%s%cFABRIC_JOB_GPUS=%s%c",
                       nccl_env_plugin, 0, host_file, 0, have_step_gpus ? step_gpus : "", 0);
      if (n > 0 && (size_t)n < kOutputMax - len) {
        len += (size_t)n;
        skip_nccl = 1;
      }
    }
  }
  int set = apply(sp, out, len, skip_nccl, &invalid);
  if (set == 0 && invalid == 0 && len == 0) {
    report("fabric-env: no fabric settings for this task: %s printed none", from);
  } else if (invalid) {
    report("fabric-env: skipped %d malformed record(s) from %s", invalid, from);
  }
}

// In each task, after Slurm bound its GPUs and before it execs the user's program.
int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  drop_inherited(sp);
  if (!enabled) return 0;
  if (config_error[0]) {
    report("fabric-env: no fabric settings for this task: %s", config_error);
    return 0;
  }

  static char env_store[kPassedCount * 256 + 2 * kValueMax];
  char* envp[kPassedCount + 2];
  if (build_env(sp, env_store, sizeof env_store, envp, kPassedCount + 2) < 0) {
    report("fabric-env: no fabric settings for this task: its GPU and rank variables are too long");
    return 0;
  }
  long deadline = now_ms() + timeout_ms;
  static char out[kOutputMax + 1];
  size_t len = 0;
  int code = 0;
  char why[kReasonMax + 2 * kPathMax];
  // The published host first: no RPC, a static binary. A named target is asked instead, as
  // fabricctl exec does. When it has no answer (no file, a file it cannot read), fabricctl.
  char file_why[sizeof why];
  file_why[0] = '\0';
  if (!target[0] && access(host_file, R_OK) == 0 && access(fabric_env_path, X_OK) == 0) {
    char file_arg[kPathMax + 16];
    snprintf(file_arg, sizeof file_arg, "--host-file=%s", host_file);
    char* env_argv[] = {fabric_env_path,   file_arg,       "env", "--gpus=job",
                        "--rank-gpu=auto", "--format=nul", NULL};
    if (run_fabricctl(env_argv, envp, deadline, out, &len, &code, why, sizeof why) == 0) {
      apply_and_report(sp, out, len, fabric_env_path, 1);
      return 0;
    }
    // 2: the request itself is bad (a malformed GPU list): fabricctl would say the same.
    if (code == 2 || now_ms() >= deadline) {
      report("fabric-env: no fabric settings for this task: %s", why);
      return 0;
    }
    memcpy(file_why, why, sizeof file_why);
  }
  char timeout_arg[64], source_arg[kPathMax + 16];
  // Half the budget for the agent, the rest for local discovery when it does not answer.
  snprintf(timeout_arg, sizeof timeout_arg, "--timeout=%ldms", timeout_ms / 2);
  char* argv[8] = {fabricctl_path, "env",       "--gpus=job", "--rank-gpu=auto",
                   "--format=nul", timeout_arg, NULL,         NULL};
  if (target[0]) {
    snprintf(source_arg, sizeof source_arg, "--target=%s", target);
    argv[6] = source_arg;
  }
  if (run_fabricctl(argv, envp, deadline, out, &len, &code, why, sizeof why) < 0) {
    // Exit 3: the agent could not be reached (fabricctl's other failures would repeat locally).
    if (code != 3 || now_ms() >= deadline) {
      report("fabric-env: no fabric settings for this task: %s", why);
      return 0;
    }
    char agent_why[sizeof why];
    memcpy(agent_why, why, sizeof why);
    const char* sysfs = fallback_sysfs[0] ? fallback_sysfs : "/sys";
    snprintf(source_arg, sizeof source_arg, "--sysfs=%s", sysfs);
    argv[5] = source_arg;  // Local discovery: no agent, so no --timeout or --target.
    argv[6] = NULL;
    if (run_fabricctl(argv, envp, deadline, out, &len, &code, why, sizeof why) < 0) {
      report(
          "fabric-env: no fabric settings for this task: the agent did not answer (%s), nor "
          "did discovery from %s (%s)",
          agent_why, sysfs, why);
      return 0;
    }
  }
  if (file_why[0]) report("fabric-env: %s; asked fabricctl", file_why);
  apply_and_report(sp, out, len, fabricctl_path, 0);
  return 0;
}
