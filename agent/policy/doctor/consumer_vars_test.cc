#include "agent/policy/doctor/consumer_vars.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fabric::doctor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<std::string> kDevices = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10", "mlx5_11"};

// The devices:ports (port 1 of each) a list selects on kDevices.
std::string Chosen(const DeviceList& l) {
  std::vector<std::string> out;
  for (const std::string& d : kDevices) {
    if (Selects(l, d, 1)) out.push_back(d);
  }
  return absl::StrJoin(out, ",");
}

struct NcclCase {
  const char* value;
  const char* chosen;   // On kDevices, port 1.
  const char* problem;  // Substring of the first problem; "" when none.
};

TEST(ConsumerVarsTest, RailsAndPlanesAsNccl2307ReadsThem) {
  DeviceList l = ParseNcclList("=mlx5_0:1:0,mlx5_1:1:1:2,mlx5_2:1,mlx5_3::7");
  ASSERT_EQ(l.entries.size(), 4u);
  EXPECT_EQ(l.entries[0].rail, 0);
  EXPECT_EQ(l.entries[0].plane, -1);
  EXPECT_EQ(l.entries[1].rail, 1);
  EXPECT_EQ(l.entries[1].plane, 2);
  EXPECT_EQ(l.entries[2].rail, -1);
  EXPECT_EQ(l.entries[3].rail, 7);
  // An empty port: "any port" from 2.30, port 0 before; the doctor says what older ones read.
  EXPECT_THAT(absl::StrJoin(l.problems, "\n"), HasSubstr("port \"\" is read as 0"));
  std::vector<std::string> many;
  for (int i = 0; i < 14; ++i) many.push_back(absl::StrCat("mlx5_", i, ":1:0:", i));
  l = ParseNcclList("=" + absl::StrJoin(many, ","));
  EXPECT_THAT(absl::StrJoin(l.problems, "\n"), HasSubstr("14 distinct planes"));
  // UCX takes no rail: "mlx5_0:1:0" is a name no device has.
  l = ParseUcxDevices("mlx5_0:1:0");
  EXPECT_THAT(absl::StrJoin(l.problems, "\n"), HasSubstr("UCX names a port as device:port"));
}

TEST(ConsumerVarsTest, NcclListsAsNcclReadsThem) {
  const NcclCase cases[] = {
      {"mlx5_1", "mlx5_1,mlx5_10,mlx5_11", ""},  // A prefix: the surprise NCCL users meet.
      {"=mlx5_1", "mlx5_1", ""},
      {"=mlx5_1:1,mlx5_2:1", "mlx5_1,mlx5_2", ""},
      {"=mlx5_1:2", "", ""},  // Port 2 only: port 1 is not taken.
      {"^mlx5_1", "mlx5_0,mlx5_2", ""},
      {"^=mlx5_1", "mlx5_0,mlx5_2,mlx5_10,mlx5_11", ""},
      {"=^mlx5_1", "", "characters no device name has"},  // "^" must come first.
      {"mlx5_1:1:0:1", "mlx5_1,mlx5_10,mlx5_11", ""},     // 2.30's rail and plane fields.
      {"=mlx5_1:1:3", "mlx5_1", ""},
      {"=mlx5_1:1:", "mlx5_1", ""},  // An empty rail is no rail.
      {"=mlx5_1:1:r1", "mlx5_1", "rail \"r1\" is read as 0"},
      {"=mlx5_1:1:40000", "mlx5_1", "rail \"40000\" is read as -25536"},
      {"=mlx5_1:1:0:16384", "mlx5_1", "plane 16384 has bit 14 set"},
      {"=mlx5_1:1:0:1:9", "mlx5_1", "what follows the plane is ignored"},
      {"=mlx5_0,,mlx5_2,", "mlx5_0,mlx5_2", ""},
      {"=mlx5_1:x", "", "port \"x\" is read as 0"},
      {"=mlx5_1:", "", "port \"\" is read as 0"},
      {"= mlx5_1", "", "characters no device name has"},
      {"=mlx5_1;reboot", "", "characters no device name has"},
      {"", "", "the value is empty"},
      {",,,", "", "no device name"},
      {"=:1", "", "no device name"},
  };
  for (const NcclCase& c : cases) {
    SCOPED_TRACE(absl::StrCat("NCCL_IB_HCA=", c.value));
    const DeviceList l = ParseNcclList(c.value);
    EXPECT_EQ(Chosen(l), c.chosen);
    if (*c.problem == '\0') {
      EXPECT_THAT(l.problems, IsEmpty());
    } else {
      ASSERT_FALSE(l.problems.empty());
      EXPECT_THAT(l.problems[0], HasSubstr(c.problem));
    }
  }
}

