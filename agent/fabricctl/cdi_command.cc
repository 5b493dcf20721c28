// fabricctl cdi: the CDI spec fabric-agent keeps in /var/run/cdi (agent/publish/cdi), computed
// here from a sysfs/procfs root and a config file, for hosts without the agent: printed, or
// written into a CDI directory with the agent's writer (atomic, only when it changes).
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/common/output.h"
#include "agent/config/config.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/host_source.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "agent/publish/cdi/cdi_writer.h"

namespace fabric::ctl {
namespace {

struct CdiFlags {
  LocalOptions local;
  std::string output = "-";
  std::string dev_root;
};

Outcome RunCdi(const CdiFlags& f) {
  v1::SelectionPolicy policy;
  if (!f.local.config.empty()) {
    auto config = LoadConfig(f.local.config);
    if (!config.ok()) return UsageError(config.status());
    policy = config->selection();
  }
  // Discovered as `fabricctl inventory --sysfs` does, with the host-wide pairing the agent keeps.
  auto host = LocalHostSource(f.local)->Inventory();
  if (!host.ok()) return host.status();
  auto spec = cdi::SpecJson(
      *host, policy,
      {.dev_root = f.dev_root, .nccl_env_plugin = "", .pod_helper = "", .host_file_dir = ""});
  if (!spec.ok()) return FailedError(spec.status());
  if (f.output == "-") {
    Write(*spec);
    return {};
  }
  cdi::SpecWriter writer(f.output);
  auto wrote = writer.Write(*spec);
  if (!wrote.ok()) return UnreadableError(wrote.status());
  Write(absl::StrCat(writer.path(), *wrote ? " written\n" : " unchanged\n"));
  return {};
}

}  // namespace

Command AddCdi(CLI::App& app, CommonOptions& /*common*/) {
  CLI::App* cmd = app.add_subcommand(
      "cdi",
      "the CDI spec of this host's RDMA devices (fabric.io/rdma=gpuK, =<RDMA device>, =all), as "
      "fabric-agent keeps it in /var/run/cdi: for hosts without the agent");
  auto f = std::make_shared<CdiFlags>();
  cmd->add_option("--sysfs", f->local.sysfs, "sysfs root to discover from")->capture_default_str();
  cmd->add_option("--procfs", f->local.procfs, "procfs root to discover from")
      ->capture_default_str();
  cmd->add_option("--config", f->local.config,
                  "agent config file (JSON: selection policy, static env)");
  cmd->add_option("--output", f->output,
                  "a CDI directory (/var/run/cdi, /etc/cdi) to write fabric.io-rdma.json into, "
                  "atomically and only when it changes; - prints it")
      ->capture_default_str();
  cmd->add_option("--dev-root", f->dev_root,
                  "the spec's host paths of device nodes are DIR/dev/infiniband/... (tests, hosts "
                  "whose nodes live elsewhere)");
  return {cmd, [f]() -> Outcome { return RunCdi(*f); }};
}

}  // namespace fabric::ctl
