/* The plugin's way to fabric-env: found beside the library (or where FABRIC_ENV_BIN says), run
 * with posix_spawn (the job's process is large and threaded: a fork would copy its page tables),
 * the process's own environment (its launcher's rank and GPU variables) and a deadline. Plain C,
 * libc only, and only symbols glibc 2.17 has: the library is mounted into containers of any age. */
#ifndef FABRIC_NCCLENV_RUN_FABRIC_ENV_H_
#define FABRIC_NCCLENV_RUN_FABRIC_ENV_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* fabric-env's path into `path`: $FABRIC_ENV_BIN when set, else fabric-env beside the file that
 * holds `anchor` (an address in this library: its directory, ../bin, ../../bin), else
 * /usr/bin/fabric-env. Returns 0, or -1 with the reason in `why` when none is executable. */
int fabric_env_find(const void* anchor, char* path, size_t size, char* why, size_t why_size);

/* Runs argv (argv[0] a path) with the process's environment until `timeout_ms`: 0 with its stdout
 * in *out (malloc'd, NUL-terminated, *out_len bytes, at most max_out) when it exits 0; else -1
 * with the reason in `why` (its last stderr line, a signal, the deadline, output over max_out). */
int fabric_env_run(char* const argv[], long timeout_ms, size_t max_out, char** out, size_t* out_len,
                   char* why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif
