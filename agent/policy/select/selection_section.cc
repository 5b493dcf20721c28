#include "agent/policy/select/selection_section.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/shell.h"
#include "agent/common/strings.h"
#include "agent/policy/jobenv/profiles.h"

namespace fabric {
namespace {

// The kernel's dev_valid_name(): 1..15 bytes, not "." or "..", no '/', ':' or whitespace.
absl::Status ValidateIfname(std::string_view name) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrFormat("selection.socket_ifname \"%s\" is not an interface name: %s",
                        absl::CHexEscape(Av(name)), Av(why)));
  };
  if (name.empty()) return bad("an empty name in the list");
  if (name.size() > 15) return bad("longer than 15 bytes");
  if (name == "." || name == "..") return bad("reserved name");
  for (char c : name) {
    if (c == '/' || c == ':' || c == ' ' || (c >= '\t' && c <= '\r') || c == '\0') {
      return bad("contains '/', ':', a NUL or whitespace");
    }
  }
  return absl::OkStatus();
}

// Variable names as a shell takes them, values without a NUL or line break. Sorted, so that the
// first bad entry reported does not depend on hash order.
absl::Status ValidateEnvMap(const google::protobuf::Map<std::string, std::string>& env,
                            std::string_view where) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : env) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (const std::string& k : keys) {
    if (!IsValidEnvName(k)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: \"%s\" is not a valid environment variable name "
                          "(want [A-Za-z_][A-Za-z0-9_]*)",
                          Av(where), absl::CHexEscape(k)));
    }
    const std::string& v = env.at(k);
    if (v.find_first_of(std::string_view("\0\n\r", 3)) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s[%s]: value \"%s\" contains a NUL, CR or newline", Av(where), k, absl::CHexEscape(v)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePolicy(const v1::SelectionPolicy& policy) {
  for (int i = 0; i < policy.deny_size(); ++i) {
    if (policy.deny(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("selection.deny[", i, "] is empty"));
    }
  }
  std::set<std::string> rails;
  for (int i = 0; i < policy.rails_size(); ++i) {
    const v1::Rail& r = policy.rails(i);
    const bool name_ok =
        !r.name().empty() && r.name().size() <= 40 &&
        r.name().find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
    if (!name_ok) {
      return absl::InvalidArgumentError(
          absl::StrFormat("selection.rails[%d].name \"%s\": want 1-40 of [a-z0-9-]", i,
                          absl::CHexEscape(r.name().substr(0, 64))));
    }
    if (!rails.insert(r.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("selection.rails[%d].name \"%s\" is used twice", i, r.name()));
    }
    if (r.switch_pattern().empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("selection.rails[%d] (%s) has no switchPattern", i, r.name()));
    }
  }
  if (!policy.socket_ifname().empty()) {
    // NCCL takes a list ("=net1,net2"): each name is checked.
    for (absl::string_view name : absl::StrSplit(policy.socket_ifname(), ',')) {
      if (absl::Status s = ValidateIfname(Sv(name)); !s.ok()) return s;
    }
  }
  if (absl::Status s = ValidateEnvMap(policy.static_env(), "selection.static_env"); !s.ok()) {
    return s;
  }
  std::vector<std::string> names;
  for (const auto& [name, profile] : policy.nic_profiles()) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (jobenv::FindProfile(name) == nullptr) {
      std::vector<std::string> known;
      for (const jobenv::Profile& p : jobenv::Profiles()) known.emplace_back(p.name);
      return absl::InvalidArgumentError(
          absl::StrFormat("selection.nicProfiles: no NIC profile \"%s\" (known: %s)",
                          absl::CHexEscape(name), absl::StrJoin(known, ", ")));
    }
    if (absl::Status s = ValidateEnvMap(policy.nic_profiles().at(name).env(),
                                        absl::StrCat("selection.nicProfiles.", name, ".env"));
        !s.ok()) {
      return s;
    }
  }
  // Rendered as NCCL_TOPO_FILE into every format (nccl.conf lines are unquoted): one absolute
  // path without blanks or control characters.
  const std::string& topo = policy.nccl_topo_file();
  if (!topo.empty() && (topo.front() != '/' || topo.size() > 4096 ||
                        std::any_of(topo.begin(), topo.end(), [](char c) {
                          return static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
                        }))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("selection.ncclTopoFile \"%s\" is not an absolute path without blanks",
                        absl::CHexEscape(topo)));
  }
  return absl::OkStatus();
}

}  // namespace fabric
