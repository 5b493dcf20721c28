#include "agent/publish/nfd/nfd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/hosts.h"
#include "tests/hosts/model_builder.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using namespace ::fabric::v1;  // NOLINT
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

std::string TempDir(const std::string& what) {
  std::string tmpl = testing::MakeTempDir(what);
  EXPECT_FALSE(tmpl.empty());
  return tmpl;
}

// Writes an example host (after `edit`) and discovers it.
Host Discovered(const std::string& name, const std::function<void(testing::HostSpec&)>& edit = {}) {
  auto spec = testing::ExampleHost(name);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return Host();
  if (edit) edit(*spec);
  const std::string tmp = TempDir("nfd");
  const fs::path dir = fs::path(tmp) / "host";
  absl::Status written = testing::WriteHost(*spec, dir);
  EXPECT_TRUE(written.ok()) << written;
  HostFsImpl sys((dir / "sys").string()), proc((dir / "proc").string());
  absl::StatusOr<Host> host = Discover(sys, proc);
  fs::remove_all(tmp);
  EXPECT_TRUE(host.ok()) << host.status();
  return host.ok() ? *host : Host();
}

// An example host as discovered, written and discovered once per test binary.
const Host& Example(const std::string& name) {
  static auto* cache = new std::map<std::string, Host>();
  auto it = cache->find(name);
  if (it == cache->end()) it = cache->emplace(name, Discovered(name)).first;
  return it->second;
}

// The label lines (comments left out).
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (!line.empty() && line[0] != '#') out.emplace_back(line);
  }
  return out;
}

TEST(RenderNfdFeatures, Roce9Port) {
  const std::string text = RenderNfdFeatures(Example("roce-9port"), {});
  EXPECT_THAT(text, StartsWith("# "));
  EXPECT_EQ(text.back(), '\n');
  // mlx5_0 carries the default route (front-end): 8 back-end NICs, one per GPU behind its switch.
  EXPECT_THAT(Lines(text), ElementsAre("rdma.fabric.io/present=true",          //
                                       "rdma.fabric.io/link-layer=roce",       //
                                       "rdma.fabric.io/nics=8",                //
                                       "rdma.fabric.io/rate-gbps=400",         //
                                       "rdma.fabric.io/gpus=8",                //
                                       "rdma.fabric.io/gpu-nic-aligned=true",  //
                                       "rdma.fabric.io/gpudirect=true"));
}

// The neighbour heard over LLDP on `netdev` of `h`, as the agent lays it on.
void SetNeighbor(Host* h, const std::string& netdev, const std::string& label,
                 const std::string& port) {
  for (Netdev& n : *h->mutable_netdevs()) {
    if (n.name() != netdev) continue;
    n.mutable_neighbor()->set_switch_label(label);
    n.mutable_neighbor()->set_port_id(port);
  }
}

// Fabric position: the front-end leaf, the back-end leaves and the group they make; nothing
// without neighbours (roce-9port: eth0 is the front-end, eth1-eth8 the back-end ports).
TEST(RenderNfdFeatures, HealthVerdictIsTheLastLabelWhenGiven) {
  const Host& host = Example("roce-9port");
  EXPECT_THAT(RenderNfdFeatures(host, {}), Not(HasSubstr("/health=")));
  const std::vector<std::pair<Severity, std::string>> cases = {{SEVERITY_OK, "ok"},
                                                               {SEVERITY_WARNING, "warning"},
                                                               {SEVERITY_CRITICAL, "critical"},
                                                               {SEVERITY_UNKNOWN, "unknown"}};
  for (const auto& [sev, value] : cases) {
    const std::vector<std::string> lines = Lines(RenderNfdFeatures(host, {}, sev));
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back(), "rdma.fabric.io/health=" + value);
  }
}

