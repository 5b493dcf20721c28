#include "agent/launch/doctor_run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/common/errno.h"
#include "agent/common/excerpt.h"
#include "agent/common/fd.h"
#include "agent/common/output.h"
#include "agent/common/shell.h"
#include "agent/common/strings.h"
#include "agent/policy/doctor/consumer_vars.h"
#include "agent/policy/doctor/judge.h"
#include "agent/policy/doctor/rank_envs.h"
#include "agent/policy/health/health.h"
#include "agent/publish/json/json.h"

extern char** environ;

namespace fabric::launch {
namespace {

constexpr size_t kMaxEnvFileBytes = 1 << 20;
using doctor::kMaxVariables;

// Containers mark themselves (podman, docker, systemd-nspawn, Kubernetes' service variables).
std::string DetectContext() {
  if (access("/run/.containerenv", F_OK) == 0 || access("/.dockerenv", F_OK) == 0 ||
      std::getenv("container") != nullptr || std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) {
    return "container";
  }
  return "host";
}

// One shell word of a value: '...', "..." (\\, \", \$, \` escaped) and unquoted runs (\x is x).
absl::StatusOr<std::string> Unquote(std::string_view v) {
  std::string out;
  size_t i = 0;
  while (i < v.size()) {
    const char c = v[i];
    if (c == '\'') {
      const size_t end = v.find('\'', i + 1);
      if (end == std::string_view::npos) return absl::InvalidArgumentError("unterminated '");
      out.append(v.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (c == '"') {
      ++i;
      while (i < v.size() && v[i] != '"') {
        if (v[i] == '\\' && i + 1 < v.size() &&
            std::string_view("\\\"$`").find(v[i + 1]) != std::string_view::npos) {
          ++i;
        }
        out += v[i++];
      }
      if (i >= v.size()) return absl::InvalidArgumentError("unterminated \"");
      ++i;
    } else if (c == '\\' && i + 1 < v.size()) {  // 'it'\''s', as ShellQuote writes a quote.
      out += v[i + 1];
      i += 2;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a plain file";
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "doctor: %s\n", TerminalText(msg).c_str());
  return 3;
}

}  // namespace

void AddDoctorFlags(CLI::App* cmd, DoctorOptions* opt) {
  cmd->add_option("--env-file", opt->env_file,
                  "judge the variables of this file (KEY=VALUE lines, or `fabricctl env` output) "
                  "instead of this process's");
  cmd->add_option("--gpus", opt->gpus,
                  "judge the agent's answer for these GPUs (indexes, PCI addresses, UUIDs, "
                  "\"job\") instead of this process's variables");
  cmd->add_flag("--json", opt->json, "print the report as JSON");
  cmd->add_option("--sysfs", opt->read.sysfs, "sysfs root to discover the RDMA devices under")
      ->capture_default_str();
  cmd->add_option("--procfs", opt->read.procfs, "procfs root for discovery")->capture_default_str();
  cmd->add_option("--dev-dir", opt->read.dev_dir, "where the RDMA device nodes are")
      ->capture_default_str();
}

absl::StatusOr<std::map<std::string, std::string>> ParseEnvFile(std::string_view text) {
  std::map<std::string, std::string> out;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(Av(text), '\n')) {
    ++n;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    if (absl::ConsumePrefix(&line, "export")) {
      if (line.empty() || !absl::ascii_isspace(static_cast<unsigned char>(line.front()))) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", n, ": ", Excerpt(Sv(line)), " is not KEY=VALUE"));
      }
      line = absl::StripLeadingAsciiWhitespace(line);
    }
    const size_t eq = line.find('=');
    const std::string_view key = Sv(line.substr(0, eq == absl::string_view::npos ? 0 : eq));
    if (eq == absl::string_view::npos || !IsValidEnvName(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", n, ": ", Excerpt(Sv(line)), " is not KEY=VALUE"));
    }
    auto value = Unquote(Sv(line.substr(eq + 1)));
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", n, ": ", Av(key), ": ", value.status().message()));
    }
    if (out.size() >= kMaxVariables && !out.count(std::string(key))) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxVariables, " variables"));
    }
    out[std::string(key)] = *std::move(value);
  }
  return out;
}

std::map<std::string, std::string> ProcessEnvMap() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos) out.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ReadEnvFile(const std::string& path) {
  // O_NONBLOCK: a FIFO (or a device) opens without waiting for a writer; fstat then refuses
  // anything but a regular file before a read could block or never end.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot be read (", ErrnoText(errno), ")"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot be read (", ErrnoText(errno), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (", FileKind(st.st_mode),
                     "): --env-file takes a file of KEY=VALUE lines"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxEnvFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", st.st_size, " bytes, larger than ", kMaxEnvFileBytes));
  }
  // Read to the bound whatever the size said (the file may grow meanwhile).
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::NotFoundError(absl::StrCat(path, ": read: ", ErrnoText(errno)));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kMaxEnvFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", kMaxEnvFileBytes, " bytes"));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  auto env = ParseEnvFile(text);
  if (!env.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", env.status().message()));
  return env;
}

