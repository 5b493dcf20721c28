// The API's refusals, counted for the metrics: the service and the transport (watch streams,
// limits) both count here, so neither includes the other for it.
#pragma once

#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace fabric {

// Refusals of the API, for metrics: control calls denied, requests over a limit.
class ApiCounters {
 public:
  void Denied(std::string_view method, grpc::StatusCode code);
  void OverLimit(std::string_view limit);
  // (method, code name) -> count, and limit -> count.
  std::map<std::pair<std::string, std::string>, uint64_t> denied() const;
  std::map<std::string, uint64_t> over_limit() const;
  std::atomic<int64_t> watches{0};  // Open watch streams.

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> denied_;
  std::map<std::string, uint64_t> over_limit_;
};

}  // namespace fabric
