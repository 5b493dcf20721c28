// The launcher variables fabricctl exec and the Slurm plugin read (outside bytes): the fuzz
// input is NAME=VALUE lines, read as the process environment, with a --gpus and a --consumers
// text; ReadJobRequest must answer or refuse, never crash, and a rank it sets lies in the scope.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "agent/launch/job_scope.h"
#include "agent/policy/jobenv/jobenv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines =
      absl::StrSplit(absl::string_view(text.data(), text.size()), '\n');
  if (lines.size() < 2) return 0;
  std::map<std::string, std::string> env;
  for (size_t i = 2; i < lines.size(); ++i) {
    std::vector<std::string> kv = absl::StrSplit(lines[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2) env[kv[0]] = kv[1];
  }
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto consumers = fabric::jobenv::ParseConsumers(lines[1]);
  if (consumers.ok() && fabric::jobenv::ParseConsumers(fabric::jobenv::ConsumersText(*consumers))
                                .value_or(fabric::jobenv::Consumers{}) != *consumers) {
    std::abort();  // The text form must read back to the same set.
  }
  auto r = fabric::launch::ReadJobRequest(lines[0], "auto", lines[1], getenv);
  if (r.ok() && r->req.rank_case() == fabric::v1::SelectNicsRequest::kRankPosition &&
      r->req.gpus_size() > 0 &&
      r->req.rank_position() >= static_cast<uint32_t>(r->req.gpus_size())) {
    std::abort();  // A position beyond a known scope is refused, never asked.
  }
  return 0;
}
