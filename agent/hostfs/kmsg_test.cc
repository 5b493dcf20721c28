#include "agent/hostfs/kmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;

constexpr char kGood[] =
    "3,1234,5678901,-;mlx5_core 0000:3b:00.0: poll_health:801:(pid 0): Fatal error 1 detected\n"
    " SUBSYSTEM=pci\n"
    " DEVICE=+pci:0000:3b:00.0\n";

TEST(ParseKmsgRecord, GoodRecords) {
  struct Case {
    std::string in;
    int facility, level;
    uint64_t seq, usec;
    bool continued;
    std::string message, subsystem, device;
  };
  const Case cases[] = {
      {kGood, 0, 3, 1234, 5678901, false,
       "mlx5_core 0000:3b:00.0: poll_health:801:(pid 0): Fatal error 1 detected", "pci",
       "+pci:0000:3b:00.0"},
      // No dictionary; a user-space write: <14> is facility 1 (USER), level 6.
      {"14,7,8,-;fabric hello\n", 1, 6, 7, 8, false, "fabric hello", "", ""},
      // Facility 3 (daemon), level 7.
      {"31,0,0,-;x\n", 3, 7, 0, 0, false, "x", "", ""},
      // Continuation fragments.
      {"4,9,10,c;first part\n", 0, 4, 9, 10, true, "first part", "", ""},
      {"4,10,10,+;second part\n", 0, 4, 10, 10, true, "second part", "", ""},
      // Fields after the flag (CONFIG_PRINTK_CALLER) are ignored.
      {"6,11,12,-,caller=T1;with caller\n", 0, 6, 11, 12, false, "with caller", "", ""},
      // Escapes: newline, tab, backslash (the kernel escapes it too), a UTF-8 byte pair.
      {"6,1,1,-;a\\x0ab\\x09c\\x5cd\\xc3\\xa9\n", 0, 6, 1, 1, false, "a\nb\tc\\d\xc3\xa9", "", ""},
      // A backslash the kernel would not have written is kept as it is.
      {"6,1,1,-;odd \\x4 \\q end\\\n", 0, 6, 1, 1, false, "odd \\x4 \\q end\\", "", ""},
      // Empty message; unknown dictionary keys and a line without '=' are skipped.
      {"6,2,3,-;\n DRIVER=mlx5_core\n junk\n DEVICE=n4\n", 0, 6, 2, 3, false, "", "", "n4"},
      // Escaped dictionary value.
      {"6,2,3,-;m\n DEVICE=+net:a\\x20b\n", 0, 6, 2, 3, false, "m", "", "+net:a b"},
      // The largest sequence number.
      {"6,18446744073709551615,0,-;m\n", 0, 6, UINT64_MAX, 0, false, "m", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(c.in);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->facility, c.facility);
    EXPECT_EQ(r->level, c.level);
    EXPECT_EQ(r->seq, c.seq);
    EXPECT_EQ(r->usec, c.usec);
    EXPECT_EQ(r->continued, c.continued);
    EXPECT_EQ(r->message, c.message);
    EXPECT_EQ(r->subsystem, c.subsystem);
    EXPECT_EQ(r->device, c.device);
  }
}

TEST(ParseKmsgRecord, BadRecords) {
  struct Case {
    std::string in;
    std::string why;  // A part of the error message.
  };
  const Case cases[] = {
      {"", "no ';'"},
      {"6,1,2,-", "no ';'"},
      {"6,1,2,-;no newline", "no final newline"},
      {"6,1,2;m\n", "fewer than 4 fields"},
      {"6,1;m\n", "fewer than 4 fields"},
      {";m\n", "fewer than 4 fields"},
      {"x,1,2,-;m\n", "level"},
      {",1,2,-;m\n", "level"},
      {"-6,1,2,-;m\n", "level"},
      {"+6,1,2,-;m\n", "level"},
      {"2048,1,2,-;m\n", "level"},
      {"6,1x,2,-;m\n", "sequence"},
      {"6,18446744073709551616,2,-;m\n", "sequence"},  // 2^64.
      {"6, 1,2,-;m\n", "sequence"},
      {"6,1,2.5,-;m\n", "timestamp"},
      {"6,1,,-;m\n", "timestamp"},
      {"6,1,2,x;m\n", "flag"},
      {"6,1,2,;m\n", "flag"},
      {"6,1,2,--;m\n", "flag"},
      {"6,1,2,-;m\nSUBSYSTEM=pci\n", "not a dictionary"},
      {"6,1,2,-;m\n SUBSYSTEM=pci", "cut short in its dictionary"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(c.in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.why));
  }
}

