#include "agent/policy/doctor/judge.h"

#include <errno.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "agent/policy/jobenv/profiles.h"
#include "tests/hosts/discovered.h"

namespace fabric::doctor {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = 1 << 20;

// A job on roce-9port's GPU 0 (0000:1a:00.0, PIX to mlx5_1) in a container that owns eth1's
// address, set up the way the agent renders it: everything OK, NET/IB with GPUDirect.
DoctorFacts Good() {
  DoctorFacts f;
  f.context = "container";
  f.env_source = "test";
  f.env = {{"NCCL_IB_HCA", "=mlx5_1:1"},
           {"NCCL_IB_GID_INDEX", "3"},
           {"NCCL_SOCKET_IFNAME", "=eth1"},
           {"UCX_NET_DEVICES", "mlx5_1:1"},
           {"UCX_IB_GID_INDEX", "3"}};
  f.host = testing::DiscoveredExampleHost("roce-9port");
  f.dev_nodes = std::vector<NodeOpen>{{"rdma_cm"}, {"uverbs1"}};
  ProcessLimits l;
  l.cap_ipc_lock = false;
  l.nofile_soft = 1 << 20;
  l.shm = MountEntry{"/dev/shm", "tmpfs", false};
  l.shm_size = 1024 * kMiB;
  l.shm_free = 1000 * kMiB;
  f.limits = l;
  f.interfaces =
      std::vector<Interface>{{"lo", true, {"127.0.0.1"}, {}}, {"eth1", true, {"25.11.128.11"}, {}}};
  f.gpus = {"0000:1a:00.0"};
  f.iommu = "identity";
  return f;
}

const v1::DoctorCheck* Find(const v1::DoctorReport& r, const std::string& check) {
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.check() == check && k.severity() != v1::SEVERITY_OK) return &k;
  }
  return nullptr;
}

std::vector<std::string> Problems(const v1::DoctorReport& r) {
  std::vector<std::string> out;
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.severity() != v1::SEVERITY_OK) out.push_back(k.check());
  }
  return out;
}

TEST(JudgeTest, CorrectSetupIsOkWithGpuDirect) {
  const v1::DoctorReport r = Judge(Good());
  EXPECT_THAT(Problems(r), ::testing::IsEmpty());
  EXPECT_EQ(r.verdict(), v1::SEVERITY_OK);
  EXPECT_EQ(ExitCodeOf(r), 0);
  EXPECT_EQ(r.transport(), v1::NCCL_TRANSPORT_NET_IB_GDRDMA);
  EXPECT_THAT(r.devices(), ElementsAre("mlx5_1:1"));
  EXPECT_EQ(r.summary(), "NCCL will use NET/IB with GPUDirect over mlx5_1:1");
}

struct Mistake {
  std::string name;
  std::function<void(DoctorFacts&)> make;
  std::string check;
  v1::Severity severity;
  v1::NcclTransport transport;
  std::string summary;  // A part of the verdict line.
};

class MistakeTest : public ::testing::TestWithParam<Mistake> {};

TEST_P(MistakeTest, GivesItsFindingAndExitCode) {
  const Mistake& m = GetParam();
  DoctorFacts f = Good();
  m.make(f);
  const v1::DoctorReport r = Judge(f);
  const v1::DoctorCheck* k = Find(r, m.check);
  ASSERT_NE(k, nullptr) << r.DebugString();
  EXPECT_EQ(k->severity(), m.severity) << k->DebugString();
  EXPECT_FALSE(k->verdict().empty());
  if (m.severity != v1::SEVERITY_UNKNOWN) {
    EXPECT_FALSE(k->fix().empty()) << k->DebugString();
  }
  EXPECT_EQ(r.transport(), m.transport) << r.summary();
  EXPECT_THAT(r.summary(), HasSubstr(m.summary));
  EXPECT_EQ(ExitCodeOf(r), m.severity == v1::SEVERITY_CRITICAL  ? 2
                           : m.severity == v1::SEVERITY_WARNING ? 1
                                                                : 3)
      << r.DebugString();
}

