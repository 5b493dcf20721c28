// The kernel log as /dev/kmsg gives it: one record per read(2), parsed apart from the reading
// (Documentation/ABI/testing/dev-kmsg), a reader seam (`KmsgSource`) so tests and fuzzers drive the
// logic without the device, and `KmsgReader`, which drains records under a rate bound with every
// loss counted. Nothing here decides what a line means: agent/policy/health/log_rules.h does.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/common/fd.h"
#include "agent/common/token_bucket.h"

namespace fabric {

// The largest record one read(2) of /dev/kmsg returns (the kernel's CONSOLE_EXT_LOG_MAX); a read
// with a smaller buffer than the record fails with EINVAL, so this is also the read size.
inline constexpr size_t kKmsgRecordMax = 8192;

// syslog facility 0: printk. Records written to /dev/kmsg from user space carry facility 1 (USER)
// or another non-zero one; the kernel never lets a writer claim 0.
inline constexpr int kKmsgFacilityKernel = 0;

struct KmsgRecord {
  int facility = 0;  // prefix value >> 3
  int level = 0;     // prefix value & 7 (KERN_EMERG 0 .. KERN_DEBUG 7)
  uint64_t seq = 0;
  uint64_t usec = 0;       // microseconds since boot
  bool continued = false;  // flag 'c' or '+': a fragment of a line printed in pieces
  std::string message;     // unescaped: \xNN turned back into the byte
  std::string subsystem;   // dictionary SUBSYSTEM= ("pci", "net"), "" when absent
  std::string device;      // dictionary DEVICE= ("+pci:0000:3b:00.0", "n3"), "" when absent
};

// One record as read(2) returned it: "level,seq,usec,flag[,more];message\n" then zero or more
// " KEY=VALUE\n" dictionary lines. InvalidArgument when it is cut short (no ';', no final newline),
// a number is not one, the flag is unknown, or it is longer than kKmsgRecordMax: the device never
// returns more in one read, so a longer input is not a record and is refused rather than
// truncated (a truncated text would be reported as if the kernel had printed it).
absl::StatusOr<KmsgRecord> ParseKmsgRecord(std::string_view record);

// Where records come from. Next() returns one record, nullopt when none is available now, or an
// error the caller should report (the source stays usable).
class KmsgSource {
 public:
  virtual ~KmsgSource() = default;
  virtual absl::StatusOr<std::optional<std::string>> Next() = 0;
  // Times the reader fell behind and the kernel dropped records before it read them.
  virtual uint64_t overruns() const { return 0; }
  // Times the source ended (a FIFO's writer left): the reader stops there until it is reopened.
  virtual uint64_t ends() const { return 0; }
  virtual bool ended() const { return false; }
};

struct KmsgSourceOptions {
  std::string path = "/dev/kmsg";
  // false: start after the newest record (what happens from now on); true: from the oldest record
  // still in the ring buffer, as dmesg does.
  bool from_start = false;
};

// What a kernel log source may be, judged from fstat before any read: the kernel log's own
// character device (major 1, minor 11, whatever its path), or a FIFO standing in for it (tests,
// a relay). Anything else is InvalidArgument naming what it is: /dev/zero or a regular file is
// always readable and never a record, so a poll loop over it would spin a core.
absl::Status CheckKmsgSourceKind(std::string_view path, mode_t mode, dev_t rdev);

// /dev/kmsg through a non-blocking descriptor (for a poll loop).
class KmsgSourceImpl : public KmsgSource {
 public:
  // read(2), replaceable so tests can script EPIPE and EINTR without the device.
  using ReadFn = std::function<ssize_t(int fd, void* buf, size_t len)>;

  // Refuses what CheckKmsgSourceKind refuses.
  static absl::StatusOr<std::unique_ptr<KmsgSourceImpl>> Open(const KmsgSourceOptions& options);
  explicit KmsgSourceImpl(UniqueFd fd, ReadFn read = nullptr, KmsgSourceOptions options = {});

