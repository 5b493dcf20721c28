// fabricctl doctor: whether the job that runs here (this process's environment, an --env-file,
// or the agent's answer for --gpus) will really use RDMA, and if not exactly why (doctor_run.h).
// Unlike fabric-env it opens each named device with libibverbs, as NCCL will.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/fabric/doctor/verbs_open.h"
#include "agent/fabricctl/ctl.h"
#include "agent/fabricctl/host_source.h"
#include "agent/inventory/discovery/pci_names.h"
#include "agent/launch/doctor_run.h"
#include "agent/publish/hostfile/host_file.h"

namespace fabric::ctl {
namespace {

struct DoctorFlags {
  launch::DoctorOptions doctor;
  std::string host_file = hostfile::kDefaultPath;
  bool agent = false;
};

Outcome Finish(int code) {
  Outcome out;
  out.reported = true;
  out.verdict = static_cast<v1::Severity>(code + 1);
  return out;
}

// An error before any judgement: UNKNOWN (3), as health's, with the message on stderr.
Outcome Unknown(absl::Status s) {
  Outcome out(std::move(s));
  out.verdict = v1::SEVERITY_UNKNOWN;
  return out;
}

// --agent: the agent judges the variables against its host (the Doctor call).
Outcome AskAgent(const CommonOptions& common, const DoctorFlags& f) {
  v1::DoctorRequest req;
  if (!f.doctor.env_file.empty()) {
    auto env = launch::ReadEnvFile(f.doctor.env_file);
    if (!env.ok()) return Unknown(env.status());
    req.mutable_env()->insert(env->begin(), env->end());
  } else {
    const auto env = launch::ProcessEnvMap();
    req.mutable_env()->insert(env.begin(), env.end());
  }
  if (!f.doctor.gpus.empty()) {
    auto names = launch::GpuNames(f.doctor.gpus);
    if (!names.ok()) return Unknown(names.status());
    for (const std::string& n : *names) req.add_gpus(n);
  }
  auto client = Connect(common);
  if (!client.ok()) return Unknown(client.status());
  auto report = (*client)->Doctor(req);
  if (!report.ok()) return Unknown(report.status());
  return Finish(launch::PrintDoctor(*report, f.doctor.json));
}

// Who answers the job's SelectNics, in exec's order: discovery here when --sysfs/--procfs name
// the roots, the published host file, else the agent.
Outcome Run(const CLI::App* cmd, const CommonOptions& common, DoctorFlags& f) {
  if (f.agent) return AskAgent(common, f);
  DisableDefaultPciNames();  // The doctor shows no vendor names: pci.ids is not loaded.
  // Verbs open the devices of this kernel: only when the facts are this host's own sysfs.
  if (f.doctor.read.sysfs == "/sys") f.doctor.read.open_verbs = doctor::OpenVerbsDevice;
  std::unique_ptr<HostSource> source;
  launch::AnswerSource answer;
  std::shared_ptr<hostfile::HostFile> file;
  std::shared_ptr<v1::Host> discovered;
  if (cmd->count("--sysfs") + cmd->count("--procfs") > 0) {
    // One discovery answers for the agent (its default policy) and is the facts' host.
    auto host = LocalHostSource({f.doctor.read.sysfs, f.doctor.read.procfs, ""})->Inventory();
    if (!host.ok()) return Unknown(host.status());
    discovered = std::make_shared<v1::Host>(*std::move(host));
    f.doctor.read.host = discovered.get();
    answer.name = absl::StrCat("discovery from ", f.doctor.read.sysfs);
    answer.select = [discovered, where = f.doctor.read.sysfs](const v1::SelectNicsRequest& r) {
      return launch::SelectOnHost(*discovered, v1::SelectionPolicy(), r,
                                  absl::StrCat("under ", where));
    };
  } else if (auto read = hostfile::ReadHostFile(f.host_file);
             read.ok() && common.target == kDefaultTarget) {
    file = std::make_shared<hostfile::HostFile>(*std::move(read));
    answer.name = absl::StrCat("the published host ", f.host_file);
    answer.select = [file, path = f.host_file](const v1::SelectNicsRequest& r) {
      const v1::PublishedHost& p = file->published;
      return launch::SelectOnHost(p.host(), p.policy(), r, absl::StrCat("in ", path));
    };
  } else {
    source = AgentHostSource(common);
    answer.name = absl::StrCat("the agent at ", common.target);
  }
  if (source) {
    answer.select = [&source](const v1::SelectNicsRequest& r) { return source->Select(r); };
  }
  return Finish(launch::RunDoctor(f.doctor, answer));
}

}  // namespace

Command AddDoctor(CLI::App& app, CommonOptions& common) {
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "whether the job that runs here will really use RDMA, and if not why: devices, GIDs, "
      "limits, fallbacks, GPUDirect and the job's agreement with the agent; exit 0 OK, "
      "1 WARNING, 2 CRITICAL, 3 UNKNOWN");
  auto f = std::make_shared<DoctorFlags>();
  launch::AddDoctorFlags(cmd, &f->doctor);
  cmd->add_option("--host-file", f->host_file,
                  "the published host to compare the job with (fabric-agent --host-file-dir)")
      ->capture_default_str();
  cmd->add_flag("--agent", f->agent,
                "ask the agent to judge the variables (this process's or --env-file's, for the "
                "job's --gpus) against its host: no device nodes, limits or interfaces of this "
                "process are judged then");
  AddAgentFlags(cmd, &common, kTargetHelp);
  return {cmd, [cmd, f, &common]() -> Outcome { return Run(cmd, common, *f); }};
}

}  // namespace fabric::ctl
