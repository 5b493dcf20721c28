#include "agent/hostfs/pci_aer.h"

#include <cerrno>
#include <cstddef>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"

namespace fabric {
namespace {

// The kernel prints at most 16 correctable or 27 uncorrectable bits and the TOTAL_ line; the cap
// leaves room for new bits and bounds the work on a file that is not an AER attribute.
constexpr size_t kMaxLines = 64;
constexpr std::string_view kTotalPrefix = "TOTAL_";

absl::Status BadLine(size_t n, std::string_view what, std::string_view line) {
  return absl::InvalidArgumentError(absl::StrCat("line ", n, " ", Av(what), ": ", Excerpt(line)));
}

std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return !s.empty();
}

// A name is printable ASCII; inner spaces are allowed so that a future bit name with one parses.
bool ValidName(std::string_view s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return false;
  for (char c : s) {
    if (c < ' ' || c > '~') return false;
  }
  return true;
}

// "0000:18:00.0": as sysfs names functions (VMD domains have more than four digits).
bool ValidBdf(std::string_view s) {
  auto hex = [](std::string_view h) {
    for (char c : h) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  };
  if (s.size() < 12 || s.size() > 16) return false;
  const size_t d = s.size() - 8;  // Length of the domain.
  return hex(s.substr(0, d)) && s[d] == ':' && hex(s.substr(d + 1, 2)) && s[d + 3] == ':' &&
         hex(s.substr(d + 4, 2)) && s[d + 6] == '.' && s[d + 7] >= '0' && s[d + 7] <= '7';
}

}  // namespace

absl::StatusOr<AerCounts> ParseAerCounts(std::string_view text) {
  AerCounts out;
  bool have_total = false;
  size_t n = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (++n > kMaxLines) {
      return BadLine(n, absl::StrCat("is past the ", kMaxLines, " lines an AER file may have"),
                     line);
    }
    const size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos || !ValidName(line.substr(0, sp))) {
      return BadLine(n, "is not \"<name> <count>\"", line);
    }
    const std::string_view name = line.substr(0, sp);
    const std::string_view digits = line.substr(sp + 1);
    if (!AllDigits(digits)) return BadLine(n, "is not \"<name> <count>\"", line);
    const std::optional<uint64_t> count = ParseDecimal(digits);
    if (!count) return BadLine(n, "has a count over 2^64-1", line);
    if (name.substr(0, kTotalPrefix.size()) == kTotalPrefix) {
      if (have_total) return BadLine(n, "is a second TOTAL_ line", line);
      have_total = true;
      out.total = *count;
    } else {
      out.bits.emplace_back(name, *count);
    }
  }
  if (!have_total) {
    return absl::InvalidArgumentError(n == 0 ? "empty AER file (no TOTAL_ line)"
                                             : "no TOTAL_ line in the AER file");
  }
  return out;
}

absl::StatusOr<PciAer> ReadPciAer(const HostFs& sysfs, std::string_view bdf) {
  if (!ValidBdf(bdf)) {
    return absl::InvalidArgumentError(absl::StrCat("not a PCI address: ", Excerpt(bdf)));
  }
  // Resolved inside the root, then read relative to it: the three reads see one function.
  absl::StatusOr<std::string> real = sysfs.RealPath(absl::StrCat("bus/pci/devices/", Av(bdf)));
  if (!real.ok()) return real.status();
  absl::StatusOr<std::unique_ptr<HostDir>> dir = sysfs.OpenDir(*real);
  if (!dir.ok()) return dir.status();
  PciAer out;
  const std::pair<std::string_view, AerCounts*> files[] = {
      {"aer_dev_correctable", &out.correctable},
      {"aer_dev_nonfatal", &out.nonfatal},
      {"aer_dev_fatal", &out.fatal},
  };
  for (const auto& [name, counts] : files) {
    absl::StatusOr<std::string> text = (*dir)->ReadFile(name);
    if (!text.ok()) {
      // The kernel adds the three together: no first one means no AER statistics at all.
      if (counts == &out.correctable && StatusErrno(text.status()) == ENOENT) {
        return absl::NotFoundError(
            absl::StrCat("PCI function ", Av(bdf),
                         " has no AER counters (no AER capability, or a kernel before 4.19)"));
      }
      return text.status();  // HostFs's message names the file.
    }
    absl::StatusOr<AerCounts> parsed = ParseAerCounts(*text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(JoinPath((*dir)->path(), name), ": ", parsed.status().message()));
    }
    *counts = *std::move(parsed);
  }
  return out;
}

}  // namespace fabric
