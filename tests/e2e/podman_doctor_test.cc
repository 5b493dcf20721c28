// `fabric-env doctor` inside a real container: podman makes each mistake for real (no device
// nodes, a low memlock limit, a small /dev/shm, the wrong interface, NCCL_IB_DISABLE, a prefix
// NCCL_IB_HCA, a GID index of someone else's slot) and the doctor, run there as a job would run
// it, must name it: the check and its severity, the transport NCCL will use, and the exit code.
// Every case is the correct setup but for its one mistake, and the correct setup has no finding
// at all, so that each finding is caused by its mistake.
//
// The container: the rig's busybox image with the static fabric-env bind-mounted read-only, on a
// bridge network with a static address (the rig's CNI directory), the example host's sys and
// proc trees at /host/sys and /host/proc. What stands in for what this machine lacks:
//   - the NIC is roce-9port's mlx5_1 (uverbs1); its port 1 GID table gets the container's own
//     address at 4 (RoCE v1) and 5 (RoCE v2), as the kernel lists the address of a pod's
//     interface on the NIC (a macvlan in production, podman_device_plugin_test);
//   - the device nodes are /dev/null's numbers (c 1 3) named uverbs1 and rdma_cm: this machine's
//     kernel has no RDMA driver, so a node with the real uverbs numbers (231:193) opens with
//     ENXIO. A node that opens stands in for one with a driver behind it; the VM rig (tests/vm)
//     opens the real rxe nodes. They are given with --device (which puts them in the container's
//     cgroup allow-list) at /rdma/infiniband (--dev-dir);
//   - rdma-core in the image: libibverbs.so.1 and a provider in /usr/lib64 (the doctor looks
//     for them, as the static fabric-env cannot load them).
// No published host file is mounted: the doctor says it did not compare with the agent's answer.
//
// Needs root, podman, runc and containernetworking-plugins; skips with the reason otherwise.
// Registered only where fabric-env is static (not the ASan build): the container has no libc.
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fabric/v1/doctor.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/podman_rig.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kPodIp[] = "10.79.3.5";
// kPodIp as the kernel writes an IPv4 address's GID (::ffff:10.79.3.5).
constexpr char kPodGid[] = "0000:0000:0000:0000:0000:ffff:0a4f:0305";
constexpr char kPodGidIndex[] = "5";  // RoCE v2; 4 is its RoCE v1 twin.
constexpr char kDevDir[] = "/rdma/infiniband";

// What podman is told; Correct() is the correct setup, which each case changes in one place.
struct Config {
  std::string host = "roce-9port";
  std::map<std::string, std::string> env = {{"NCCL_IB_HCA", "=mlx5_1:1"},
                                            {"NCCL_IB_GID_INDEX", kPodGidIndex},
                                            {"NCCL_SOCKET_IFNAME", "=eth0"}};
  std::string memlock;    // --ulimit memlock=...; empty: none given (a container's default).
  bool ipc_lock = false;  // --cap-add=IPC_LOCK.
  std::string shm_size = "2g";
  bool devices = true;
  std::vector<std::string> more;  // Further podman run flags.
};

// The correct setup. Memory registration unlimited: --ulimit memlock=-1:-1 where runc may
// raise the limit (see PodmanDoctorTest::unlimit_memlock_), else CAP_IPC_LOCK (the doctor's other
// fix, Kubernetes' securityContext.capabilities), under which the kernel does not enforce
// RLIMIT_MEMLOCK.
Config Correct(bool unlimit_memlock) {
  Config c;
  if (unlimit_memlock) {
    c.memlock = "-1:-1";
  } else {
    c.ipc_lock = true;
  }
  return c;
}

// Whether this process holds CAP_SYS_RESOURCE (runc, started by it, may raise hard limits).
bool HoldsSysResource() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("CapEff:", 0) == 0) {
      return (std::stoull(line.substr(strlen("CapEff:")), nullptr, 16) >> 24) & 1;
    }
  }
  return false;
}