TEST(ConsumerVarsTest, NcclKeepsThirtyTwoEntries) {
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) names.push_back(absl::StrCat("mlx5_", i, ":1"));
  const DeviceList l = ParseNcclList("=" + absl::StrJoin(names, ","));
  EXPECT_EQ(l.entries.size(), kNcclMaxEntries);
  EXPECT_TRUE(Selects(l, "mlx5_31", 1));
  EXPECT_FALSE(Selects(l, "mlx5_32", 1)) << "NCCL never reads the 33rd";
  ASSERT_EQ(l.problems.size(), 1u);
  EXPECT_THAT(l.problems[0], HasSubstr("ignores every entry after entry 32"));
  const DeviceList ifs = ParseNcclList("=" + absl::StrJoin(names, ","), kNcclMaxIfs);
  EXPECT_EQ(ifs.entries.size(), kNcclMaxIfs) << "NCCL_SOCKET_IFNAME keeps 16";
}

TEST(ConsumerVarsTest, ThousandsOfEntriesAndLongNamesStayBounded) {
  const DeviceList l = ParseNcclList(std::string(100000, 'x') + "," + std::string(5000, ','));
  ASSERT_EQ(l.entries.size(), 1u);
  ASSERT_FALSE(l.problems.empty());
  EXPECT_THAT(l.problems[0], HasSubstr("longer than 63 bytes"));
  EXPECT_LT(l.problems[0].size(), 200u) << "the message quotes a bounded part";
}

// UCX reads any number of entries; the doctor judges at most kUcxMaxEntries of UCX_NET_DEVICES
// and UCX_TLS, and refuses more before any work (a 16,000-entry list once kept the agent busy
// for 35 s after its client gave up).
TEST(ConsumerVarsTest, UcxListsAreBoundedAndRefusedPastTheBound) {
  auto list = [](size_t n, const char* entry) {
    std::vector<std::string> e(n, entry);
    return absl::StrJoin(e, ",");
  };
  struct Case {
    const char* what;
    std::map<std::string, std::string> env;
    const char* refusal;  // Empty: accepted.
  };
  const Case cases[] = {
      {"nothing set", {}, ""},
      {"at the bound", {{"UCX_NET_DEVICES", list(kUcxMaxEntries, "mlx5_0:1")}}, ""},
      {"empty entries do not count",
       {{"UCX_NET_DEVICES", list(kUcxMaxEntries, "mlx5_0:1") + std::string(5000, ',')}},
       ""},
      {"one past",
       {{"UCX_NET_DEVICES", list(kUcxMaxEntries + 1, "mlx5_0:1")}},
       "UCX_NET_DEVICES has 257 entries; the doctor judges at most 256"},
      {"the reported case",
       {{"UCX_NET_DEVICES", list(16000, "mlx5_0:1")}},
       "UCX_NET_DEVICES has 16000 entries"},
      {"UCX_TLS too", {{"UCX_TLS", list(kUcxMaxEntries + 1, "rc")}}, "UCX_TLS has 257 entries"},
      {"NCCL's lists are NCCL's to cap (it ignores the rest, a problem says so)",
       {{"NCCL_IB_HCA", list(16000, "mlx5_0")}, {"NCCL_SOCKET_IFNAME", list(16000, "eth")}},
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const absl::Status s = CheckListBounds(c.env);
    if (std::string(c.refusal).empty()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(s.message()), HasSubstr(c.refusal));
    }
  }
  // The parsers stop at the bound themselves, whoever calls them.
  const DeviceList u = ParseUcxDevices(list(16000, "mlx5_0:1"));
  EXPECT_EQ(u.entries.size(), kUcxMaxEntries);
  EXPECT_THAT(u.problems, ElementsAre(HasSubstr("more than 256 entries")));
  const UcxTransports t = ParseUcxTls(list(16000, "rc"));
  EXPECT_TRUE(t.rdma);
  EXPECT_EQ(t.why, "UCX_TLS allows rc") << "a name repeated is named once";
  EXPECT_THAT(t.problems, ElementsAre(HasSubstr("more than 256 entries")));
  EXPECT_THAT(ParseUcxTls(list(16000, "bogus")).problems, ::testing::SizeIs(kUcxMaxEntries + 1));
}

