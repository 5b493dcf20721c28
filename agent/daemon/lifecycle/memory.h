// Gives the heap that a burst freed back to the kernel. glibc keeps freed memory in its arenas:
// measured with tests/bench/soak_bench, one HTTP/2 rapid-reset connection of 20,000 streams left
// the agent at 372 MB five seconds later, and 45 MB after malloc_trim(0); 1,000 watch streams,
// once cancelled, left 53 MB (25 MB after the trim). An allocator that decays on its own
// (jemalloc) would be a new dependency for what one call does. The agent's loop calls Tick; an
// idle agent reads /proc/self/statm every interval.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabric {

// The resident set of /proc/self/statm text ("size resident shared ..."), in kB.
absl::StatusOr<int64_t> ParseStatmResidentKb(std::string_view statm, int64_t page_kb);

class HeapTrimmer {
 public:
  // Trims when resident memory is `slack_kb` above what it was after the last trim (or when
  // constructed, early in start-up).
  explicit HeapTrimmer(absl::Duration every = absl::Seconds(10), int64_t slack_kb = 16 * 1024);
  absl::Time next() const { return next_; }
  // At or after next(): checks, trims if needed (logging what it gave back), sets next().
  void Tick(absl::Time now);

 private:
  const absl::Duration every_;
  const int64_t slack_kb_;
  int64_t floor_kb_;
  absl::Time next_;
};

}  // namespace fabric