struct Outcome {
  int exit = -1;
  v1::DoctorReport report;
  std::string out, err;
};

std::string Sev(v1::Severity s) { return v1::Severity_Name(s); }

// Every check that is not OK, as "check SEVERITY".
std::vector<std::string> Problems(const v1::DoctorReport& r) {
  std::vector<std::string> out;
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.severity() != v1::SEVERITY_OK)
      out.push_back(absl::StrCat(k.check(), " ", Sev(k.severity())));
  }
  return out;
}

// The first check named `check` that is not OK; null when there is none.
const v1::DoctorCheck* Finding(const v1::DoctorReport& r, const std::string& check) {
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.check() == check && k.severity() != v1::SEVERITY_OK) return &k;
  }
  return nullptr;
}

int ExitOf(v1::Severity s) {
  switch (s) {
    case v1::SEVERITY_OK:
      return 0;
    case v1::SEVERITY_WARNING:
      return 1;
    case v1::SEVERITY_CRITICAL:
      return 2;
    default:
      return 3;
  }
}

class PodmanDoctorTest : public ::testing::Test {
 protected:
  // One rig, network and pair of example hosts for all cases: each case is one container.
  static void SetUpTestSuite() {
    if (!testing::PodmanRig::Missing().empty()) return;
    const std::string tag = absl::StrCat(getpid() % 100000);
    rig_ = new testing::PodmanRig(absl::StrCat("/var/tmp/fabric-doctor-", tag), {"sh"});
    if (!rig_->imported()) {
      setup_error_ = "the busybox image was not imported";
      return;
    }
    // The hard limits a container gets here without --ulimit (they may be lower than this
    // process's: podman's own, conmon's).
    auto probe = rig_->Podman({"run", "--rm", "--network", "none", testing::PodmanRig::kImage, "sh",
                               "-c", "ulimit -Hn; ulimit -Hu; ulimit -Hl"});
    std::vector<std::string> hard;
    if (probe.ok() && probe->status == 0) {
      for (absl::string_view l : absl::StrSplit(probe->out, '\n', absl::SkipEmpty())) {
        hard.push_back(l == "unlimited" ? "-1" : std::string(l));
      }
    }
    if (hard.size() != 3) {
      setup_error_ = absl::StrCat("ulimit in a container: ",
                                  probe.ok() ? probe->out + probe->err : probe.status().ToString());
      return;
    }
    nofile_ = absl::StrCat(hard[0], ":", hard[0]);
    nproc_ = absl::StrCat(hard[1], ":", hard[1]);
    unlimit_memlock_ = hard[2] == "-1" || HoldsSysResource();
    // What the containers mount: off podman's directory, which need not be fast.
    files_ = testing::MakeTempDir("fabric-doctor");
    const std::string& dir = files_;
    for (const char* host : {"roce-9port", "many-hcas"}) {
      if (absl::Status s = testing::WriteExampleHost(host, absl::StrCat(dir, "/", host)); !s.ok()) {
        setup_error_ = absl::StrCat(host, ": ", s.message());
        return;
      }
      AddPodGid(absl::StrCat(dir, "/", host, "/sys/class/infiniband/mlx5_1/ports/1"));
    }
    // Device nodes that open (see the top): /dev/null's numbers.
    fs::create_directories(dir + "/dev");
    for (const char* name : {"uverbs1", "rdma_cm"}) {
      const std::string path = absl::StrCat(dir, "/dev/", name);
      if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        setup_error_ = absl::StrCat("mknod ", path, ": ", strerror(errno));
        return;
      }
    }
    // rdma-core of the image: the library and a provider (looked for, not loaded).
    fs::create_directories(dir + "/lib64/libibverbs");
    std::ofstream(dir + "/lib64/libibverbs.so.1") << "stands in for rdma-core's libibverbs\n";
    std::ofstream(dir + "/lib64/libibverbs/libmlx5-rdmav34.so") << "stands in for a provider\n";
    // The container's network: a bridge, and the container's static address on it.
    bridge_ = "fdoc" + tag;
    network_ = "fabdoc" + tag;
    std::ofstream(rig_->NetDir() + "/" + network_ + ".conflist") << absl::StrCat(
        R"({"cniVersion":"1.0.0","name":")", network_, R"(","plugins":[)",
        R"({"type":"bridge","bridge":")", bridge_, R"(",)",
        R"("ipam":{"type":"static","addresses":[{"address":")", kPodIp, R"(/24"}]}}]})");
  }

  static void TearDownTestSuite() {
    if (rig_ == nullptr) return;
    (void)rig_->Podman({"rm", "-a", "-f", "-t", "0"});
    if (!bridge_.empty()) (void)testing::Run({kIp, "link", "del", bridge_});
    delete rig_;
    rig_ = nullptr;
    std::error_code ec;
    if (!files_.empty()) fs::remove_all(files_, ec);
  }

  void SetUp() override {
    if (std::string why = testing::PodmanRig::Missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(access(testing::kFabricEnvBinary, X_OK), 0) << "fabric-env not built";
    ASSERT_NE(rig_, nullptr);
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  // kPodIp's GIDs in a port's table, as the kernel adds an interface's address: RoCE v1 at 4,
  // RoCE v2 at 5 (both slots are empty on the example hosts).
  static void AddPodGid(const std::string& port) {
    for (const auto& [index, type] : {std::pair{"4", "IB/RoCE v1"}, std::pair{"5", "RoCE v2"}}) {
      std::ofstream(absl::StrCat(port, "/gids/", index)) << kPodGid << "\n";
      std::ofstream(absl::StrCat(port, "/gid_attrs/types/", index)) << type << "\n";
      std::ofstream(absl::StrCat(port, "/gid_attrs/ndevs/", index)) << "eth0\n";
    }
  }

  // Runs `fabric-env doctor --json` in one container set up as `s` says.
  static Outcome Doctor(const Config& s) {
    const std::string& dir = files_;
    std::vector<std::string> args = {
        "run",
        "--rm",
        "--network",
        network_,
        "--shm-size=" + s.shm_size,
        "-v",
        absl::StrCat(testing::kFabricEnvBinary, ":/usr/local/bin/fabric-env:ro"),
        "-v",
        absl::StrCat(dir, "/", s.host, "/sys:/host/sys:ro"),
        "-v",
        absl::StrCat(dir, "/", s.host, "/proc:/host/proc:ro"),
        "-v",
        dir + "/lib64:/usr/lib64:ro"};
    // Once one --ulimit is given, podman sets RLIMIT_NOFILE and RLIMIT_NPROC to 1048576 unless
    // told otherwise, which runc cannot do where the hard limits are lower: what a container
    // gets without --ulimit.
    args.insert(args.end(), {"--ulimit", "nofile=" + nofile_, "--ulimit", "nproc=" + nproc_});
    if (!s.memlock.empty()) args.insert(args.end(), {"--ulimit", "memlock=" + s.memlock});
    if (s.ipc_lock) args.push_back("--cap-add=IPC_LOCK");
    if (s.devices) {
      for (const char* name : {"uverbs1", "rdma_cm"}) {
        args.insert(args.end(),
                    {"--device", absl::StrCat(dir, "/dev/", name, ":", kDevDir, "/", name, ":rw")});
      }
    }
    for (const auto& [k, v] : s.env) args.insert(args.end(), {"--env", k + "=" + v});
    args.insert(args.end(), s.more.begin(), s.more.end());
    args.insert(args.end(),
                {testing::PodmanRig::kImage, "/usr/local/bin/fabric-env", "doctor", "--json",
                 "--sysfs", "/host/sys", "--procfs", "/host/proc", "--dev-dir", kDevDir});
    Outcome o;
    auto r = rig_->Podman(args);
    if (!r.ok()) {
      ADD_FAILURE() << "podman run: " << r.status();
      return o;
    }
    o.exit = r->status;
    o.out = r->out;
    o.err = r->err;
    google::protobuf::util::JsonParseOptions opt;
    const auto parsed = google::protobuf::util::JsonStringToMessage(r->out, &o.report, opt);
    EXPECT_TRUE(parsed.ok()) << parsed << "\nstdout:\n" << r->out << "\nstderr:\n" << r->err;
    return o;
  }

  static testing::PodmanRig* rig_;
  static std::string setup_error_, bridge_, network_;
  static std::string files_;           // The example hosts, device nodes and libraries.
  static std::string nofile_, nproc_;  // --ulimit values: a container's own hard limits.
  static bool unlimit_memlock_;        // Whether --ulimit memlock=-1:-1 can be given.
};

testing::PodmanRig* PodmanDoctorTest::rig_ = nullptr;
std::string PodmanDoctorTest::setup_error_, PodmanDoctorTest::bridge_, PodmanDoctorTest::network_,
    PodmanDoctorTest::files_, PodmanDoctorTest::nofile_, PodmanDoctorTest::nproc_;
bool PodmanDoctorTest::unlimit_memlock_ = false;

// The finding `check` of `o` with `severity` and a fix, and an exit code that is the verdict's (a
// CRITICAL finding makes it 2 whatever else there is); null (a failure) when there is none.
const v1::DoctorCheck* ExpectFinding(const Outcome& o, const std::string& check,
                                     v1::Severity severity) {
  const v1::DoctorCheck* k = Finding(o.report, check);
  if (k == nullptr) {
    ADD_FAILURE() << "no " << check
                  << " finding; problems: " << ::testing::PrintToString(Problems(o.report)) << "\n"
                  << o.out << o.err;
    return nullptr;
  }
  EXPECT_EQ(Sev(k->severity()), Sev(severity)) << k->DebugString();
  EXPECT_FALSE(k->fix().empty()) << k->DebugString();
  EXPECT_EQ(o.exit, ExitOf(o.report.verdict())) << o.report.summary() << o.err;
  return k;
}

// The doctor knows the job's GPUs only from the agent's answer; without one it must not judge the
// GPUDirect distance of every GPU of the host (sysfs shows them all) as the job's.
TEST_F(PodmanDoctorTest, CorrectSetupIsOkWithGpuDirect) {
  const Outcome o = Doctor(Correct(unlimit_memlock_));
  EXPECT_THAT(Problems(o.report), IsEmpty()) << o.out << o.err;
  EXPECT_EQ(Sev(o.report.verdict()), "SEVERITY_OK");
  EXPECT_EQ(o.exit, 0) << o.err;
  EXPECT_EQ(v1::NcclTransport_Name(o.report.transport()), "NCCL_TRANSPORT_NET_IB_GDRDMA");
  EXPECT_THAT(o.report.devices(), ElementsAre("mlx5_1:1"));
  EXPECT_EQ(o.report.summary(), "NCCL will use NET/IB with GPUDirect over mlx5_1:1");
  EXPECT_EQ(o.report.context(), "container");
  EXPECT_EQ(o.report.env_source(), "this process");
  // What made it OK, each from the container itself.
  std::map<std::string, std::string> verdicts;
  for (const v1::DoctorCheck& k : o.report.checks()) verdicts[k.check()] = k.verdict();
  EXPECT_THAT(verdicts["gid"],
              HasSubstr(absl::StrCat("GID index 5 (RoCE v2, ", kPodIp, ", this namespace's own)")));
  EXPECT_THAT(verdicts["socket_ifname"], HasSubstr("selects eth0"));
  EXPECT_THAT(verdicts["dev_infiniband"], HasSubstr("1 uverbs node open here"));
  EXPECT_EQ(verdicts["memlock"],
            unlimit_memlock_ ? "unlimited" : "CAP_IPC_LOCK: memory registration is not limited");
  EXPECT_THAT(verdicts["shm"], HasSubstr("2 GiB"));
  EXPECT_THAT(verdicts["agent_answer"], HasSubstr("not compared"));
}

TEST_F(PodmanDoctorTest, NoDeviceNodesFallsBackToSockets) {
  Config s = Correct(unlimit_memlock_);
  s.devices = false;
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "dev_infiniband", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(v1::NcclTransport_Name(o.report.transport()), "NCCL_TRANSPORT_NET_SOCKET");
  EXPECT_THAT(o.report.summary(), HasSubstr("no /dev/infiniband in this container"));
  EXPECT_EQ(o.exit, 2);
}

TEST_F(PodmanDoctorTest, LowMemlockWithoutIpcLock) {
  Config s = Correct(unlimit_memlock_);
  s.memlock = "65536:65536";
  s.ipc_lock = false;
  s.more = {"--cap-drop=IPC_LOCK"};  // Under CAP_IPC_LOCK the kernel does not enforce it.
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "memlock", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->verdict(), HasSubstr("limited to 64 KiB"));
  EXPECT_THAT(k->evidence(), ElementsAre("RLIMIT_MEMLOCK soft 65536 bytes; CAP_IPC_LOCK not held"));
  EXPECT_EQ(o.exit, 2);
}

