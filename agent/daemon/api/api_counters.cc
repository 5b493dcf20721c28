#include "agent/daemon/api/api_counters.h"

namespace fabric {

void ApiCounters::Denied(std::string_view method, grpc::StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  ++denied_[{std::string(method),
             code == grpc::StatusCode::UNAUTHENTICATED ? "unauthenticated" : "permission_denied"}];
}

void ApiCounters::OverLimit(std::string_view limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++over_limit_[std::string(limit)];
}

std::map<std::pair<std::string, std::string>, uint64_t> ApiCounters::denied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return denied_;
}

std::map<std::string, uint64_t> ApiCounters::over_limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return over_limit_;
}

}  // namespace fabric