TEST(RenderNfdFeatures, LeafLabelsFromNeighbours) {
  Host h = Example("roce-9port");
  auto leaf_lines = [](const Host& host) {
    std::vector<std::string> out;
    for (const std::string& l : Lines(RenderNfdFeatures(host, {}))) {
      if (absl::StrContains(l, "leaf") || absl::StrContains(l, "leaves")) out.push_back(l);
    }
    return out;
  };
  EXPECT_THAT(leaf_lines(h), IsEmpty());
  SetNeighbor(&h, "eth0", "fe-leaf-3", "Ethernet1/9");
  for (int i = 1; i <= 8; ++i) SetNeighbor(&h, absl::StrCat("eth", i), "leaf-07", "p1");
  const std::vector<std::string> one = leaf_lines(h);
  EXPECT_THAT(
      one, ElementsAre("rdma.fabric.io/leaf.frontend=fe-leaf-3", "rdma.fabric.io/backend-leaves=1",
                       "rdma.fabric.io/leaf.backend=leaf-07",
                       ::testing::StartsWith("rdma.fabric.io/leaf-group=g-")));
  // Rail-optimized: each NIC to its own leaf. The group names the set of leaves, in any order.
  Host rails = h, rails_again = h;
  for (int i = 1; i <= 8; ++i) {
    SetNeighbor(&rails, absl::StrCat("eth", i), absl::StrCat("rail-", i), "p1");
    SetNeighbor(&rails_again, absl::StrCat("eth", i), absl::StrCat("rail-", 9 - i), "p2");
  }
  const std::vector<std::string> eight = leaf_lines(rails);
  EXPECT_THAT(eight, ElementsAre("rdma.fabric.io/leaf.frontend=fe-leaf-3",
                                 "rdma.fabric.io/backend-leaves=8",
                                 ::testing::StartsWith("rdma.fabric.io/leaf-group=g-")));
  EXPECT_EQ(eight, leaf_lines(rails_again)) << "same leaves, same group";
  EXPECT_NE(eight.back(), one.back()) << "other leaves, another group";

  // Rails configured: a label per rail that heard its leaf.
  SelectionPolicy policy;
  for (int k = 1; k <= 2; ++k) {
    Rail* r = policy.add_rails();
    r->set_name(absl::StrCat("r", k));
    r->set_switch_pattern(absl::StrCat("rail-", k));
  }
  std::vector<std::string> rail_lines;
  for (const std::string& l : Lines(RenderNfdFeatures(rails, policy))) {
    if (absl::StrContains(l, "leaf.r")) rail_lines.push_back(l);
  }
  EXPECT_THAT(rail_lines,
              ElementsAre("rdma.fabric.io/leaf.r1=rail-1", "rdma.fabric.io/leaf.r2=rail-2"));
}

TEST(RenderNfdFeatures, EveryExampleHost) {
  const std::map<std::string, std::vector<std::string>> want = {
      {"dgx-h100-ib",
       // 8 IB compute NICs and 4 RoCE storage NICs (the storage PF's VFs are not NICs of their
       // own); storage runs at 200.
       {"rdma.fabric.io/present=true", "rdma.fabric.io/link-layer=mixed", "rdma.fabric.io/nics=12",
        "rdma.fabric.io/rate-gbps=200", "rdma.fabric.io/gpus=8",
        "rdma.fabric.io/gpu-nic-aligned=true", "rdma.fabric.io/gpudirect=true"}},
      {"amd-mi300x-bnxt",
       // 8 MI300X and a Tenstorrent card without a NIC nearby.
       {"rdma.fabric.io/present=true", "rdma.fabric.io/link-layer=roce", "rdma.fabric.io/nics=8",
        "rdma.fabric.io/rate-gbps=400", "rdma.fabric.io/gpus=9",
        "rdma.fabric.io/gpu-nic-aligned=false", "rdma.fabric.io/gpudirect=true"}},
      {"many-hcas",
       // mlx5_0 is front-end, mlx5_2 is down; GPU3's NIC is down, so it gets a distant one.
       {"rdma.fabric.io/present=true", "rdma.fabric.io/link-layer=roce", "rdma.fabric.io/nics=10",
        "rdma.fabric.io/rate-gbps=400", "rdma.fabric.io/gpus=4",
        "rdma.fabric.io/gpu-nic-aligned=false", "rdma.fabric.io/gpudirect=true"}},
  };
  for (const auto& [name, lines] : want) {
    EXPECT_THAT(Lines(RenderNfdFeatures(Example(name), {})), ::testing::ElementsAreArray(lines))
        << name;
  }
}

TEST(RenderNfdFeatures, EveryLineIsAValidLabel) {
  std::vector<std::pair<std::string, Host>> hosts;
  for (const std::string& name : testing::ExampleHostNames()) {
    hosts.emplace_back(name, Example(name));
  }
  hosts.emplace_back("no RDMA", Host());
  for (const auto& [name, host] : hosts) {
    for (const std::string& text : {RenderNfdFeatures(host, {}), RenderNfdFeatures(host, [] {
                                      SelectionPolicy p;
                                      p.add_deny("mlx5_1");
                                      return p;
                                    }())}) {
      std::vector<std::string> lines = Lines(text);
      EXPECT_GE(lines.size(), 5u) << name;
      for (const std::string& line : lines) {
        std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
        ASSERT_EQ(kv.size(), 2u) << name << ": " << line;
        EXPECT_TRUE(IsValidLabelKey(kv[0])) << name << ": " << line;
        EXPECT_THAT(kv[0], StartsWith(std::string(kNfdLabelNamespace) + "/"));
        EXPECT_TRUE(IsValidLabelValue(kv[1])) << name << ": " << line;
        EXPECT_FALSE(kv[1].empty()) << name << ": " << line;
      }
      // Comments are never read as NFD directives ("# +...").
      for (absl::string_view line : absl::StrSplit(text, '\n')) {
        EXPECT_FALSE(absl::StartsWith(line, "# +")) << line;
      }
    }
  }
}