INSTANTIATE_TEST_SUITE_P(
    Table, MistakeTest,
    ::testing::Values(
        Mistake{"NoDevInfiniband",
                [](DoctorFacts& f) {
                  f.dev_nodes.reset();
                  f.dev_missing = true;
                },
                "dev_infiniband", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "fall back to sockets: no /dev/infiniband in this container"},
        Mistake{"NodeRefusedByCgroup",
                [](DoctorFacts& f) { f.dev_nodes = std::vector<NodeOpen>{{"uverbs1", true, EPERM}}; },
                "dev_node", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "no selected RDMA device can be opened"},
        Mistake{"OtherDevicesNode",
                [](DoctorFacts& f) {
                  f.dev_nodes = std::vector<NodeOpen>{{"rdma_cm"}, {"uverbs2"}};
                },
                "device_open", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "fall back to sockets"},
        Mistake{"VerbsOpenFails",
                [](DoctorFacts& f) {
                  f.verbs = std::vector<VerbsOpen>{{"mlx5_1", "ibv_open_device: Permission denied", {}}};
                },
                "device_open", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET, "sockets"},
        Mistake{"PortDownByVerbs",
                [](DoctorFacts& f) {
                  f.verbs = std::vector<VerbsOpen>{
                      {"mlx5_1", "", {{1, v1::PORT_STATE_DOWN, v1::LINK_LAYER_ETHERNET, 256}}}};
                },
                "port_state", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "no selected RDMA port is ACTIVE"},
        Mistake{"NoLibibverbs",
                [](DoctorFacts& f) {
                  f.libibverbs = false;
                  f.libibverbs_detail = "not in /usr/lib";
                },
                "libibverbs", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "libibverbs"},
        Mistake{"UnknownHca",
                [](DoctorFacts& f) { f.env["NCCL_IB_HCA"] = "=mlx5_bond_0"; },
                "hca_unknown", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "NCCL_IB_HCA matches no RDMA port"},
        Mistake{"HcaWithShellMetacharacters",
                [](DoctorFacts& f) { f.env["NCCL_IB_HCA"] = "=mlx5_1:1;rm"; },
                "hca_syntax", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"MemlockOf64KiB",
                [](DoctorFacts& f) { f.limits->memlock_soft = 64 * 1024; },
                "memlock", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"MemlockOf1GiB",
                [](DoctorFacts& f) { f.limits->memlock_soft = 1024 * kMiB; },
                "memlock", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"ShmOf64MiB",
                [](DoctorFacts& f) {
                  f.limits->shm_size = 64 * kMiB;
                  f.limits->shm_free = 64 * kMiB;
                },
                "shm", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"ShmReadOnly", [](DoctorFacts& f) { f.limits->shm->read_only = true; }, "shm",
                v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"ShmUnreadable",
                [](DoctorFacts& f) {
                  f.limits->shm.reset();
                  f.limits->shm_size.reset();
                },
                "shm", v1::SEVERITY_UNKNOWN, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"FewOpenFiles", [](DoctorFacts& f) { f.limits->nofile_soft = 1024; }, "nofile",
                v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"IbDisabled", [](DoctorFacts& f) { f.env["NCCL_IB_DISABLE"] = "1"; },
                "nccl_ib_disable", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "fall back to sockets: NCCL_IB_DISABLE=1"},
        Mistake{"IbDisableGarbage", [](DoctorFacts& f) { f.env["NCCL_IB_DISABLE"] = "yes"; },
                "nccl_ib_disable", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "NET/IB"},
        // NCCL's integers are strtoll's base 0 (consumer_vars.h): 0x1 disables NET/IB too.
        Mistake{"IbDisableHex", [](DoctorFacts& f) { f.env["NCCL_IB_DISABLE"] = "0x1"; },
                "nccl_ib_disable", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET,
                "fall back to sockets: NCCL_IB_DISABLE=0x1"},
        // Level names in capitals only: "sys" is ignored, NCCL keeps PXB (the GPU is within it).
        Mistake{"GdrLevelLowercase", [](DoctorFacts& f) { f.env["NCCL_NET_GDR_LEVEL"] = "sys"; },
                "gdr_distance", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        // The old numbering: 0 is LOC, no PCIe path at all.
        Mistake{"GdrLevelOldZero", [](DoctorFacts& f) { f.env["NCCL_NET_GDR_LEVEL"] = "0"; },
                "gdr_distance", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB, "NET/IB over"},
        Mistake{"NetSocket", [](DoctorFacts& f) { f.env["NCCL_NET"] = "socket"; }, "nccl_net",
                v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_SOCKET, "NCCL_NET=socket"},
        Mistake{"NetPlugin", [](DoctorFacts& f) { f.env["NCCL_NET"] = "AWS Libfabric"; },
                "nccl_net", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_UNSPECIFIED, "plugin"},
        Mistake{"UcxTcpOnly", [](DoctorFacts& f) { f.env["UCX_TLS"] = "tcp,sm"; }, "ucx_tls",
                v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"SocketIfnameAbsent", [](DoctorFacts& f) { f.env["NCCL_SOCKET_IFNAME"] = "=ib0"; },
                "socket_ifname", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NONE,
                "fail to initialize: NCCL_SOCKET_IFNAME=\"=ib0\""},
        Mistake{"SocketIfnameDown",
                [](DoctorFacts& f) { (*f.interfaces)[1].up = false; }, "socket_ifname",
                v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NONE, "fail to initialize"},
        Mistake{"UcxOnOtherNic", [](DoctorFacts& f) { f.env["UCX_NET_DEVICES"] = "mlx5_2:1"; },
                "consumers_disagree", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "NET/IB"},
        Mistake{"GidIndexLinkLocal", [](DoctorFacts& f) { f.env["NCCL_IB_GID_INDEX"] = "1"; },
                "gid_link_local", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "NET/IB"},
        Mistake{"GidIndexEmpty", [](DoctorFacts& f) { f.env["NCCL_IB_GID_INDEX"] = "7"; },
                "gid_empty", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"GidIndexRoceV1", [](DoctorFacts& f) { f.env["NCCL_IB_GID_INDEX"] = "2"; },
                "gid_roce_v1", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "NET/IB"},
        Mistake{"UcxOnAnotherGid", [](DoctorFacts& f) { f.env["UCX_IB_GID_INDEX"] = "1"; },
                "gid_consumers_differ", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "GPUDirect"},
        Mistake{"GidOfAnotherNamespace",
                [](DoctorFacts& f) { (*f.interfaces)[1].ipv4 = {"25.11.128.99"}; },
                "gid_not_ours", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "NET/IB"},
        Mistake{"NoGpuDirectPath",
                [](DoctorFacts& f) {
                  f.host->mutable_gpudirect()->set_available(false);
                  f.host->mutable_gpudirect()->clear_paths();
                },
                "gpudirect_path", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB,
                "NCCL will use NET/IB over mlx5_1:1"},
        Mistake{"NicTooFar",
                [](DoctorFacts& f) {
                  f.env["NCCL_IB_HCA"] = "=mlx5_5:1";
                  f.env["UCX_NET_DEVICES"] = "mlx5_5:1";
                  f.env["NCCL_IB_GID_INDEX"] = "3";
                  f.dev_nodes = std::vector<NodeOpen>{{"rdma_cm"}, {"uverbs5"}};
                  (*f.interfaces)[1].ipv4 = {"25.11.128.15"};
                },
                "gdr_distance", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB, "NET/IB over"},
        Mistake{"IommuTranslates", [](DoctorFacts& f) { f.iommu = "DMA-FQ"; }, "iommu",
                v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "GPUDirect"},
        Mistake{"AcsRedirect",
                [](DoctorFacts& f) {
                  f.acs = {{"0000:18:00.0", kAcsP2pRequestRedirect | kAcsP2pCompletionRedirect, ""}};
                },
                "acs", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA, "GPUDirect"},
        Mistake{"NoSysfs",
                [](DoctorFacts& f) {
                  f.host.reset();
                  f.host_error = "/sys/class/infiniband: No such file or directory";
                },
                "sysfs", v1::SEVERITY_UNKNOWN, v1::NCCL_TRANSPORT_UNSPECIFIED, "not judged"},
        Mistake{"AgentAnswerDiffers",
                [](DoctorFacts& f) {
                  f.agent_env = std::map<std::string, std::string>{{"NCCL_IB_HCA", "=mlx5_2:1"},
                                                                   {"NCCL_IB_GID_INDEX", "3"}};
                },
                "agent_answer", v1::SEVERITY_WARNING, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "GPUDirect"},
        Mistake{"RanksDiffer",
                [](DoctorFacts& f) {
                  f.rank_envs["0000:1a:00.0"] = {{"NCCL_IB_HCA", "=mlx5_1:1"}};
                  f.rank_envs["0000:1e:00.0"] = {{"NCCL_IB_HCA", "=mlx5_2:1"}};
                },
                "ranks_agree", v1::SEVERITY_CRITICAL, v1::NCCL_TRANSPORT_NET_IB_GDRDMA,
                "GPUDirect"}),
    [](const ::testing::TestParamInfo<Mistake>& i) { return i.param.name; });

// The vendors' part: the NIC vendor's recipe when the agent's answer is not at hand, GPUs of two
// vendors, GPUDirect per GPU with its reason, and 2.30.7's rails in NCCL_IB_HCA.
v1::RdmaDevice* Device(DoctorFacts& f, const std::string& name) {
  for (v1::RdmaDevice& d : *f.host->mutable_rdma_devices()) {
    if (d.name() == name) return &d;
  }
  return nullptr;
}

v1::Accelerator* Gpu(DoctorFacts& f, const std::string& pci) {
  for (v1::Accelerator& a : *f.host->mutable_accelerators()) {
    if (a.pci_address() == pci) return &a;
  }
  return nullptr;
}

TEST(JudgeVendorsTest, TheNicVendorsRecipeIsComparedWithoutTheAgentsAnswer) {
  DoctorFacts f = Good();
  EXPECT_EQ(Find(Judge(f), "nic_profile"), nullptr);  // mlx5: NCCL's defaults are its recipe.
  Device(f, "mlx5_1")->mutable_pci()->set_driver("ionic");
  v1::DoctorReport r = Judge(f);
  const v1::DoctorCheck* k = Find(r, "nic_profile");
  ASSERT_NE(k, nullptr) << r.DebugString();
  EXPECT_THAT(k->verdict(), HasSubstr("AMD Pensando Pollara (ionic)"));
  EXPECT_THAT(k->evidence(), Contains(HasSubstr("NCCL_NET_PLUGIN is not set")));
  f.env["NCCL_IB_TC"] = "41";
  for (const jobenv::Profile& p : jobenv::Profiles()) {
    if (p.name != "ionic") continue;
    for (const jobenv::ProfileVar& v : p.vars) {
      if (v.name != "NCCL_IB_TC") f.env[std::string(v.name)] = std::string(v.value);
    }
  }
  r = Judge(f);
  k = Find(r, "nic_profile");
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->evidence(), ElementsAre(HasSubstr("NCCL_IB_TC=\"41\"")));
  f.env["NCCL_IB_TC"] = "104";
  EXPECT_EQ(Find(Judge(f), "nic_profile"), nullptr);
  // With the agent's answer, that comparison (the site's changes included) decides.
  f.agent_env = std::map<std::string, std::string>{{"NCCL_IB_TC", "41"}};
  r = Judge(f);
  EXPECT_EQ(Find(r, "nic_profile"), nullptr);
  EXPECT_NE(Find(r, "agent_answer"), nullptr);
}

