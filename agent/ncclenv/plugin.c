/* libnccl-env-fabric.so: NCCL's (and RCCL's) environment plugin. At init it asks fabric-env for
 * this process's job environment (`fabric-env env --gpus=job --rank-gpu=auto --format=nul`: the
 * launcher's scope and rank variables read as `fabric-env exec` reads them, from the agent's
 * published host), and keeps the answer in a sorted table. getEnv answers, in this order: the
 * real environment (a variable the user or launcher set is theirs, untouched), then the table,
 * else NULL. Without an answer (no published host, no fabric-env, a process with no RDMA) the
 * plugin is plain getenv, after one line on stderr saying why. Plain C and libc only: it runs
 * inside the job's process (PyTorch's, with its own C++ runtime), so it brings no C++ runtime,
 * no exception can cross into NCCL, and no symbol but the two structs is visible. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ncclenv/env_records.h"
#include "agent/ncclenv/nccl_env_api.h"
#include "agent/ncclenv/run_fabric_env.h"

#define EXPORT __attribute__((visibility("default")))

/* Written by init and finalize only (NCCL calls them once each, before and after every getEnv);
 * `ready` orders the table's writes before getEnv's reads on other threads. */
static fabric_env_table table;
static int ready;
static ncclDebugLogger_t nccl_log;

/* One line on stderr (and NCCL's log, v2): why the plugin answers as getenv. */
static void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "fabric NCCL env plugin: %s\n", line);
  if (nccl_log != NULL) nccl_log(2, 128, __FILE__, __LINE__, "fabric env plugin: %s", line);
}

static long timeout_ms(void) {
  const char* t = getenv("FABRIC_ENV_TIMEOUT_MS");
  long v = t != NULL ? strtol(t, NULL, 10) : 0;
  return v > 0 && v <= 600000 ? v : 10000;
}

static void drop_table(void) {
  __atomic_store_n(&ready, 0, __ATOMIC_RELEASE);
  fabric_env_table_free(&table);
}

static ncclResult_t fabric_init(uint8_t major, uint8_t minor, uint8_t patch) {
  drop_table(); /* A second init (NCCL initialised again after a finalize) asks again. */
  char path[4096], why[768];
  if (fabric_env_find((const void*)&fabric_init, path, sizeof path, why, sizeof why) != 0) {
    say("%s; NCCL reads the environment as it is", why);
    return FABRIC_NCCL_SUCCESS;
  }
  char host_file[4200];
  /* What NCCL_IB_HCA may say depends on the NCCL that asks (rails from 2.30.7). */
  char version[48];
  snprintf(version, sizeof version, "--nccl-version=%u.%u.%u", (unsigned)major, (unsigned)minor,
           (unsigned)patch);
  char* argv[10];
  int argc = 0;
  argv[argc++] = path;
  const char* given = getenv("FABRIC_HOST_FILE");
  if (given != NULL && *given) {
    snprintf(host_file, sizeof host_file, "--host-file=%s", given);
    argv[argc++] = host_file;
  }
  argv[argc++] = (char*)"env";
  argv[argc++] = (char*)"--gpus=job";
  argv[argc++] = (char*)"--rank-gpu=auto";
  argv[argc++] = (char*)"--format=nul";
  argv[argc++] = version;
  argv[argc] = NULL;
  char* out = NULL;
  size_t len = 0;
  if (fabric_env_run(argv, timeout_ms(), FABRIC_ENV_RECORDS_MAX_BYTES, &out, &len, why,
                     sizeof why) != 0) {
    say("no job environment (%s); NCCL reads the environment as it is", why);
    return FABRIC_NCCL_SUCCESS;
  }
  size_t skipped = 0;
  int parsed = fabric_env_table_parse(out, len, &table, &skipped);
  free(out);
  if (parsed != 0) {
    say("%s's answer is over %u bytes or %u variables; NCCL reads the environment as it is", path,
        FABRIC_ENV_RECORDS_MAX_BYTES, FABRIC_ENV_RECORDS_MAX_COUNT);
    return FABRIC_NCCL_SUCCESS;
  }
  if (skipped) say("skipped %zu malformed record(s) of %s", skipped, path);
  __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  if (nccl_log != NULL) {
    nccl_log(3, 128, __FILE__, __LINE__, "fabric env plugin: %zu variables from %s", table.count,
             path);
  }
  return FABRIC_NCCL_SUCCESS;
}

static ncclResult_t init_v1(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  (void)suffix;
  nccl_log = NULL;
  return fabric_init(major, minor, patch);
}

static ncclResult_t init_v2(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix,
                            ncclDebugLogger_t log) {
  (void)suffix;
  nccl_log = log;
  return fabric_init(major, minor, patch);
}

static ncclResult_t fabric_finalize(void) {
  drop_table();
  return FABRIC_NCCL_SUCCESS;
}

static const char* fabric_get_env(const char* name) {
  if (name == NULL) return NULL;
  const char* set = getenv(name);
  if (set != NULL) return set;
  if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return NULL;
  return fabric_env_table_get(&table, name);
}

EXPORT const ncclEnv_v1_t ncclEnvPlugin_v1 = {
    .name = "fabric",
    .init = init_v1,
    .finalize = fabric_finalize,
    .getEnv = fabric_get_env,
};

EXPORT const ncclEnv_v2_t ncclEnvPlugin_v2 = {
    .name = "fabric",
    .init = init_v2,
    .finalize = fabric_finalize,
    .getEnv = fabric_get_env,
};
