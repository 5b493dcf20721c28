#include "agent/daemon/lifecycle/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"

namespace fabric {
namespace {

int64_t ResidentKb() {
  std::ifstream in("/proc/self/statm");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto kb = ParseStatmResidentKb(text, sysconf(_SC_PAGESIZE) / 1024);
  return kb.ok() ? *kb : -1;
}

HeapSample Sample() {
  const struct mallinfo2 mi = mallinfo2();
  return {ResidentKb(), static_cast<int64_t>(mi.fordblks / 1024)};
}

}  // namespace

bool ShouldTrim(const HeapSample& now, const HeapSample& last, int64_t floor_kb, int64_t slack_kb) {
  if (now.rss_kb < 0 || now.rss_kb - floor_kb < slack_kb) return false;
  return now.free_kb - last.free_kb >= slack_kb || now.rss_kb - last.rss_kb >= slack_kb;
}

absl::StatusOr<int64_t> ParseStatmResidentKb(std::string_view statm, int64_t page_kb) {
  std::vector<absl::string_view> f = absl::StrSplit(Av(statm), ' ', absl::SkipWhitespace());
  int64_t pages = 0;
  if (f.size() < 2 || !absl::SimpleAtoi(f[1], &pages) || pages < 0 || page_kb <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("statm: expected \"size resident ...\", got ", statm.size(), " bytes"));
  }
  return pages * page_kb;
}

HeapTrimmer::HeapTrimmer(absl::Duration every, int64_t slack_kb)
    : every_(every), slack_kb_(slack_kb), last_(Sample()), next_(absl::Now() + every) {
  floor_kb_ = last_.rss_kb;
  last_.free_kb = 0;  // What start-up freed counts toward the first trim.
}

void HeapTrimmer::Tick(absl::Time now) {
  next_ = now + every_;
  const HeapSample before = Sample();
  if (before.rss_kb < 0) return;
  if (floor_kb_ < 0 || before.rss_kb < floor_kb_) floor_kb_ = before.rss_kb;
  if (!ShouldTrim(before, last_, floor_kb_, slack_kb_)) return;
  malloc_trim(0);
  last_ = Sample();
  const int64_t rss = before.rss_kb;
  const int64_t after = last_.rss_kb;
  if (rss - after >= 1024) {
    Log(LogLevel::kInfo, "gave ", (rss - after) / 1024,
        " MB of freed heap back to the kernel (RSS ", rss / 1024, " MB -> ", after / 1024, " MB)");
  }
  if (after >= 0) floor_kb_ = std::min(floor_kb_, after);
}

}  // namespace fabric