TEST(RenderNfdFeatures, HostWithoutRdma) {
  Host h = Discovered("roce-9port", [](testing::HostSpec& s) {
    std::vector<std::string> names;
    for (const auto& d : s.rdma) names.push_back(d.name);
    for (const auto& n : names) s.RemoveRdma(n);
  });
  ASSERT_EQ(h.rdma_devices_size(), 0);
  EXPECT_THAT(
      Lines(RenderNfdFeatures(h, {})),
      ElementsAre("rdma.fabric.io/present=false", "rdma.fabric.io/nics=0", "rdma.fabric.io/gpus=8",
                  "rdma.fabric.io/gpu-nic-aligned=false", "rdma.fabric.io/gpudirect=false"));
  EXPECT_THAT(
      Lines(RenderNfdFeatures(Host(), {})),
      ElementsAre("rdma.fabric.io/present=false", "rdma.fabric.io/nics=0", "rdma.fabric.io/gpus=0",
                  "rdma.fabric.io/gpu-nic-aligned=false", "rdma.fabric.io/gpudirect=false"));
}

TEST(RenderNfdFeatures, PolicyAndPortsDecide) {
  testing::ModelBuilder b;
  b.Gpu("0000:1a:00.0", 0).Gpu("0000:3c:00.0", 1);
  b.Nic("mlx5_0", "0000:01:00.0", 0, "eth0", "10.0.60.3", "", 100);
  b.DefaultRoute("eth0");
  b.Nic("mlx5_1", "0000:1b:00.0", 0, "eth1", "25.11.128.11");
  b.Nic("mlx5_2", "0000:3d:00.0", 1, "eth2", "25.11.128.12", "", 200);
  RdmaDevice* ib = b.Device("mlx5_3", "0000:41:00.0", 1);
  b.IbPort(ib, 1, 100)->set_state(PORT_STATE_DOWN);
  b.Distance("0000:1a:00.0", "mlx5_1", DISTANCE_CLASS_PIX);
  b.Distance("0000:3c:00.0", "mlx5_2", DISTANCE_CLASS_PXB);
  b.Distance("0000:1a:00.0", "mlx5_2", DISTANCE_CLASS_SYS);
  b.Distance("0000:3c:00.0", "mlx5_1", DISTANCE_CLASS_SYS);
  b.host().mutable_gpudirect()->set_available(true);
  const Host& h = b.Build();

  // The down IB port and the front-end NIC are not counted.
  EXPECT_THAT(
      Lines(RenderNfdFeatures(h, {})),
      ElementsAre("rdma.fabric.io/present=true", "rdma.fabric.io/link-layer=roce",
                  "rdma.fabric.io/nics=2", "rdma.fabric.io/rate-gbps=200", "rdma.fabric.io/gpus=2",
                  "rdma.fabric.io/gpu-nic-aligned=true", "rdma.fabric.io/gpudirect=true"));

  // Denying mlx5_2 sends GPU 1 across the sockets.
  SelectionPolicy deny;
  deny.add_deny("eth2");
  EXPECT_THAT(
      Lines(RenderNfdFeatures(h, deny)),
      ElementsAre("rdma.fabric.io/present=true", "rdma.fabric.io/link-layer=roce",
                  "rdma.fabric.io/nics=1", "rdma.fabric.io/rate-gbps=400", "rdma.fabric.io/gpus=2",
                  "rdma.fabric.io/gpu-nic-aligned=false", "rdma.fabric.io/gpudirect=true"));

  // The IB port comes up: mixed; a fractional rate stays a valid value.
  Host up = h;
  up.mutable_rdma_devices(3)->mutable_ports(0)->set_state(PORT_STATE_ACTIVE);
  up.mutable_rdma_devices(3)->mutable_ports(0)->set_rate_gbps(2.5);
  EXPECT_THAT(
      Lines(RenderNfdFeatures(up, {})),
      ElementsAre("rdma.fabric.io/present=true", "rdma.fabric.io/link-layer=mixed",
                  "rdma.fabric.io/nics=3", "rdma.fabric.io/rate-gbps=2.5", "rdma.fabric.io/gpus=2",
                  "rdma.fabric.io/gpu-nic-aligned=true", "rdma.fabric.io/gpudirect=true"));

  // Only the front-end NIC is up: nothing counted, nothing aligned, no GPUDirect for jobs.
  Host fe = h;
  for (int i = 1; i < fe.rdma_devices_size(); ++i) {
    fe.mutable_rdma_devices(i)->mutable_ports(0)->set_state(PORT_STATE_DOWN);
  }
  EXPECT_THAT(
      Lines(RenderNfdFeatures(fe, {})),
      ElementsAre("rdma.fabric.io/present=true", "rdma.fabric.io/nics=0", "rdma.fabric.io/gpus=2",
                  "rdma.fabric.io/gpu-nic-aligned=false", "rdma.fabric.io/gpudirect=false"));
}