TEST_F(PodmanDoctorTest, SmallShm) {
  Config s = Correct(unlimit_memlock_);
  s.shm_size = "64m";
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "shm", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->verdict(), HasSubstr("/dev/shm holds 64 MiB"));
  EXPECT_EQ(o.exit, 2);
}

TEST_F(PodmanDoctorTest, HcaPrefixTakesMlx5_10) {
  Config s = Correct(unlimit_memlock_);
  s.host = "many-hcas";
  s.env["NCCL_IB_HCA"] = "mlx5_1";
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "hca_prefix", v1::SEVERITY_WARNING);
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(absl::StrJoin(k->evidence(), "\n"), HasSubstr("mlx5_10"));
  EXPECT_GE(o.exit, 1);
}

TEST_F(PodmanDoctorTest, SocketIfnameOfAnAbsentInterface) {
  Config s = Correct(unlimit_memlock_);
  s.env["NCCL_SOCKET_IFNAME"] = "=ib0";
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "socket_ifname", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->verdict(), HasSubstr("matches no interface"));
  EXPECT_EQ(v1::NcclTransport_Name(o.report.transport()), "NCCL_TRANSPORT_NONE");
  EXPECT_THAT(o.report.summary(), HasSubstr("NCCL will fail to initialize"));
  EXPECT_EQ(o.exit, 2);
}

