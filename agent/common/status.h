// Status plumbing shared by the project.
#pragma once

#include "absl/status/status.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define FABRIC_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status fabric_status_ = (expr); !fabric_status_.ok()) { \
      return fabric_status_;                                          \
    }                                                                 \
  } while (0)
