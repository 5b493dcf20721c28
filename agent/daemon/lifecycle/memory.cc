#include "agent/daemon/lifecycle/memory.h"

#include <malloc.h>
#include <unistd.h>

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

}  // namespace

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
    : every_(every), slack_kb_(slack_kb), floor_kb_(ResidentKb()), next_(absl::Now() + every) {}

void HeapTrimmer::Tick(absl::Time now) {
  next_ = now + every_;
  const int64_t rss = ResidentKb();
  if (rss < 0) return;
  if (floor_kb_ < 0 || rss < floor_kb_) floor_kb_ = rss;
  if (rss - floor_kb_ < slack_kb_) return;
  malloc_trim(0);
  const int64_t after = ResidentKb();
  if (rss - after >= 1024) {
    Log(LogLevel::kInfo, "gave ", (rss - after) / 1024,
        " MB of freed heap back to the kernel (RSS ", rss / 1024, " MB -> ", after / 1024, " MB)");
  }
  if (after >= 0) floor_kb_ = after;
}

}  // namespace fabric
