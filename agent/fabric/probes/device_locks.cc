#include "agent/fabric/probes/device_locks.h"

namespace fabric::probes {

DeviceLocks::Hold::~Hold() {
  if (locks_ != nullptr) locks_->Release(key_);
}

void DeviceLocks::Hold::Admit(const std::string& connection) {
  if (locks_ == nullptr) return;
  std::lock_guard<std::mutex> lock(locks_->mu_);
  if (auto it = locks_->busy_.find(key_); it != locks_->busy_.end()) {
    it->second.admitted = connection;
  }
}

std::optional<DeviceLocks::Hold> DeviceLocks::TryAcquire(const std::string& key,
                                                         const std::string& connection) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = busy_.try_emplace(key);
  if (!fresh) {
    // Held: only by the test on this very connection (this host probing itself), once.
    if (connection.empty() || it->second.admitted != connection) return std::nullopt;
    it->second.admitted.clear();
  }
  ++it->second.holders;
  return Hold(this, key);
}

std::optional<DeviceLocks::Hold> DeviceLocks::Acquire(const std::string& key,
                                                      absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                    [&] { return busy_.count(key) == 0; })) {
    return std::nullopt;
  }
  ++busy_[key].holders;
  return Hold(this, key);
}

bool DeviceLocks::held(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_.count(key) > 0;
}

void DeviceLocks::Release(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = busy_.find(key);
    if (it == busy_.end() || --it->second.holders > 0) return;
    busy_.erase(it);
  }
  cv_.notify_all();
}

}  // namespace fabric::probes
