#include "tests/testing/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace fabric::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  // tmpfs when there is one: example trees are thousands of small files, and writing them to a
  // loaded disk costs seconds where tmpfs takes a tenth of one.
  // (Containers often get a 64 MiB /dev/shm: use it only with room to spare.)
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = "/tmp";
  struct statvfs vfs;
  if (base != nullptr) {
    dir = base;
  } else if (access("/dev/shm", W_OK) == 0 && statvfs("/dev/shm", &vfs) == 0 &&
             static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) > 1e9) {
    dir = "/dev/shm";
  }
  std::string tmpl = absl::StrCat(dir, "/", prefix, ".XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const std::vector<std::string>& argv, const std::vector<std::string>& env,
    const std::optional<std::string>& stdin_data) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  auto p = std::unique_ptr<Subprocess>(new Subprocess());
  p->dir_ = MakeTempDir("subprocess");
  if (p->dir_.empty()) return absl::InternalError("mkdtemp failed");
  // Built before fork: the child may only call async-signal-safe functions.
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const std::string& add : env) replaced = replaced || add.substr(0, add.find('=')) == key;
    if (!replaced) envs.push_back(kv);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const std::string out = p->dir_ + "/stdout";
  const std::string err = p->dir_ + "/stderr";
  // A file rather than a pipe: nothing to feed while the child runs.
  const std::string in = stdin_data ? p->dir_ + "/stdin" : "/dev/null";
  if (stdin_data && !(std::ofstream(in, std::ios::binary) << *stdin_data)) {
    return absl::InternalError("cannot write the child's stdin");
  }
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = open(in.c_str(), O_RDONLY);
    if (o < 0 || e < 0 || n < 0) _exit(126);
    dup2(n, 0);
    dup2(o, 1);
    dup2(e, 2);
    // The test may have signals blocked (the agent's tests do not, but be safe).
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  p->pid_ = pid;
  return p;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) {
    kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void Subprocess::Signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  if (status_) return status_;
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = Decode(st);
      return status_;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool Subprocess::running() { return !Wait(absl::ZeroDuration()).has_value(); }

std::string Subprocess::Stdout() const { return Slurp(dir_ + "/stdout"); }
std::string Subprocess::Stderr() const { return Slurp(dir_ + "/stderr"); }

absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv, absl::Duration timeout,
                              const std::vector<std::string>& env,
                              const std::optional<std::string>& stdin_data) {
  auto p = Subprocess::Start(argv, env, stdin_data);
  if (!p.ok()) return p.status();
  auto st = (*p)->Wait(timeout);
  if (!st) return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not finish in time"));
  return RunResult{*st, (*p)->Stdout(), (*p)->Stderr()};
}

bool UnixSocketAccepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

bool WaitForSocket(Subprocess& p, const std::string& socket, absl::Duration timeout) {
  return WaitFor([&] { return !p.running() || UnixSocketAccepts(socket); }, timeout) && p.running();
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::optional<std::string> WaitForLogged(const Subprocess& p, const std::string& mark,
                                         absl::Duration timeout) {
  std::optional<std::string> rest;
  WaitFor(
      [&] {
        const std::string err = p.Stderr();
        const size_t at = err.find(mark);
        if (at == std::string::npos) return false;
        const size_t from = at + mark.size();
        const size_t eol = err.find('\n', from);
        rest = err.substr(from, eol == std::string::npos ? std::string::npos : eol - from);
        return true;
      },
      timeout);
  return rest;
}

}  // namespace fabric::testing
