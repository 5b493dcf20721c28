#include "agent/common/log.h"

#include <unistd.h>

#include <cstdlib>

namespace fabric {
namespace {

std::string g_program = "fabric";
LogLevel g_min = LogLevel::kInfo;
bool g_journal = false;

}  // namespace

void InitLog(std::string_view program, LogLevel min_level) {
  g_program = std::string(program);
  g_min = min_level;
  g_journal = std::getenv("JOURNAL_STREAM") != nullptr;
}

bool ParseLogLevel(std::string_view name, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"debug", LogLevel::kDebug},
      {"info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning},
      {"error", LogLevel::kError}};
  for (const auto& [n, level] : kNames) {
    if (n == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

bool LogEnabled(LogLevel level) { return level >= g_min; }

void LogLine(LogLevel level, std::string_view message) {
  // syslog priorities: debug 7, info 6, warning 4, error 3.
  static constexpr const char* kPrio[] = {"<7>", "<6>", "<4>", "<3>"};
  static constexpr const char* kName[] = {"debug: ", "", "warning: ", "error: "};
  const int i = static_cast<int>(level);
  std::string line;
  if (g_journal) {
    line = absl::StrCat(kPrio[i], kName[i], std::string(message), "\n");
  } else {
    line = absl::StrCat(g_program, ": ", kName[i], std::string(message), "\n");
  }
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace fabric
