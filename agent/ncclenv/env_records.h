/* fabric-env's answer as the NCCL environment plugin keeps it: `fabric-env env --format=nul`
 * prints NAME=VALUE records each ended by a NUL byte; the table holds them sorted by name, in one
 * buffer, so a lookup is a binary search that allocates nothing. Outside bytes (another program's
 * output): bounded, malformed records skipped and counted, never trusted. Plain C: the plugin is
 * loaded into the job's own process and needs nothing but libc (a fuzz target and table tests). */
#ifndef FABRIC_NCCLENV_ENV_RECORDS_H_
#define FABRIC_NCCLENV_ENV_RECORDS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FABRIC_ENV_RECORDS_MAX_BYTES (1u << 20) /* fabric-env prints a few KiB. */
#define FABRIC_ENV_RECORDS_MAX_COUNT 4096u

typedef struct {
  char* buf;          /* The records' bytes, each NAME and VALUE NUL-terminated in place. */
  const char** names; /* Sorted; names[i] pairs with values[i]. */
  const char** values;
  size_t count;
} fabric_env_table;

/* Whether s[0..n) is a variable name fabric-env's records may set (a C identifier). The SPANK
 * plugin, which sets the same records into a task, asks it too. */
int fabric_env_name_ok(const char* s, size_t n);

/* Parses `len` bytes into `t` (which it owns after; free with fabric_env_table_free). Records
 * whose name is not a C identifier, with no '=', or past the last NUL are skipped (*skipped
 * counts them); a name given twice keeps its first value, as the shell's environment does.
 * Returns 0, or -1 for input over the bounds or memory that cannot be had (t left empty). */
int fabric_env_table_parse(const char* bytes, size_t len, fabric_env_table* t, size_t* skipped);

/* The value of `name`, or NULL. Any thread, no allocation. */
const char* fabric_env_table_get(const fabric_env_table* t, const char* name);

void fabric_env_table_free(fabric_env_table* t);

#ifdef __cplusplus
}
#endif

#endif
