// One podman for one test (test-rigs, rigs 3 and 7): its own storage, runroot, containers.conf
// (runc, cgroupfs, no default ulimits) and CNI config directory under /var/tmp (podman's storage
// must not be on tmpfs), the CNI backend with our plugin directory first, and a busybox image
// imported from a local rootfs (no registry). Everything is removed when the rig goes.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {

// A character device at `host_path` with the numbers of /dev/infiniband/`name` (uverbsN is
// 231:192+N, rdma_cm a misc device, 10:58 here): what a container given it opens is that node.
inline void MakeRdmaNode(const std::string& host_path, const std::string& name) {
  std::filesystem::create_directories(std::filesystem::path(host_path).parent_path());
  const dev_t dev = name == "rdma_cm"
                        ? makedev(10, 58)
                        : makedev(231, 192 + std::stoi(name.substr(strlen("uverbs"))));
  ASSERT_EQ(::mknod(host_path.c_str(), S_IFCHR | 0666, dev), 0) << host_path;
}

class PodmanRig {
 public:
  static constexpr char kImage[] = "localhost/fabric-e2e:1";

  // Why this machine cannot run podman tests; empty when it can.
  static std::string Missing() {
    if (geteuid() != 0) return "needs root (podman, CNI networking, device nodes)";
    for (const char* p : {"/usr/bin/podman", "/usr/sbin/runc", "/usr/lib/cni/bridge"}) {
      if (access(p, X_OK) != 0) {
        return absl::StrCat("needs podman, runc and containernetworking-plugins (", p,
                            " missing; scripts/install-deps.sh)");
      }
    }
    return "";
  }

  // `dir` is made afresh; `tools` are the busybox applets the image links in /bin.
  PodmanRig(std::string dir, const std::vector<std::string>& tools) : dir_(std::move(dir)) {
    namespace fs = std::filesystem;
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/net.d");
    std::ofstream(dir_ + "/containers.conf") << absl::StrCat(
        "[containers]\ndefault_ulimits = []\n"
        "[network]\nnetwork_backend = \"cni\"\n"
        "cni_plugin_dirs = [\"",
        kCniPluginDir, "\", \"/usr/lib/cni\"]\nnetwork_config_dir = \"", dir_, "/net.d\"\n",
        "[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
        "tmp_dir = \"", dir_, "/tmp\"\n");
    fs::create_directories(dir_ + "/rootfs/bin");
    fs::copy_file("/bin/busybox", dir_ + "/rootfs/bin/busybox");
    for (const std::string& tool : tools)
      fs::create_symlink("busybox", dir_ + "/rootfs/bin/" + tool);
    auto tar = Run({"/usr/bin/tar", "-C", dir_ + "/rootfs", "-cf", dir_ + "/rootfs.tar", "."});
    EXPECT_TRUE(tar.ok() && tar->status == 0) << "tar of the rootfs";
    auto imp = Podman({"import", dir_ + "/rootfs.tar", kImage});
    imported_ = imp.ok() && imp->status == 0;
    EXPECT_TRUE(imported_) << (imp.ok() ? imp->err : std::string(imp.status().message()));
  }

  ~PodmanRig() {
    (void)Podman({"rm", "-a", "-f", "-t", "0"});
    (void)Podman({"rmi", "-a", "-f"});
    (void)Run({"/usr/bin/umount", "-R", dir_ + "/root"}, absl::Seconds(10));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PodmanRig(const PodmanRig&) = delete;
  PodmanRig& operator=(const PodmanRig&) = delete;

  bool imported() const { return imported_; }
  const std::string& dir() const { return dir_; }
  // Where conflists go: a network NAME is net.d/NAME.conflist.
  std::string NetDir() const { return dir_ + "/net.d"; }

  absl::StatusOr<RunResult> Podman(std::vector<std::string> args,
                                   absl::Duration timeout = absl::Seconds(90)) const {
    std::vector<std::string> argv = {
        "/usr/bin/podman",  "--root", dir_ + "/root",     "--runroot", dir_ + "/run",
        "--storage-driver", "vfs",    "--cni-config-dir", NetDir()};
    argv.insert(argv.end(), args.begin(), args.end());
    return Run(argv, timeout, {"CONTAINERS_CONF=" + dir_ + "/containers.conf"});
  }

 private:
  std::string dir_;
  bool imported_ = false;
};

}  // namespace fabric::testing