TEST(LabelSyntax, KeysAndValues) {
  for (const char* v : {"", "true", "400", "2.5", "a-b_c.d", "A1"}) {
    EXPECT_TRUE(IsValidLabelValue(v)) << v;
  }
  for (const char* v : {"-a", "a-", ".5", "1e+06", "a b", "a/b", "x=y"}) {
    EXPECT_FALSE(IsValidLabelValue(v)) << v;
  }
  EXPECT_TRUE(IsValidLabelValue(std::string(63, 'a')));
  EXPECT_FALSE(IsValidLabelValue(std::string(64, 'a')));
  for (const char* k : {"rdma.fabric.io/nics", "feature.node.kubernetes.io/x", "plain"}) {
    EXPECT_TRUE(IsValidLabelKey(k)) << k;
  }
  for (const char* k : {"", "/x", "Rdma.io/x", "rdma..io/x", "-a.io/x", "a.io/", "a.io/-x"}) {
    EXPECT_FALSE(IsValidLabelKey(k)) << k;
  }
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Files in `dir` other than the feature file.
std::vector<std::string> Leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != kNfdFeatureFile) out.push_back(e.path().filename().string());
  }
  return out;
}

TEST(WriteNfdFeatures, WritesAtomicallyAndOnlyOnChange) {
  const fs::path dir = TempDir("features.d");
  const fs::path file = dir / kNfdFeatureFile;

  absl::StatusOr<bool> wrote = WriteNfdFeatures(dir.string(), "rdma.fabric.io/present=true\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  EXPECT_EQ(Slurp(file), "rdma.fabric.io/present=true\n");
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  EXPECT_THAT(Leftovers(dir), IsEmpty());

  // Unchanged: not written again (same inode, no rename).
  struct stat before, after;
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  wrote = WriteNfdFeatures(dir.string(), "rdma.fabric.io/present=true\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_FALSE(*wrote);
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);

  // Changed: replaced by a new file (rename), never truncated in place.
  wrote = WriteNfdFeatures(dir.string(), "rdma.fabric.io/present=false\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  EXPECT_EQ(Slurp(file), "rdma.fabric.io/present=false\n");
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);
  EXPECT_THAT(Leftovers(dir), IsEmpty());

  // A real render round-trips.
  const std::string text = RenderNfdFeatures(Example("roce-9port"), {});
  EXPECT_TRUE(*WriteNfdFeatures(dir.string(), text));
  EXPECT_EQ(Slurp(file), text);
  EXPECT_FALSE(*WriteNfdFeatures(dir.string(), text));
  fs::remove_all(dir);
}

TEST(WriteNfdFeatures, ClearErrors) {
  const fs::path base = TempDir("nfd-errors");

  absl::StatusOr<bool> missing = WriteNfdFeatures((base / "features.d").string(), "x\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr((base / "features.d").string()));
  EXPECT_THAT(missing.status().message(), HasSubstr("does not exist"));

  std::ofstream(base / "file") << "x";
  absl::StatusOr<bool> not_dir = WriteNfdFeatures((base / "file").string(), "x\n");
  ASSERT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_dir.status().message(), HasSubstr("not a directory"));

  // A directory nothing can be created in (/proc refuses even root).
  absl::StatusOr<bool> proc = WriteNfdFeatures("/proc", "x\n");
  ASSERT_FALSE(proc.ok());
  EXPECT_THAT(proc.status().message(), HasSubstr("/proc"));

  // Unwritable by permissions (root ignores them).
  if (::geteuid() != 0) {
    const fs::path ro = base / "ro";
    fs::create_directory(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    absl::StatusOr<bool> denied = WriteNfdFeatures(ro.string(), "x\n");
    ASSERT_FALSE(denied.ok());
    EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(denied.status().message(), HasSubstr(ro.string()));
    fs::permissions(ro, fs::perms::owner_all);
    EXPECT_THAT(Leftovers(ro), IsEmpty());
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace fabric