// A record cut anywhere is refused, except right after a complete line: that is a record with a
// shorter dictionary, and its message is intact.
TEST(ParseKmsgRecord, RecordsCutInHalf) {
  const std::string full = kGood;
  int accepted = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(std::string_view(full).substr(0, n));
    if (n > 0 && full[n - 1] == '\n') {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->message, ParseKmsgRecord(full)->message);
      ++accepted;
    } else {
      EXPECT_FALSE(r.ok());
    }
  }
  EXPECT_EQ(accepted, 2);  // After the message, after SUBSYSTEM=.
}

TEST(ParseKmsgRecord, LengthBound) {
  const std::string head = "6,1,2,-;";
  std::string fits = head + std::string(kKmsgRecordMax - head.size() - 1, 'a') + "\n";
  ASSERT_EQ(fits.size(), kKmsgRecordMax);
  EXPECT_TRUE(ParseKmsgRecord(fits).ok());
  std::string huge = head + std::string(kKmsgRecordMax, 'a') + "\n";
  absl::StatusOr<KmsgRecord> r = ParseKmsgRecord(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("longer than the 8192 bytes"));
  // The message quotes the input, but only a short excerpt of it.
  EXPECT_LT(r.status().message().size(), 300u);
}

// The seam: records handed out one per Next(), then "none now"; an error can be queued.
class FakeSource : public KmsgSource {
 public:
  void Push(std::string record) { items_.push_back(std::move(record)); }
  void PushError() { items_.push_back(std::nullopt); }
  absl::StatusOr<std::optional<std::string>> Next() override {
    ++calls_;
    if (items_.empty()) return std::nullopt;
    std::optional<std::string> item = std::move(items_.front());
    items_.pop_front();
    if (!item.has_value()) return absl::UnavailableError("read kmsg: Input/output error");
    return item;
  }
  size_t left() const { return items_.size(); }
  int calls() const { return calls_; }

 private:
  std::deque<std::optional<std::string>> items_;
  int calls_ = 0;
};

std::string Line(uint64_t seq, std::string_view text = "mlx5_core 0000:3b:00.0: Link down") {
  return absl::StrFormat("6,%d,%d,-;%s\n", seq, seq * 10, std::string(text));
}

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

TEST(KmsgReader, BoundPerDrain) {
  FakeSource src;
  for (int i = 0; i < 50; ++i) src.Push(Line(i));
  KmsgReader reader(&src);
  std::vector<KmsgRecord> got = reader.Drain(kT0, 10);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got.front().seq, 0u);
  EXPECT_EQ(got.back().seq, 9u);
  EXPECT_EQ(reader.read(), 10u);
  EXPECT_EQ(src.left(), 40u) << "the rest stays in the source, not in the reader";
  EXPECT_EQ(reader.Drain(kT0, 100).size(), 40u);
  EXPECT_TRUE(reader.Drain(kT0, 100).empty());
  EXPECT_EQ(reader.Drain(kT0, 0).size(), 0u);
}

