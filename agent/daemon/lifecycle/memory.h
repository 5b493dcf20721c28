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

// What the trimmer reads: resident memory and what the allocator holds free (mallinfo2's
// fordblks: freed, not yet given back or given back with madvise), in kB.
struct HeapSample {
  int64_t rss_kb = 0;
  int64_t free_kb = 0;
};

// Whether to trim at `now`: resident memory is `slack_kb` above `floor_kb` (the least seen after
// start-up or a trim: never raised, so a trim that ran during a burst, when nothing was free yet,
// does not make the burst the baseline) and, since the last trim (`last`, right after it), the
// allocator came to hold `slack_kb` more free or resident memory grew by it. One Allocate of
// 200,000 containers left the agent at 686 MB for good when the floor was the last trim's result.
bool ShouldTrim(const HeapSample& now, const HeapSample& last, int64_t floor_kb, int64_t slack_kb);

class HeapTrimmer {
 public:
  // Trims as ShouldTrim says, the floor taken when constructed (early in start-up).
  explicit HeapTrimmer(absl::Duration every = absl::Seconds(10), int64_t slack_kb = 16 * 1024);
  absl::Time next() const { return next_; }
  // At or after next(): checks, trims if needed (logging what it gave back), sets next().
  void Tick(absl::Time now);

 private:
  const absl::Duration every_;
  const int64_t slack_kb_;
  int64_t floor_kb_;
  HeapSample last_;  // Right after the last trim; at construction before any.
  absl::Time next_;
};

}  // namespace fabric
