// fabricctl doctor: whether the job that runs here (this process's environment, an --env-file,
// or the agent's answer for --gpus) will really use RDMA, and if not exactly why (doctor_run.h).
// Unlike fabric-env it opens each named device with libibverbs, as NCCL will.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/fabric/doctor/verbs_open.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/doctor_run.h"
#include "agent/fabricctl/host_source.h"
#include "agent/inventory/discovery/pci_names.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric::ctl {
namespace {

struct DoctorFlags {
  DoctorOptions doctor;
  std::string host_file = hostfile::kDefaultPath;
};

// Who answers the job's SelectNics, in exec's order: discovery here when --sysfs/--procfs name
// the roots, the published host file, else the agent.
Outcome Run(const CLI::App* cmd, const CommonOptions& common, DoctorFlags& f) {
  DisableDefaultPciNames();  // The doctor shows no vendor names: pci.ids is not loaded.
  // Verbs open the devices of this kernel: only when the facts are this host's own sysfs.
  if (f.doctor.read.sysfs == "/sys") f.doctor.read.open_verbs = doctor::OpenVerbsDevice;
  std::unique_ptr<HostSource> source;
  AnswerSource answer;
  std::shared_ptr<hostfile::HostFile> file;
  if (cmd->count("--sysfs") + cmd->count("--procfs") > 0) {
    source = LocalHostSource({f.doctor.read.sysfs, f.doctor.read.procfs, ""});
    answer.name = absl::StrCat("discovery from ", f.doctor.read.sysfs);
  } else if (auto read = hostfile::ReadHostFile(f.host_file);
             read.ok() && common.target == kDefaultTarget) {
    file = std::make_shared<hostfile::HostFile>(*std::move(read));
    answer.name = absl::StrCat("the published host ", f.host_file);
    answer.select = [file, path = f.host_file](const v1::SelectNicsRequest& r) {
      const v1::PublishedHost& p = file->published;
      return SelectOnHost(p.host(), p.policy(), r, absl::StrCat("in ", path));
    };
  } else {
    source = AgentHostSource(common);
    answer.name = absl::StrCat("the agent at ", common.target);
  }
  if (source) {
    answer.select = [&source](const v1::SelectNicsRequest& r) { return source->Select(r); };
  }
  const int code = RunDoctor(f.doctor, answer);
  Outcome out;
  out.reported = true;
  out.verdict = static_cast<v1::Severity>(code + 1);
  return out;
}

}  // namespace

Command AddDoctor(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "whether the job that runs here will really use RDMA, and if not why: devices, GIDs, "
      "limits, fallbacks, GPUDirect and the job's agreement with the agent; exit 0 OK, "
      "1 WARNING, 2 CRITICAL, 3 UNKNOWN");
  auto f = std::make_shared<DoctorFlags>();
  AddDoctorFlags(cmd, &f->doctor);
  cmd->add_option("--host-file", f->host_file,
                  "the published host to compare the job with (fabric-agent --host-file-dir)")
      ->capture_default_str();
  AddAgentFlags(cmd, &common, kTargetHelp);
  return {cmd, [cmd, f, &common]() -> Outcome { return Run(cmd, common, *f); }};
}

}  // namespace fabric::ctl