TEST_F(PodmanDoctorTest, NcclIbDisable) {
  Config s = Correct(unlimit_memlock_);
  s.env["NCCL_IB_DISABLE"] = "1";
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "nccl_ib_disable", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(v1::NcclTransport_Name(o.report.transport()), "NCCL_TRANSPORT_NET_SOCKET");
  EXPECT_THAT(o.report.summary(), HasSubstr("fall back to sockets: NCCL_IB_DISABLE=1"));
  EXPECT_EQ(o.exit, 2);
}

TEST_F(PodmanDoctorTest, GidIndexOfALinkLocalSlot) {
  Config s = Correct(unlimit_memlock_);
  s.env["NCCL_IB_GID_INDEX"] = "1";  // fe80:: as RoCE v2 on roce-9port's mlx5_1.
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "gid_link_local", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->subject(), "mlx5_1:1");
  EXPECT_THAT(k->fix(), HasSubstr("set NCCL_IB_GID_INDEX=5:"));  // The container's own.
  EXPECT_EQ(o.exit, 2);
}

TEST_F(PodmanDoctorTest, GidIndexOfAnEmptySlot) {
  Config s = Correct(unlimit_memlock_);
  s.env["NCCL_IB_GID_INDEX"] = "9";
  const Outcome o = Doctor(s);
  const v1::DoctorCheck* k = ExpectFinding(o, "gid_empty", v1::SEVERITY_CRITICAL);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->subject(), "mlx5_1:1");
  EXPECT_EQ(o.exit, 2);
}

}  // namespace
}  // namespace fabric