// 100,000 lines in one second, drained every 10 ms, 1,000 at most per drain: the kept lines are
// the burst plus the refill, every other line is counted as dropped, and no drain returns more
// than its bound.
TEST(KmsgReader, FloodIsRateBoundAndCounted) {
  FakeSource src;
  for (int i = 0; i < 100000; ++i) src.Push(Line(i));
  KmsgReaderOptions opt;
  opt.lines_per_second = 2000;
  opt.burst = 10000;
  KmsgReader reader(&src, opt);
  size_t kept = 0;
  for (int step = 0; step < 100; ++step) {
    std::vector<KmsgRecord> got = reader.Drain(kT0 + absl::Milliseconds(10 * step), 1000);
    ASSERT_LE(got.size(), 1000u);
    kept += got.size();
  }
  EXPECT_EQ(src.left(), 0u);
  EXPECT_EQ(reader.read(), 100000u);
  // 10,000 burst + 99 refills of 20.
  EXPECT_NEAR(static_cast<double>(kept), 11980.0, 2.0);
  EXPECT_EQ(kept + reader.dropped(), 100000u);
  EXPECT_EQ(reader.malformed(), 0u);

  // Quiet for ten seconds: the bucket is full again, and only the burst is kept from a new flood.
  for (int i = 0; i < 20000; ++i) src.Push(Line(100000 + i));
  const absl::Time later = kT0 + absl::Seconds(11);
  size_t kept2 = 0;
  for (int step = 0; step < 20; ++step) kept2 += reader.Drain(later, 1000).size();
  EXPECT_EQ(kept2, 10000u);
  EXPECT_EQ(reader.dropped(), 100000u - kept + 10000u);
}

TEST(KmsgReader, MalformedRecordsAreCountedAndSkipped) {
  FakeSource src;
  src.Push(Line(1));
  src.Push("6,2,20,-;cut in ha");
  src.Push(Line(3));
  src.Push("garbage");
  KmsgReader reader(&src);
  std::vector<KmsgRecord> got = reader.Drain(kT0, 100);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, 1u);
  EXPECT_EQ(got[1].seq, 3u);
  EXPECT_EQ(reader.malformed(), 2u);
  EXPECT_THAT(reader.last_malformed(), HasSubstr("no ';'"));
  EXPECT_THAT(reader.last_malformed(), HasSubstr("garbage"));
  EXPECT_EQ(reader.dropped(), 0u);
}

TEST(KmsgReader, UserSpaceRecordsAreSkippedUnlessAsked) {
  FakeSource src;
  src.Push("11,1,1,-;mlx5_core 0000:3b:00.0: Fatal error 1 detected\n");  // <11>: USER, err.
  src.Push(Line(2));
  KmsgReader reader(&src);
  std::vector<KmsgRecord> got = reader.Drain(kT0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 2u);
  EXPECT_EQ(reader.not_kernel(), 1u);

  FakeSource src2;
  src2.Push("11,1,1,-;from a user\n");
  KmsgReaderOptions all;
  all.kernel_only = false;
  KmsgReader reader2(&src2, all);
  got = reader2.Drain(kT0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].facility, 1);
  EXPECT_EQ(reader2.not_kernel(), 0u);
}