TEST(ConsumerVarsTest, EntryTextEscapesAndCuts) {
  EXPECT_EQ(EntryText({"mlx5_0", 1}), "mlx5_0:1");
  EXPECT_EQ(EntryText({"mlx5_0", -1}), "mlx5_0");
  EXPECT_EQ(EntryText({"\x1b[2Jx", 1}), "\"\\x1b[2Jx\":1");
  EXPECT_LT(EntryText({std::string(100000, 'x'), -1}).size(), 100u);
}

TEST(ConsumerVarsTest, UcxNamesAreExact) {
  EXPECT_EQ(Chosen(ParseUcxDevices("mlx5_1:1")), "mlx5_1");
  EXPECT_EQ(Chosen(ParseUcxDevices("mlx5_1:1,mlx5_11:1")), "mlx5_1,mlx5_11");
  EXPECT_EQ(Chosen(ParseUcxDevices("all")), "mlx5_0,mlx5_1,mlx5_2,mlx5_10,mlx5_11");
  EXPECT_TRUE(ParseUcxDevices("all").all);
  EXPECT_THAT(ParseUcxDevices("").problems, ElementsAre(HasSubstr("empty")));
  EXPECT_THAT(ParseUcxDevices("mlx5_1:one").problems, ElementsAre(HasSubstr("port \"one\"")));
}

TEST(ConsumerVarsTest, PrefixSurprisesNameWhatElseATakes) {
  EXPECT_THAT(PrefixSurprises(ParseNcclList("mlx5_1:1,mlx5_2:1"), kDevices),
              ElementsAre(HasSubstr("mlx5_1 also takes mlx5_10, mlx5_11")));
  EXPECT_THAT(PrefixSurprises(ParseNcclList("^mlx5_1"), kDevices),
              ElementsAre(HasSubstr("mlx5_1 also excludes mlx5_10, mlx5_11")));
  EXPECT_THAT(PrefixSurprises(ParseNcclList("=mlx5_1"), kDevices), IsEmpty());
  EXPECT_THAT(PrefixSurprises(ParseUcxDevices("mlx5_1:1"), kDevices), IsEmpty());
  EXPECT_THAT(PrefixSurprises(ParseNcclList("mlx5_"), kDevices),
              ElementsAre(HasSubstr("mlx5_ also takes mlx5_0, mlx5_1, mlx5_2, mlx5_10, mlx5_11")));
}

