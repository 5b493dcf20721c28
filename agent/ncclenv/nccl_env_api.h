/* NCCL's environment plugin API, written from NCCL's plugins/env/README.md and the example's
 * headers (NVIDIA/nccl, NCCL 2.28.7 and later; RCCL documents the same API). NCCL dlopens
 * libnccl-env-<NCCL_ENV_PLUGIN>.so (or the path NCCL_ENV_PLUGIN names), looks for the newest
 * ncclEnvPlugin_vN it knows, calls init once, then getEnv for every variable it reads. A value
 * returned must stay valid until finalize, or until getEnv is asked for the same name again.
 * An init that fails makes NCCL fall back to its own (getenv). */
#ifndef FABRIC_NCCLENV_NCCL_ENV_API_H_
#define FABRIC_NCCLENV_NCCL_ENV_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int ncclResult_t; /* 0 is success; NCCL's other codes are errors. */
#define FABRIC_NCCL_SUCCESS 0

/* NCCL's logger, as v2's init passes it (level 2 WARN, 3 INFO; flags a subsystem mask, 128 ENV). */
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

typedef struct {
  const char* name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v1_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix,
                       ncclDebugLogger_t logFunction);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v2_t;

#ifdef __cplusplus
}
#endif

#endif
