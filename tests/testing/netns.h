// A "pod" and a "peer" network namespace joined by a veth pair, for tests of real ARP/NA
// traffic (test-rigs: throwaway namespaces). Names are unique per process and call; everything
// is deleted on destruction, also after a failed test. Needs root.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fabric::testing {

struct VethPairSpec {
  std::string prefix = "fab";  // namespace names: <prefix>-pod-<pid>-<n>, -peer-
  std::string pod_if = "eth0";
  std::string pod_mac;   // empty: the kernel's random one
  std::string pod_cidr;  // e.g. "10.77.0.2/24"; empty: none
  std::string peer_if = "peer0";
  std::string peer_cidr;  // e.g. "10.77.0.1/24" (the pod's gateway); empty: none
};

class VethPair {
 public:
  static absl::StatusOr<std::unique_ptr<VethPair>> Create(const VethPairSpec& spec);
  ~VethPair();
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;

  const std::string& pod() const { return pod_; }  // namespace names, for `ip -n`
  const std::string& peer() const { return peer_; }
  std::string pod_path() const { return "/var/run/netns/" + pod_; }
  std::string peer_path() const { return "/var/run/netns/" + peer_; }
  // Forget the pod namespace (the test deleted it itself).
  void ForgetPod() { pod_.clear(); }

 private:
  VethPair() = default;
  std::string pod_, peer_;
};

}  // namespace fabric::testing