TEST(KmsgReader, SourceErrorStopsTheDrainOnly) {
  FakeSource src;
  src.Push(Line(1));
  src.PushError();
  src.Push(Line(3));
  KmsgReader reader(&src);
  std::vector<KmsgRecord> got = reader.Drain(kT0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(reader.source_errors(), 1u);
  EXPECT_THAT(std::string(reader.last_error().message()), HasSubstr("Input/output error"));
  got = reader.Drain(kT0, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 3u);
}

// KmsgSourceImpl over a scripted read(2): EPIPE is an overrun, counted, and the read goes on.
struct ScriptedRead {
  struct Step {
    int err;  // 0: return `data`.
    std::string data;
  };
  std::deque<Step> steps;
  size_t last_len = 0;
  ssize_t operator()(int, void* buf, size_t len) {
    last_len = len;
    if (steps.empty()) {
      errno = EAGAIN;
      return -1;
    }
    Step s = steps.front();
    steps.pop_front();
    if (s.err != 0) {
      errno = s.err;
      return -1;
    }
    memcpy(buf, s.data.data(), s.data.size());
    return static_cast<ssize_t>(s.data.size());
  }
};

TEST(KmsgSourceImpl, OverrunsAreCountedAndReadingGoesOn) {
  auto script = std::make_shared<ScriptedRead>();
  script->steps = {{EPIPE, ""},  {0, Line(40)}, {EINTR, ""}, {0, Line(41)},
                   {EAGAIN, ""}, {EPIPE, ""},   {EPIPE, ""}, {0, Line(90)}};
  KmsgSourceImpl src(UniqueFd(),
                     [script](int fd, void* b, size_t n) { return (*script)(fd, b, n); });
  auto next = src.Next();
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ(**next, Line(40));
  EXPECT_EQ(src.overruns(), 1u);
  EXPECT_EQ(script->last_len, kKmsgRecordMax) << "a smaller buffer than a record is EINVAL";
  next = src.Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ(**next, Line(41));
  next = src.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value()) << "EAGAIN: nothing now";
  next = src.Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ(**next, Line(90));
  EXPECT_EQ(src.overruns(), 3u);

  // The reader sees the source's overruns.
  KmsgReader reader(&src);
  EXPECT_EQ(reader.overruns(), 3u);
}

TEST(KmsgSourceImpl, EndlessOverrunGivesUpForNowWithoutFailing) {
  int calls = 0;
  KmsgSourceImpl src(UniqueFd(), [&calls](int, void*, size_t) -> ssize_t {
    ++calls;
    errno = EPIPE;
    return -1;
  });
  auto next = src.Next();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->has_value());
  EXPECT_GT(src.overruns(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(calls), src.overruns()) << "bounded retries";
}

TEST(KmsgSourceImpl, OtherErrorsAreReported) {
  KmsgSourceImpl src(UniqueFd(), [](int, void*, size_t) -> ssize_t {
    errno = EIO;
    return -1;
  });
  auto next = src.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_THAT(std::string(next.status().message()), HasSubstr("Input/output error"));
}

TEST(KmsgSourceImpl, OpenMissingPathIsNotFound) {
  KmsgSourceOptions opt;
  opt.path = "/nonexistent/kmsg";
  auto src = KmsgSourceImpl::Open(opt);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(src.status().message()), HasSubstr("/nonexistent/kmsg"));
}

// What a source may be, from its fstat alone: the kernel log's device or a FIFO; /dev/zero, a
// regular file, a directory are always readable and never records (a poll loop would spin).
TEST(CheckKmsgSourceKind, Table) {
  const struct {
    mode_t mode;
    dev_t rdev;
    std::string want;  // "" accepted, else a part of the error
  } cases[] = {
      {S_IFCHR | 0600, makedev(1, 11), ""},  // /dev/kmsg
      {S_IFIFO | 0600, 0, ""},               // a stand-in
      {S_IFCHR | 0666, makedev(1, 5), "is the character device 1:5, not the kernel log"},
      {S_IFCHR | 0666, makedev(1, 3), "character device 1:3"},  // /dev/null
      {S_IFCHR | 0666, makedev(11, 1), "character device 11:1"},
      {S_IFREG | 0644, 0, "is a regular file"},
      {S_IFDIR | 0755, 0, "is a directory"},
      {S_IFSOCK | 0600, 0, "is a socket"},
      {S_IFBLK | 0600, makedev(1, 11), "is a block device"},
  };
  for (const auto& c : cases) {
    const absl::Status s = CheckKmsgSourceKind("/x/k\x1bmsg", c.mode, c.rdev);
    if (c.want.empty()) {
      EXPECT_TRUE(s.ok()) << c.mode << ": " << s;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.want));
    EXPECT_THAT(std::string(s.message()), HasSubstr(R"("/x/k\x1bmsg")")) << "named, escaped";
  }
}

