#include "agent/hostfs/kmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"

namespace fabric {
namespace {

// A bounded retry count for EINTR and EPIPE in one Next(): after EPIPE the kernel has already
// moved the reader to the oldest record left, so the next read succeeds unless the flood
// overwrites that one too; giving up then costs nothing (the caller polls again).
constexpr int kReadTries = 8;

absl::Status Refuse(std::string_view why, std::string_view record) {
  return absl::InvalidArgumentError(absl::StrCat("kmsg record ", Av(why), ": ", Excerpt(record)));
}

// Strict decimal: digits only (no sign, no spaces), no overflow.
bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// The kernel escapes bytes below ' ', from 0x7f, and '\\' itself as \xNN. A backslash without two
// hex digits after it cannot come from the kernel; it is kept as it is rather than refused, since
// the text is still worth matching.
std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x') {
      const int hi = HexDigit(s[i + 2]);
      const int lo = HexDigit(s[i + 3]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi << 4 | lo);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

absl::StatusOr<KmsgRecord> ParseKmsgRecord(std::string_view record) {
  if (record.size() > kKmsgRecordMax) {
    return Refuse(absl::StrCat("is longer than the ", kKmsgRecordMax, " bytes one read returns"),
                  record);
  }
  const size_t semi = record.find(';');
  if (semi == std::string_view::npos)
    return Refuse("is cut short: no ';' after the prefix", record);
  const size_t eol = record.find('\n', semi);
  if (eol == std::string_view::npos) {
    return Refuse("is cut short: the message has no final newline", record);
  }

  // Prefix: level,seq,usec,flag[,further fields such as caller=T12 are ignored].
  std::string_view prefix = record.substr(0, semi);
  std::string_view fields[4];
  for (int i = 0; i < 4; ++i) {
    const size_t comma = prefix.find(',');
    if (i < 3 && comma == std::string_view::npos) {
      return Refuse("prefix has fewer than 4 fields (level,seq,usec,flag)", record);
    }
    fields[i] = prefix.substr(0, comma);
    prefix = comma == std::string_view::npos ? std::string_view() : prefix.substr(comma + 1);
  }
  uint64_t value = 0;
  KmsgRecord r;
  // The prefix value is facility << 3 | level, facility at most 8 bits in the kernel (LOG_FACMASK).
  if (!ParseDecimal(fields[0], &value) || value > 0x7ff) {
    return Refuse("level is not a syslog priority", record);
  }
  r.facility = static_cast<int>(value >> 3);
  r.level = static_cast<int>(value & 7);
  if (!ParseDecimal(fields[1], &r.seq)) return Refuse("sequence number is not a number", record);
  if (!ParseDecimal(fields[2], &r.usec)) return Refuse("timestamp is not a number", record);
  if (fields[3] == "-") {
    r.continued = false;
  } else if (fields[3] == "c" || fields[3] == "+") {
    r.continued = true;
  } else {
    return Refuse("flag is not '-', 'c' or '+'", record);
  }
  r.message = Unescape(record.substr(semi + 1, eol - semi - 1));

  // Dictionary: each line " KEY=VALUE\n"; unknown keys are skipped.
  std::string_view rest = record.substr(eol + 1);
  while (!rest.empty()) {
    if (rest[0] != ' ')
      return Refuse("has text after the message that is not a dictionary", record);
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return Refuse("is cut short in its dictionary", record);
    const std::string_view line = rest.substr(1, nl - 1);
    rest = rest.substr(nl + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq);
    if (key == "SUBSYSTEM") {
      r.subsystem = Unescape(line.substr(eq + 1));
    } else if (key == "DEVICE") {
      r.device = Unescape(line.substr(eq + 1));
    }
  }
  return r;
}

absl::Status CheckKmsgSourceKind(std::string_view path, mode_t mode, dev_t rdev) {
  if (S_ISFIFO(mode)) return absl::OkStatus();
  if (S_ISCHR(mode) && major(rdev) == 1 && minor(rdev) == 11) return absl::OkStatus();
  std::string what = S_ISREG(mode)    ? "a regular file"
                     : S_ISDIR(mode)  ? "a directory"
                     : S_ISSOCK(mode) ? "a socket"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISCHR(mode)
                         ? absl::StrCat("the character device ", major(rdev), ":", minor(rdev))
                         : "not a device";
  return absl::InvalidArgumentError(
      absl::StrCat(Excerpt(path, 256), " is ", what,
                   ", not the kernel log (the character device 1:11, /dev/kmsg, or a FIFO)"));
}

namespace {

absl::StatusOr<UniqueFd> OpenKmsg(const KmsgSourceOptions& options) {
  UniqueFd fd(open(options.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    const std::string what = absl::StrCat("open ", options.path, ": ", ErrnoText(err));
    if (err == ENOENT) return absl::NotFoundError(what);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(what);
    return absl::UnavailableError(what);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return absl::UnavailableError(absl::StrCat("stat ", options.path, ": ", ErrnoText(errno)));
  }
  if (absl::Status s = CheckKmsgSourceKind(options.path, st.st_mode, st.st_rdev); !s.ok()) {
    return s;
  }
  // A fresh descriptor reads from the oldest record; SEEK_END skips to what comes next.
  // (A FIFO standing in for the device in a test has no old records: ESPIPE is no error.)
  if (!options.from_start && lseek(fd.get(), 0, SEEK_END) < 0 && errno != ESPIPE) {
    return absl::UnavailableError(
        absl::StrCat("seek to the end of ", options.path, ": ", ErrnoText(errno)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KmsgSourceImpl>> KmsgSourceImpl::Open(
    const KmsgSourceOptions& options) {
  absl::StatusOr<UniqueFd> fd = OpenKmsg(options);
  if (!fd.ok()) return fd.status();
  return std::make_unique<KmsgSourceImpl>(*std::move(fd), nullptr, options);
}

KmsgSourceImpl::KmsgSourceImpl(UniqueFd fd, ReadFn read, KmsgSourceOptions options)
    : fd_(std::move(fd)),
      read_(read ? std::move(read) : ReadFn(::read)),
      options_(std::move(options)),
      opened_at_(absl::Now()) {
  options_.from_start = false;  // a reopened source goes on from what comes next
}

absl::Status KmsgSourceImpl::Reopen(absl::Time now) {
  if (!ended_) return absl::OkStatus();
  absl::StatusOr<UniqueFd> fd = OpenKmsg(options_);
  if (!fd.ok()) {
    backoff_ = std::min(std::max(backoff_ * 2, absl::Seconds(1)), absl::Minutes(1));
    reopen_at_ = now + backoff_;
    return fd.status();
  }
  fd_ = *std::move(fd);
  ended_ = false;
  opened_at_ = now;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> KmsgSourceImpl::Next() {
  if (ended_) return std::nullopt;
  for (int tries = 0; tries < kReadTries; ++tries) {
    const ssize_t n = read_(fd_.get(), buf_.data(), buf_.size());
    if (n > 0) return std::string(buf_.data(), std::min(static_cast<size_t>(n), buf_.size()));
    if (n == 0) {
      // End of file: /dev/kmsg never gives it (it blocks or says EAGAIN); a FIFO whose writer left
      // does, and polls readable until it is closed. Closed here, reopened after a back-off that
      // grows while it keeps ending soon after each open.
      fd_.reset();
      ended_ = true;
      ++ends_;
      const absl::Time now = absl::Now();
      backoff_ = now - opened_at_ < absl::Minutes(1)
                     ? std::min(std::max(backoff_ * 2, absl::Seconds(1)), absl::Minutes(1))
                     : absl::Seconds(1);
      reopen_at_ = now + backoff_;
      return std::nullopt;
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return std::nullopt;
    if (err == EPIPE) {
      ++overruns_;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("read kmsg: ", ErrnoText(err)));
  }
  return std::nullopt;
}

KmsgCounts KmsgReader::counts() const {
  KmsgCounts c;
  c.read = read_;
  c.malformed = malformed_;
  c.not_kernel = not_kernel_;
  c.rate_dropped = dropped_;
  c.overruns = source_->overruns();
  c.source_errors = source_errors_;
  c.ends = source_->ends();
  c.last_malformed = last_malformed_;
  return c;
}

KmsgReader::KmsgReader(KmsgSource* source, KmsgReaderOptions options)
    : source_(source), options_(options), bucket_(options.lines_per_second, options.burst) {}

std::vector<KmsgRecord> KmsgReader::Drain(absl::Time now, size_t max_records) {
  std::vector<KmsgRecord> out;
  out.reserve(std::min<size_t>(max_records, 256));
  for (size_t i = 0; i < max_records; ++i) {
    absl::StatusOr<std::optional<std::string>> next = source_->Next();
    if (!next.ok()) {
      ++source_errors_;
      last_error_ = next.status();
      break;
    }
    if (!next->has_value()) break;
    ++read_;
    absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(**next);
    if (!r.ok()) {
      ++malformed_;
      last_malformed_ = std::string(r.status().message());
      continue;
    }
    if (options_.kernel_only && r->facility != kKmsgFacilityKernel) {
      ++not_kernel_;
      continue;
    }
    // The bound comes after parsing and the facility check: a user-space flood spends no tokens
    // the kernel's own lines need.
    if (!bucket_.Take(now)) {
      ++dropped_;
      continue;
    }
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace fabric