TEST(JudgeVendorsTest, NvidiaAndAmdGpusInOneJobAreNamed) {
  DoctorFacts f = Good();
  Gpu(f, "0000:1e:00.0")->set_vendor(v1::ACCELERATOR_VENDOR_AMD);
  f.gpus.push_back("0000:1e:00.0");
  const v1::DoctorReport r = Judge(f);
  const v1::DoctorCheck* k = Find(r, "gpu_vendors");
  ASSERT_NE(k, nullptr) << r.DebugString();
  EXPECT_THAT(k->verdict(), HasSubstr("ROCm/rccl#1220"));
  EXPECT_THAT(k->evidence(), Contains(HasSubstr("AMD (RCCL): 0000:1e:00.0")));
  EXPECT_THAT(k->fix(), HasSubstr("UCC"));
}

TEST(JudgeVendorsTest, GpuDirectPerGpuWithItsReason) {
  DoctorFacts f = Good();
  v1::DoctorReport r = Judge(f);
  const v1::DoctorCheck* path = nullptr;
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.check() == "gpudirect_path") path = &k;
  }
  ASSERT_NE(path, nullptr);
  EXPECT_THAT(path->evidence(), Contains(HasSubstr("0000:1a:00.0: ")));
  // The host's only paths serve NVIDIA GPUs; an AMD GPU gets none of them.
  f.host->mutable_gpudirect()->clear_paths();
  v1::GpuDirectPath* p = f.host->mutable_gpudirect()->add_paths();
  p->set_mechanism("nvidia_peermem");
  p->set_detail("module nvidia_peermem loaded");
  Gpu(f, "0000:1a:00.0")->set_vendor(v1::ACCELERATOR_VENDOR_AMD);
  r = Judge(f);
  const v1::DoctorCheck* k = Find(r, "gpudirect_path");
  ASSERT_NE(k, nullptr) << r.DebugString();
  EXPECT_THAT(k->verdict(), HasSubstr("no GPUDirect RDMA path serves the job's GPUs"));
  EXPECT_THAT(k->evidence(), Contains(HasSubstr("0000:1a:00.0: none")));
  EXPECT_EQ(r.transport(), v1::NCCL_TRANSPORT_NET_IB);
}