  // EPIPE (the ring buffer overwrote records this reader had not read: the kernel has moved it to
  // the oldest record left) is counted in overruns() and the read retried; it never fails. End of
  // file (a FIFO whose writer left: it reads 0 and polls readable for ever) closes the
  // descriptor (fd() is -1, which poll ignores) and is counted in ends(); Reopen brings it back.
  absl::StatusOr<std::optional<std::string>> Next() override;
  uint64_t overruns() const override { return overruns_; }
  uint64_t ends() const override { return ends_; }
  bool ended() const override { return ended_; }
  int fd() const { return fd_.get(); }

  // When an ended source is to be opened again: after a back-off that doubles from 1 s to 1 min
  // while it keeps ending within a minute of opening; InfiniteFuture while it is open.
  absl::Time reopen_at() const { return ended_ ? reopen_at_ : absl::InfiniteFuture(); }
  // Opens the path again (from its end); on failure stays ended and backs off again.
  absl::Status Reopen(absl::Time now);

 private:
  UniqueFd fd_;
  ReadFn read_;
  KmsgSourceOptions options_;
  uint64_t overruns_ = 0;
  uint64_t ends_ = 0;
  bool ended_ = false;
  absl::Time opened_at_ = absl::InfinitePast();
  absl::Duration backoff_ = absl::ZeroDuration();
  absl::Time reopen_at_ = absl::InfiniteFuture();
  std::array<char, kKmsgRecordMax> buf_{};
};

// Everything a reader counted, for the metrics and the health output.
struct KmsgCounts {
  uint64_t read = 0;           // records taken from the source
  uint64_t malformed = 0;      // records that did not parse
  uint64_t not_kernel = 0;     // skipped by kernel_only
  uint64_t rate_dropped = 0;   // over the rate bound
  uint64_t overruns = 0;       // EPIPE: the kernel overwrote records before they were read
  uint64_t source_errors = 0;  // reads that failed
  uint64_t ends = 0;           // the source ended (a FIFO's writer left)
  std::string last_malformed;  // the last parse error, with an excerpt of the record
};

struct KmsgReaderOptions {
  // The rate bound: records kept per second after a burst. A flapping link or a firmware in a
  // loop can print 100,000 lines a second; everything past the bound is dropped and counted.
  double lines_per_second = 2000;
  double burst = 10000;
  // Keep facility-0 (kernel) records only: a user's `echo ... > /dev/kmsg` lands in the same log
  // but never with facility 0, so a forged "mlx5_core ... Fatal error" cannot raise a finding.
  bool kernel_only = true;
};

// Drains a source under a rate bound. Holds no queue: what one Drain returns is all the memory it
// uses, at most `max_records` records. Not thread-safe.
class KmsgReader {
 public:
  explicit KmsgReader(KmsgSource* source, KmsgReaderOptions options = {});

  // Reads up to `max_records` records that are available now and returns those that parsed, are
  // kept by kernel_only and fit the rate bound at `now`. Stops early when the source has none or
  // fails (last_error()).
  std::vector<KmsgRecord> Drain(absl::Time now, size_t max_records);

  uint64_t read() const { return read_; }            // records taken from the source
  uint64_t malformed() const { return malformed_; }  // records that did not parse
  const std::string& last_malformed() const { return last_malformed_; }
  uint64_t not_kernel() const { return not_kernel_; }  // skipped by kernel_only
  uint64_t dropped() const { return dropped_; }        // over the rate bound
  uint64_t source_errors() const { return source_errors_; }
  const absl::Status& last_error() const { return last_error_; }
  uint64_t overruns() const { return source_->overruns(); }
  KmsgCounts counts() const;

 private:
  KmsgSource* source_;
  KmsgReaderOptions options_;
  TokenBucket bucket_;
  uint64_t read_ = 0;
  uint64_t malformed_ = 0;
  std::string last_malformed_;
  uint64_t not_kernel_ = 0;
  uint64_t dropped_ = 0;
  uint64_t source_errors_ = 0;
  absl::Status last_error_;
};

}  // namespace fabric
