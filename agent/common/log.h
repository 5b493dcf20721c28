// A small leveled logger to stderr for the daemons and plugins (Debian 12's abseil predates
// absl/log). Under systemd (JOURNAL_STREAM set) lines carry the "<N>" priority prefix journald
// understands; otherwise they read "fabric-agent: warning: ...".
#pragma once

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace fabric {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the program name and the lowest level printed. Not thread-safe: call once at start-up.
void InitLog(std::string_view program, LogLevel min_level);
// Parses "debug", "info", "warning", "error"; false when unknown.
bool ParseLogLevel(std::string_view name, LogLevel* out);
bool LogEnabled(LogLevel level);
// Writes one line with a single write(2), so lines from threads do not interleave.
void LogLine(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrCat(args...));
}

}  // namespace fabric