TEST(JudgeVendorsTest, RailsInNcclIbHcaAreReadAndTheDevicesStillMatch) {
  DoctorFacts f = Good();
  f.env["NCCL_IB_HCA"] = "=mlx5_1:1:0";
  v1::DoctorReport r = Judge(f);
  EXPECT_THAT(Problems(r), ::testing::IsEmpty()) << r.DebugString();
  EXPECT_THAT(r.devices(), ElementsAre("mlx5_1:1"));
  f.env["NCCL_IB_HCA"] = "=mlx5_1:1:0:16384";
  EXPECT_THAT(Judge(f).DebugString(), HasSubstr("bit 14"));
}

TEST(JudgeTest, PrefixMatchTakesMlx5_10) {
  DoctorFacts f = Good();
  f.host = testing::DiscoveredExampleHost("many-hcas");
  f.env = {{"NCCL_IB_HCA", "mlx5_1"}};
  f.dev_nodes.reset();
  f.interfaces.reset();
  const v1::DoctorReport r = Judge(f);
  const v1::DoctorCheck* k = Find(r, "hca_prefix");
  ASSERT_NE(k, nullptr) << r.DebugString();
  EXPECT_THAT(k->evidence(), Contains(AllOf(HasSubstr("mlx5_10"), HasSubstr("mlx5_11"))));
  EXPECT_THAT(k->fix(), HasSubstr("==mlx5_1"));
  EXPECT_THAT(r.devices(), Contains(HasSubstr("mlx5_10:")));
}