TEST(ConsumerVarsTest, UsedOnlyByNamesTheDisagreement) {
  const std::vector<DevicePort> ports = {
      {"mlx5_0", 1}, {"mlx5_1", 1}, {"mlx5_2", 1}, {"mlx5_10", 1}};
  auto names = [](const std::vector<DevicePort>& v) {
    std::vector<std::string> out;
    for (const DevicePort& p : v) out.push_back(absl::StrCat(p.device, ":", p.port));
    return out;
  };
  const DeviceList nccl = ParseNcclList("=mlx5_1:1,mlx5_2:1");
  EXPECT_THAT(names(UsedOnlyBy(ParseUcxDevices("mlx5_0:1"), nccl, ports)), ElementsAre("mlx5_0:1"));
  EXPECT_THAT(names(UsedOnlyBy(ParseUcxDevices("mlx5_2:1"), nccl, ports)), IsEmpty());
  EXPECT_THAT(names(UsedOnlyBy(ParseUcxDevices("all"), nccl, ports)),
              ElementsAre("mlx5_0:1", "mlx5_10:1"));
  // A prefix list takes mlx5_10 too: UCX on it is no disagreement, NCCL's reach is the surprise.
  EXPECT_THAT(names(UsedOnlyBy(ParseUcxDevices("mlx5_10:1"), ParseNcclList("mlx5_1"), ports)),
              IsEmpty());
}

TEST(ConsumerVarsTest, UcxTlsSaysWhetherDataGoesOverRdma) {
  struct Case {
    const char* value;
    bool rdma;
    const char* problem;
  };
  const Case cases[] = {
      {"", true, ""},
      {"rc,sm,self", true, ""},
      {"rc_x,cuda_copy", true, ""},
      {"dc_mlx5", true, ""},
      {"all", true, ""},
      {"tcp,sm,self", false, ""},
      {"tcp,ud:aux", false, ""},  // Wire-up only.
      {"^tcp", true, ""},
      {"^ib", false, ""},
      {"^rc,ud,dc", false, ""},
      {"^rc", true, ""},
      {"tcp,rdma", false, "\"rdma\", a transport UCX does not know"},
      {"rc;echo", false, "does not know"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("UCX_TLS=", c.value));
    const UcxTransports t = ParseUcxTls(c.value);
    EXPECT_EQ(t.rdma, c.rdma) << t.why;
    EXPECT_FALSE(t.why.empty());
    if (*c.problem == '\0') {
      EXPECT_THAT(t.problems, IsEmpty());
    } else {
      ASSERT_FALSE(t.problems.empty());
      EXPECT_THAT(t.problems[0], HasSubstr(c.problem));
    }
  }
}

}  // namespace
}  // namespace fabric::doctor

