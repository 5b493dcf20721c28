// Collects the failures of a teardown that goes on after each one (free what can be freed), so
// the caller gets all of them in one status rather than only the first.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fabric::gpumem {

// Adds `one` to `all`: the first failure's code, the messages joined with "; ".
inline void AddFailure(absl::Status& all, const absl::Status& one) {
  if (one.ok()) return;
  if (all.ok()) {
    all = one;
    return;
  }
  all = absl::Status(all.code(),
                     absl::StrCat(std::string(all.message()), "; ", std::string(one.message())));
}

}  // namespace fabric::gpumem