// Sysfs shows a container every GPU of the host: without the agent's answer none is the job's,
// so no GPU is judged too far from the job's NIC (the path itself still is).
TEST(JudgeTest, UnknownJobGpusAreNotTheHostsGpus) {
  DoctorFacts f = Good();
  f.gpus.clear();
  const v1::DoctorReport r = Judge(f);
  EXPECT_EQ(Find(r, "gdr_distance"), nullptr) << r.DebugString();
  EXPECT_EQ(r.verdict(), v1::SEVERITY_OK);
  EXPECT_EQ(r.transport(), v1::NCCL_TRANSPORT_NET_IB_GDRDMA);
}

TEST(JudgeTest, SummaryNamesWhatStopsNetIb) {
  DoctorFacts f = Good();
  f.env["NCCL_IB_GID_INDEX"] = "9";
  const v1::DoctorReport r = Judge(f);
  EXPECT_EQ(r.summary(),
            "NCCL will use NET/IB with GPUDirect over mlx5_1:1, but NCCL uses GID index 9, an "
            "empty slot: its QPs do not connect");
  EXPECT_EQ(Find(r, "gid_empty")->fix(),
            "set NCCL_IB_GID_INDEX=3: the RoCE v2 GID of this namespace's address 25.11.128.11");
}

TEST(JudgeTest, AgentContextJudgesVariablesAlone) {
  DoctorFacts f = Good();
  f.context = "agent";
  f.dev_nodes.reset();
  f.limits.reset();
  f.interfaces.reset();
  const v1::DoctorReport r = Judge(f);
  EXPECT_EQ(r.verdict(), v1::SEVERITY_OK) << r.DebugString();
  EXPECT_EQ(r.context(), "agent");
  for (const v1::DoctorCheck& k : r.checks()) EXPECT_NE(k.area(), "limits");
}

TEST(JudgeTest, ThousandsOfHcasAndGarbageStayBounded) {
  DoctorFacts f = Good();
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "mlx5_" + std::to_string(i) + ":1,";
  f.env["NCCL_IB_HCA"] = many;
  f.env["NCCL_IB_GID_INDEX"] = "\x01\xff";
  f.env["UCX_TLS"] = std::string(100000, ',');
  const v1::DoctorReport r = Judge(f);
  EXPECT_NE(Find(r, "hca_syntax"), nullptr) << r.summary();
  for (const v1::DoctorCheck& k : r.checks()) {
    EXPECT_LT(k.verdict().size(), 2000u) << k.check();
    for (const std::string& e : k.evidence()) EXPECT_LT(e.size(), 4000u) << k.check();
  }
}

TEST(JudgeTest, NamedDevicesFollowTheConsumers) {
  const v1::Host& host = testing::DiscoveredExampleHost("roce-9port");
  EXPECT_THAT(
      NamedDevices({{"NCCL_IB_HCA", "=mlx5_1:1,mlx5_2"}, {"UCX_NET_DEVICES", "mlx5_4:1"}}, host),
      ElementsAre("mlx5_1", "mlx5_2", "mlx5_4"));
  EXPECT_THAT(NamedDevices({{"NCCL_IB_HCA", "^mlx5_0"}}, host),
              AllOf(Not(Contains("mlx5_0")), Contains("mlx5_8")));
  EXPECT_EQ(NamedDevices({}, host).size(), 9u);
}

}  // namespace
}  // namespace fabric::doctor
