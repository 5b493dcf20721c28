// NVIDIA procfs GPU information and amdgpu unique_id (gpu_info.h).
#include "agent/inventory/discovery/gpu_info.h"

#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/parse.h"

namespace fabric {

namespace {

bool AllHex(std::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string Lower(std::string_view s) { return absl::AsciiStrToLower(Av(s)); }

}  // namespace

absl::StatusOr<std::string> ParseNvidiaUuid(std::string_view s) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("UUID ", Excerpt(s), " is malformed: ", Av(why),
                                                   " (GPU- or MIG- then 8-4-4-4-12 hex digits)"));
  };
  constexpr size_t kPrefix = 4;  // "GPU-", "MIG-"
  constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  if (s.size() < kPrefix) return bad("too short");
  const std::string prefix = absl::AsciiStrToUpper(Av(s.substr(0, kPrefix)));
  if (prefix != "GPU-" && prefix != "MIG-") return bad("no GPU- or MIG- prefix");
  std::string_view rest = s.substr(kPrefix);
  std::string out = prefix;
  for (size_t i = 0; i < std::size(kGroups); ++i) {
    if (i > 0) {
      if (rest.empty() || rest[0] != '-') return bad("wrong grouping");
      rest.remove_prefix(1);
      out.push_back('-');
    }
    if (rest.size() < kGroups[i] || !AllHex(rest.substr(0, kGroups[i]))) {
      return bad("wrong grouping or not hex");
    }
    out += Lower(rest.substr(0, kGroups[i]));
    rest.remove_prefix(kGroups[i]);
  }
  if (!rest.empty()) return bad("trailing characters");
  return out;
}

absl::StatusOr<std::string> ParseAmdUniqueId(std::string_view s) {
  std::string_view t = Trim(s);
  if (t.size() >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t.remove_prefix(2);
  if (t.empty() || t.size() > 16 || !AllHex(t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique_id ", Excerpt(s), " is not 1 to 16 hex digits"));
  }
  if (t.find_first_not_of('0') == std::string_view::npos) {
    return absl::InvalidArgumentError("unique_id is zero (no unique id)");
  }
  return absl::StrCat("GPU-", std::string(16 - t.size(), '0'), Lower(t));
}

absl::StatusOr<NvidiaGpuInfo> ParseNvidiaGpuInformation(std::string_view text) {
  NvidiaGpuInfo info;
  std::set<std::string, std::less<>> seen;
  bool have_uuid = false;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (Trim(line).empty()) continue;
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrFormat("line %d %s: %s", line_no, Excerpt(line), Av(why)));
    };
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bad("no colon");
    const std::string_view key = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (key.empty()) return bad("empty key");
    if (!seen.insert(std::string(key)).second) return bad("repeated key");
    if (key == "Model") {
      info.model = std::string(value);
    } else if (key == "GPU UUID") {
      have_uuid = true;
      if (value == "??" || value == "N/A" || value.empty()) continue;
      absl::StatusOr<std::string> uuid = ParseNvidiaUuid(value);
      if (!uuid.ok() || uuid->substr(0, 4) != "GPU-") return bad("not a GPU-<uuid>");
      info.uuid = *std::move(uuid);
    } else if (key == "Bus Location") {
      absl::StatusOr<std::string> addr = ParsePciAddress(value);
      if (!addr.ok()) return bad("not a PCI address");
      info.bus_location = *std::move(addr);
    } else if (key == "Device Minor") {
      absl::StatusOr<int64_t> minor = ParseInt(value);
      if (!minor.ok() || *minor < 0 || *minor > 0xfffff) return bad("not a device minor");
      info.device_minor = static_cast<uint32_t>(*minor);
    }
  }
  if (!have_uuid) return absl::InvalidArgumentError("no \"GPU UUID:\" line");
  return info;
}

}  // namespace fabric
