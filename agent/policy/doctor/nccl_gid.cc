#include "agent/policy/doctor/nccl_gid.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/policy/doctor/consumer_vars.h"
#include "agent/rdma/gid.h"

namespace fabric::doctor {
namespace {

using rdma::GidBytes;
using rdma::GidKind;

struct Slot {
  GidBytes gid{};
  int version = -1;  // 1, 2, or -1 when the type is unknown.
};

uint32_t Word(const GidBytes& g, int i) {
  return (uint32_t{g[4 * i]} << 24) | (uint32_t{g[4 * i + 1]} << 16) |
         (uint32_t{g[4 * i + 2]} << 8) | g[4 * i + 3];
}

sa_family_t FamilyOf(const GidBytes& g) {
  const bool mapped = Word(g, 0) == 0 && Word(g, 1) == 0 && Word(g, 2) == 0xffff;
  const bool mapped_multicast = Word(g, 0) == 0xff0e0000 && Word(g, 1) == 0 && Word(g, 2) == 0xffff;
  return mapped || mapped_multicast ? AF_INET : AF_INET6;
}

// NCCL's validGid: configured (not all zero, not a bare fe80::) and not link-local.
bool Valid(const GidBytes& g) {
  const uint32_t trailer = Word(g, 1) | Word(g, 2) | Word(g, 3);
  const bool configured =
      (Word(g, 0) | trailer) != 0 && !(Word(g, 0) == 0xfe800000 && trailer == 0);
  const bool link_local = Word(g, 0) == 0xfe800000 && Word(g, 1) == 0;
  return configured && !link_local;
}

uint32_t Mask(int bits) { return bits <= 0 ? 0 : (bits >= 32 ? ~0u : ~0u << (32 - bits)); }

bool InRange(const NcclGidRule& r, const GidBytes& g) {
  if (!r.range || r.prefix_len == 0) return true;
  const GidBytes& base = *r.range;
  if (r.family == AF_INET) {
    const uint32_t m = Mask(r.prefix_len);
    return (Word(base, 0) & m) == (Word(g, 3) & m);
  }
  int left = r.prefix_len;
  for (int i = 0; i < 4 && left > 0; ++i, left -= 32) {
    const uint32_t m = Mask(left);
    if ((Word(base, i) & m) != (Word(g, i) & m)) return false;
  }
  return true;
}

}  // namespace

NcclGidRule ReadNcclGidRule(const std::function<const char*(const char*)>& getenv) {
  NcclGidRule r;
  auto set = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  // ncclLoadParam's reading, shared with every other check (consumer_vars.h).
  auto param = [&](const char* name, int64_t dflt) {
    const char* v = getenv(name);
    NcclInt n = ReadNcclInt(name, v ? std::optional<std::string_view>(v) : std::nullopt, dflt);
    if (!n.problem.empty()) r.problems.push_back(std::move(n.problem));
    return n.value;
  };
  r.index = param("NCCL_IB_GID_INDEX", -1);
  r.roce_version = static_cast<int>(param("NCCL_IB_ROCE_VERSION_NUM", 2));
  if (const char* fam = set("NCCL_IB_ADDR_FAMILY")) {
    if (std::strcmp(fam, "AF_INET6") == 0) {
      r.family = AF_INET6;
    } else if (std::strcmp(fam, "AF_INET") != 0) {
      r.problems.push_back(absl::StrCat("NCCL_IB_ADDR_FAMILY=", Excerpt(fam),
                                        " is neither AF_INET nor AF_INET6: NCCL uses AF_INET"));
    }
  }
  if (const char* range = set("NCCL_IB_ADDR_RANGE")) {
    const std::string text = std::string(range).substr(0, 127);  // NCCL copies 128 bytes.
    const size_t slash = text.find('/');
    GidBytes base{};
    if (slash == std::string::npos ||
        inet_pton(r.family, text.substr(0, slash).c_str(), base.data()) != 1) {
      r.problems.push_back(absl::StrCat("NCCL_IB_ADDR_RANGE=", Excerpt(text), " is not an ",
                                        r.family == AF_INET ? "IPv4" : "IPv6",
                                        " ADDRESS/BITS: NCCL ignores it"));
    } else {
      const long bits = std::strtol(text.c_str() + slash + 1, nullptr, 10);
      if (bits > (r.family == AF_INET ? 32 : 128) || bits < 0) {
        r.problems.push_back(absl::StrCat("NCCL_IB_ADDR_RANGE=", Excerpt(text), ": /", bits,
                                          " is not a prefix length: NCCL ignores the range"));
      } else {
        r.range = base;
        r.prefix_len = static_cast<int>(bits);
      }
    }
  }
  return r;
}

int NcclGidPick(const std::vector<rdma::GidSlot>& table, int table_len, const NcclGidRule& rule) {
  if (rule.index >= 0) return static_cast<int>(rule.index);
  std::vector<Slot> slots(table_len > 0 ? static_cast<size_t>(table_len) : 0);
  for (const rdma::GidSlot& s : table) {
    if (s.index < 0 || s.index >= table_len) continue;
    Slot& slot = slots[static_cast<size_t>(s.index)];
    slot.gid = s.gid;
    if (s.kind == GidKind::kRoceV2) slot.version = 2;
    if (s.kind == GidKind::kRoceV1 || s.kind == GidKind::kIbOrRoceV1) slot.version = 1;
  }
  int cur = 0;
  for (int cand = 1; cand < table_len; ++cand) {
    const Slot& kept = slots[static_cast<size_t>(cur)];
    const Slot& next = slots[static_cast<size_t>(cand)];
    const sa_family_t kept_family = FamilyOf(kept.gid);
    const sa_family_t next_family = FamilyOf(next.gid);
    const bool in_range = InRange(rule, next.gid);
    if (next_family != kept_family && next_family == rule.family && in_range) {
      cur = cand;
      continue;
    }
    if (next_family != rule.family || !Valid(next.gid) || !in_range) continue;
    if ((kept.version != next.version || !Valid(kept.gid)) && next.version == rule.roce_version) {
      cur = cand;
    }
  }
  return cur;
}

}  // namespace fabric::doctor
