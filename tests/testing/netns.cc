#include "tests/testing/netns.h"

#include <unistd.h>

#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";

absl::Status Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kIp};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = Run(argv, absl::Seconds(30));
  if (!r.ok()) return r.status();
  if (r->status != 0) {
    return absl::InternalError(absl::StrCat("ip ", absl::StrJoin(args, " "), ": ", r->err));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<VethPair>> VethPair::Create(const VethPairSpec& s) {
  if (geteuid() != 0) return absl::PermissionDeniedError("network namespaces need root");
  static std::atomic<int> counter{0};
  const std::string id = absl::StrCat(getpid(), "-", counter++);
  std::unique_ptr<VethPair> p(new VethPair());
  const std::string pod = absl::StrCat(s.prefix, "-pod-", id);
  const std::string peer = absl::StrCat(s.prefix, "-peer-", id);
  if (absl::Status st = Ip({"netns", "add", pod}); !st.ok()) return st;
  p->pod_ = pod;
  if (absl::Status st = Ip({"netns", "add", peer}); !st.ok()) return st;
  p->peer_ = peer;
  std::vector<std::vector<std::string>> steps = {{"-n", pod, "link", "add", s.pod_if, "type",
                                                  "veth", "peer", "name", s.peer_if, "netns",
                                                  peer}};
  if (!s.pod_mac.empty())
    steps.push_back({"-n", pod, "link", "set", s.pod_if, "address", s.pod_mac});
  if (!s.pod_cidr.empty()) steps.push_back({"-n", pod, "addr", "add", s.pod_cidr, "dev", s.pod_if});
  steps.push_back({"-n", pod, "link", "set", s.pod_if, "up"});
  if (!s.peer_cidr.empty()) {
    steps.push_back({"-n", peer, "addr", "add", s.peer_cidr, "dev", s.peer_if});
  }
  steps.push_back({"-n", peer, "link", "set", s.peer_if, "up"});
  for (const auto& step : steps) {
    if (absl::Status st = Ip(step); !st.ok()) return st;  // the destructor cleans up
  }
  return p;
}

VethPair::~VethPair() {
  for (const std::string& ns : {pod_, peer_}) {
    if (!ns.empty()) (void)Ip({"netns", "del", ns});
  }
}

}  // namespace fabric::testing