TEST(KmsgSourceImpl, OpenRefusesWhatIsNotTheKernelLog) {
  const std::string file = ::testing::TempDir() + "/kmsg-regular";
  std::ofstream(file) << "6,1,2,-;not a device\n";
  for (const std::string& path : {std::string("/dev/zero"), file, ::testing::TempDir()}) {
    KmsgSourceOptions opt;
    opt.path = path;
    auto src = KmsgSourceImpl::Open(opt);
    ASSERT_FALSE(src.ok()) << path;
    EXPECT_EQ(src.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(src.status().message()), HasSubstr("not the kernel log")) << path;
  }
  unlink(file.c_str());
}

// A FIFO whose writer left reads 0 and polls readable for ever: the source ends (its descriptor
// closed, counted), reads nothing more, and reopens at its deadline, backing off while it keeps
// ending soon after each open.
TEST(KmsgSourceImpl, EndOfFileEndsTheSourceUntilReopened) {
  const std::string fifo = ::testing::TempDir() + "/kmsg-fifo-" + std::to_string(getpid());
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
  KmsgSourceOptions opt;
  opt.path = fifo;
  auto src = KmsgSourceImpl::Open(opt);
  ASSERT_TRUE(src.ok()) << src.status();
  KmsgSourceImpl& s = **src;
  EXPECT_EQ(s.reopen_at(), absl::InfiniteFuture());
  {
    const int w = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(w, 0) << strerror(errno);
    const std::string line = Line(7);
    ASSERT_EQ(write(w, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    close(w);  // the writer leaves
  }
  auto next = s.Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ(**next, Line(7));
  next = s.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
  EXPECT_TRUE(s.ended());
  EXPECT_EQ(s.ends(), 1u);
  EXPECT_EQ(s.fd(), -1) << "closed: poll skips it";
  const absl::Time first = s.reopen_at();
  EXPECT_LT(first, absl::InfiniteFuture());
  next = s.Next();  // nothing more, no read at all
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
  EXPECT_EQ(s.ends(), 1u);

  ASSERT_TRUE(s.Reopen(first).ok());
  EXPECT_FALSE(s.ended());
  EXPECT_GE(s.fd(), 0);
  EXPECT_EQ(s.reopen_at(), absl::InfiniteFuture());
  // Ends again at once (a writer that comes and goes): the back-off doubles.
  {
    const int w = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(w, 0) << strerror(errno);
    close(w);
  }
  const absl::Time before = absl::Now();
  next = s.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(s.ended());
  EXPECT_EQ(s.ends(), 2u);
  EXPECT_GE(s.reopen_at() - before, absl::Seconds(2) - absl::Milliseconds(100));

  // A path gone: the reopen fails, stays ended, and backs off again (at most a minute).
  unlink(fifo.c_str());
  const absl::Time now = s.reopen_at();
  absl::Status again = s.Reopen(now);
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(s.ended());
  EXPECT_GT(s.reopen_at(), now);
  EXPECT_LE(s.reopen_at() - now, absl::Minutes(1));
}

// Every loss the reader counts is in its counts, with the last parse error.
TEST(KmsgReader, CountsSayEveryLoss) {
  auto script = std::make_shared<ScriptedRead>();
  script->steps = {{EPIPE, ""}, {0, Line(1)}, {0, "garbage"}, {0, Line(2)}};
  KmsgSourceImpl src(UniqueFd(),
                     [script](int fd, void* b, size_t n) { return (*script)(fd, b, n); });
  KmsgReaderOptions o;
  o.burst = 1;
  o.lines_per_second = 0.001;
  KmsgReader reader(&src, o);
  const std::vector<KmsgRecord> got = reader.Drain(absl::UnixEpoch(), 10);
  EXPECT_EQ(got.size(), 1u);
  const KmsgCounts c = reader.counts();
  EXPECT_EQ(c.read, 3u);
  EXPECT_EQ(c.overruns, 1u);
  EXPECT_EQ(c.malformed, 1u);
  EXPECT_EQ(c.rate_dropped, 1u);
  EXPECT_EQ(c.ends, 0u);
  EXPECT_THAT(c.last_malformed, HasSubstr("\"garbage\""));
}

}  // namespace
}  // namespace fabric