std::string FormatDoctor(const v1::DoctorReport& r) {
  // Every field may carry bytes from outside (a variable's value, a device's name, the agent's
  // text): escaped for the terminal here, once, for every check.
  auto t = [](const std::string& s) { return TerminalText(s); };
  std::string out =
      absl::StrCat("Doctor (", t(r.context()), ", variables of ", t(r.env_source()), ")\n");
  std::string area;
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.area() != area) {
      area = k.area();
      absl::StrAppend(&out, "\n", t(absl::AsciiStrToUpper(area)), "\n");
    }
    const std::string sev = SeverityName(k.severity());
    absl::StrAppend(&out, "  ", sev, std::string(10 - std::min<size_t>(sev.size(), 9), ' '),
                    k.subject().empty() ? "" : absl::StrCat(t(k.subject()), ": "), t(k.verdict()),
                    "\n");
    for (const std::string& e : k.evidence()) absl::StrAppend(&out, "            - ", t(e), "\n");
    if (!k.fix().empty()) absl::StrAppend(&out, "            fix: ", t(k.fix()), "\n");
  }
  absl::StrAppend(&out, "\nDOCTOR ", SeverityName(r.verdict()), " - ", t(r.summary()), "\n");
  return out;
}

int RunDoctor(const DoctorOptions& opt, const AnswerSource& answer) {
  doctor::DoctorFacts f;
  if (!opt.gpus.empty() && !opt.env_file.empty()) {
    return Fail("--gpus judges the agent's answer for those GPUs, --env-file a file's: give one");
  }
  if (!opt.gpus.empty()) {
    if (!answer.select) return Fail(absl::StrCat("--gpus needs an answer: ", answer.missing));
    JobEnvOptions jo;
    jo.gpus = opt.gpus;
    auto a = AskJobEnv(answer.select, jo, /*keep_set=*/false);
    if (!a.ok()) return Fail(std::string(a.status().message()));
    f.env = std::map<std::string, std::string>(a->env.begin(), a->env.end());
    f.env_source = absl::StrCat(answer.name, "'s answer for --gpus ", opt.gpus);
  } else if (!opt.env_file.empty()) {
    auto env = ReadEnvFile(opt.env_file);
    if (!env.ok()) return Fail(std::string(env.status().message()));
    f.env = *std::move(env);
    f.env_source = absl::StrCat("--env-file ", opt.env_file);
  } else {
    f.env = ProcessEnvMap();
    f.env_source = "this process";
  }
  if (absl::Status bounds = doctor::CheckListBounds(f.env); !bounds.ok()) {
    return Fail(std::string(bounds.message()));
  }
  // The job as a whole: the answer this process would get (its rank's), and every rank's.
  if (answer.select) {
    JobEnvOptions jo;
    jo.gpus = opt.gpus.empty() ? "job" : opt.gpus;
    jo.rank = opt.gpus.empty() ? "auto" : "none";
    auto a = AskJobEnv(answer.select, jo, /*keep_set=*/false);
    if (a.ok()) {
      f.agent_env = std::map<std::string, std::string>(a->env.begin(), a->env.end());
      for (const v1::GpuAssignment& g : a->selection.assignments()) f.gpus.push_back(g.gpu());
      auto ask = [&](const std::string& gpu) -> absl::StatusOr<std::map<std::string, std::string>> {
        jo.rank = gpu;
        auto rank = AskJobEnv(answer.select, jo, /*keep_set=*/false);
        if (!rank.ok()) return rank.status();
        return std::map<std::string, std::string>(rank->env.begin(), rank->env.end());
      };
      (void)doctor::AddRankEnvs(ask, nullptr, &f);  // Never cancelled: always OK.
    } else {
      f.agent_error = absl::StrCat(answer.name, ": ", a.status().message());
    }
  } else {
    f.agent_error = answer.missing;
  }
  doctor::ReadOptions read = opt.read;
  if (read.context == "host") read.context = DetectContext();
  doctor::ReadFacts(
      read, [&](const v1::Host& h) { return doctor::NamedDevices(f.env, h); }, f.gpus, &f);
  return PrintDoctor(doctor::Judge(f), opt.json);
}

int PrintDoctor(const v1::DoctorReport& r, bool json) {
  Write(json ? ToJson(r) : FormatDoctor(r));
  return doctor::ExitCodeOf(r);
}

}  // namespace fabric::launch