namespace fabric::doctor {
namespace {

// ncclLoadParam (misc/param.cc) as NCCL writes it, the oracle the reader must agree with.
int64_t NcclLoadParam(const char* str, int64_t dflt) {
  int64_t value = dflt;
  if (str && std::strlen(str) > 0) {
    errno = 0;
    value = std::strtoll(str, nullptr, 0);
    if (errno) value = dflt;
  }
  return value;
}

TEST(NcclIntTest, ReadsTheOddFormsAsNcclDoes) {
  struct Case {
    const char* value;  // nullptr: unset.
    int64_t want;       // What NCCL uses, default 7.
    const char* problem;
  };
  const Case cases[] = {
      {nullptr, 7, ""},
      {"", 7, ""},
      {"3", 3, ""},
      {"0x3", 3, ""},
      {"0X1f", 31, ""},
      {"03", 3, ""},  // Octal, but the same number.
      {"010", 8, "has a leading 0: NCCL reads it as octal, 8"},
      {"022", 18, "octal, 18"},
      {"08", 0, "is not a number: NCCL reads it as 0"},
      {" 3", 3, ""},
      {"3 ", 3, "is not a number: NCCL reads it as 3"},
      {"-1", -1, ""},
      {"+3", 3, ""},
      {"-010", -8, "octal, -8"},
      {"three", 0, "is not a number: NCCL reads it as 0"},
      {"3.5", 3, "is not a number: NCCL reads it as 3"},
      {"99999999999999999999", 7, "is out of range: NCCL uses 7"},
      {"-99999999999999999999", 7, "is out of range: NCCL uses 7"},
      {"9223372036854775807", INT64_MAX, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value ? c.value : "(unset)");
    const NcclInt n =
        ReadNcclInt("NCCL_X", c.value ? std::optional<std::string_view>(c.value) : std::nullopt, 7);
    EXPECT_EQ(n.value, c.want);
    EXPECT_EQ(n.value, NcclLoadParam(c.value, 7));
    EXPECT_EQ(n.set, c.value != nullptr && *c.value != '\0');
    if (*c.problem == '\0') {
      EXPECT_THAT(n.problem, IsEmpty());
    } else {
      EXPECT_THAT(n.problem, HasSubstr(c.problem));
    }
  }
}

TEST(NcclIntTest, AgreesWithNcclOnEveryShortForm) {
  // Every string of up to three characters from the ones that matter to strtoll.
  const std::string alphabet = "0178x+- a";
  std::vector<std::string> values = {""};
  for (int len = 1; len <= 3; ++len) {
    const size_t before = values.size();
    for (size_t i = 0; i < before; ++i) {
      if (values[i].size() != static_cast<size_t>(len - 1)) continue;
      for (char ch : alphabet) values.push_back(values[i] + ch);
    }
  }
  for (const std::string& v : values) {
    SCOPED_TRACE(absl::StrCat("\"", v, "\""));
    const NcclInt n = ReadNcclInt("NCCL_X", v, 5);
    EXPECT_EQ(n.value, NcclLoadParam(v.c_str(), 5));
    // Silent only where the text reads, whole, as the number NCCL uses (decimal, or hex).
    if (n.problem.empty() && !v.empty()) {
      char* end = nullptr;
      const long long decimal = std::strtoll(v.c_str(), &end, 10);
      const bool hex = absl::StrContains(v, "0x");
      EXPECT_TRUE(hex || (*end == '\0' && decimal == n.value)) << n.value;
    }
  }
}

TEST(NcclIntTest, EscapesTheValueInItsProblem) {
  const NcclInt n = ReadNcclInt("NCCL_IB_TIMEOUT", std::string_view("1\x1b[2J", 5), 20);
  EXPECT_EQ(n.value, 1);
  EXPECT_THAT(n.problem, HasSubstr("\\x1b"));
  EXPECT_EQ(n.problem.find('\x1b'), std::string::npos);
}

TEST(NcclLevelTest, ReadsLevelsAsNcclDoes) {
  struct Case {
    const char* value;
    const char* name;  // "": NCCL keeps its default.
    const char* problem;
  };
  const Case cases[] = {
      {"", "", ""},
      {"PXB", "PXB", ""},
      {"PHB", "PHB", ""},
      {"PXN", "PXN", ""},
      {"NVL", "NVL", ""},
      {"pxb", "", "capitals only (PXB)"},
      {"Sys", "", "capitals only (SYS)"},
      {"0", "LOC", ""},
      {"1", "PIX", ""},
      {"2", "PXB", ""},
      {"3", "PHB", ""},
      {"4", "SYS", ""},
      {"5", "SYS", ""},
      {"42", "SYS", ""},
      {"0x3", "PHB", ""},
      {"010", "SYS", ""},  // Octal 8, past the old numbers.
      {"2x", "PXB", "is not a number: NCCL reads it as 2 (PXB)"},
      {"-1", "", "is not a level NCCL knows"},
      {" 2", "", "is not a level NCCL knows"},
      {"99999999999", "", "out of range"},
      {"NET", "", "is not a level NCCL knows"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    const NcclLevel l = ReadNcclLevel("NCCL_NET_GDR_LEVEL", c.value);
    EXPECT_EQ(l.name, c.name);
    if (*c.problem == '\0') {
      EXPECT_THAT(l.problem, IsEmpty());
    } else {
      EXPECT_THAT(l.problem, HasSubstr(c.problem));
    }
  }
}

}  // namespace
}  // namespace fabric::doctor
