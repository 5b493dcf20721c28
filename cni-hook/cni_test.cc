#include "cni-hook/cni.h"

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cni-hook/docs.h"
#include "gtest/gtest.h"

namespace fabric::cni {
namespace {

std::string AddrText(const announce::Address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(a.family, &a.addr, buf, sizeof(buf));
  std::string s = absl::StrCat(buf, "/", a.prefix_len);
  if (a.has_gateway) {
    inet_ntop(a.family, &a.gateway, buf, sizeof(buf));
    absl::StrAppend(&s, " via ", buf);
  }
  return s;
}

// ---- The environment ----

struct EnvCase {
  std::string name;
  EnvMap env;
  int code;  // 0: parses
};

EnvMap Full(std::string command) {
  return {{"CNI_COMMAND", std::move(command)},
          {"CNI_CONTAINERID", "abc123"},
          {"CNI_NETNS", "/var/run/netns/abc"},
          {"CNI_IFNAME", "eth0"},
          {"CNI_PATH", "/opt/cni/bin"}};
}

EnvMap Without(EnvMap m, const std::string& key) {
  m.erase(key);
  return m;
}

EnvMap With(EnvMap m, const std::string& key, const std::string& value) {
  m[key] = value;
  return m;
}

TEST(ParseEnvTest, Table) {
  const std::vector<EnvCase> cases = {
      {"add", Full("ADD"), 0},
      {"del", Full("DEL"), 0},
      {"check", Full("CHECK"), 0},
      {"version alone", {{"CNI_COMMAND", "VERSION"}}, 0},
      {"status alone", {{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/opt/cni/bin"}}, 0},
      {"gc alone", {{"CNI_COMMAND", "GC"}}, 0},
      {"no command", Without(Full("ADD"), "CNI_COMMAND"), kInvalidEnv},
      {"unknown command", Full("add"), kInvalidEnv},
      {"add without netns", Without(Full("ADD"), "CNI_NETNS"), kInvalidEnv},
      {"add with empty netns", With(Full("ADD"), "CNI_NETNS", ""), kInvalidEnv},
      {"check without netns", Without(Full("CHECK"), "CNI_NETNS"), kInvalidEnv},
      {"del without netns", Without(Full("DEL"), "CNI_NETNS"), 0},
      {"del with empty netns", With(Full("DEL"), "CNI_NETNS", ""), 0},
      {"add without container id", Without(Full("ADD"), "CNI_CONTAINERID"), kInvalidEnv},
      {"del without ifname", Without(Full("DEL"), "CNI_IFNAME"), kInvalidEnv},
      {"add without path", Without(Full("ADD"), "CNI_PATH"), kInvalidEnv},
      {"container id with slash", With(Full("ADD"), "CNI_CONTAINERID", "../etc"), kInvalidEnv},
      {"container id leading dot", With(Full("ADD"), "CNI_CONTAINERID", ".abc"), kInvalidEnv},
      {"container id dashes", With(Full("ADD"), "CNI_CONTAINERID", "a-b_c.d"), 0},
      {"container id too long", With(Full("ADD"), "CNI_CONTAINERID", std::string(201, 'a')),
       kInvalidEnv},
      {"ifname too long", With(Full("ADD"), "CNI_IFNAME", "abcdefghijklmnop"), kInvalidEnv},
      {"ifname 15", With(Full("ADD"), "CNI_IFNAME", "abcdefghijklmno"), 0},
      {"ifname slash", With(Full("ADD"), "CNI_IFNAME", "eth/0"), kInvalidEnv},
      {"ifname colon", With(Full("ADD"), "CNI_IFNAME", "eth0:1"), kInvalidEnv},
      {"ifname space", With(Full("ADD"), "CNI_IFNAME", "eth 0"), kInvalidEnv},
      {"ifname dotdot", With(Full("ADD"), "CNI_IFNAME", ".."), kInvalidEnv},
      {"args", With(Full("ADD"), "CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAME=web-0;"), 0},
      {"args value with =", With(Full("ADD"), "CNI_ARGS", "A=b=c"), 0},
      {"args without =", With(Full("ADD"), "CNI_ARGS", "IgnoreUnknown"), kInvalidEnv},
      {"args empty key", With(Full("ADD"), "CNI_ARGS", "=x"), kInvalidEnv},
  };
  for (const EnvCase& c : cases) {
    auto env = ParseEnv(c.env);
    if (c.code == 0) {
      EXPECT_TRUE(env.ok()) << c.name << ": " << env.status();
    } else {
      ASSERT_FALSE(env.ok()) << c.name;
      EXPECT_EQ(CodeOf(env.status()), c.code) << c.name << ": " << env.status();
    }
  }
}

TEST(ParseEnvTest, Fields) {
  auto env = ParseEnv(With(Full("DEL"), "CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAME=web-0"));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->command, Command::kDel);
  EXPECT_EQ(env->container_id, "abc123");
  EXPECT_EQ(env->netns, "/var/run/netns/abc");
  EXPECT_EQ(env->ifname, "eth0");
  EXPECT_EQ(env->path, "/opt/cni/bin");
  ASSERT_EQ(env->args.size(), 2u);
  EXPECT_EQ(env->args[1].first, "K8S_POD_NAME");
  EXPECT_EQ(env->args[1].second, "web-0");
}

TEST(ParseEnvTest, PodUid) {
  const struct {
    std::string args, uid;
  } cases[] = {
      {"K8S_POD_NAME=web-0;K8S_POD_UID=5d0c7a0e-91b2-4c36-9d5f-0a8e1c2b3d4f",
       "5d0c7a0e-91b2-4c36-9d5f-0a8e1c2b3d4f"},
      {"K8S_POD_NAME=web-0", ""},                   // podman, or a runtime without it
      {"K8S_POD_UID=../../etc", ""},                // not a UID: never written to a record
      {"K8S_POD_UID=" + std::string(65, 'a'), ""},  // longer than any UID
      {"K8S_POD_UID=a b", ""},
  };
  for (const auto& c : cases) {
    auto env = ParseEnv(With(Full("ADD"), "CNI_ARGS", c.args));
    ASSERT_TRUE(env.ok()) << c.args << ": " << env.status();
    EXPECT_EQ(PodUid(*env), c.uid) << c.args;
  }
}

// ---- The config on stdin ----

// prevResult shapes as the reference and common plugins write them.
constexpr char kBridge10[] = R"({"cniVersion":"1.0.0","interfaces":[
  {"name":"cni0","mac":"6a:1c:0e:22:33:44"},
  {"name":"veth3f2a1b0c","mac":"2e:8a:11:22:33:44"},
  {"name":"eth0","mac":"0a:58:0a:58:00:05","sandbox":"/var/run/netns/cni-1234"}],
  "ips":[{"interface":2,"address":"10.88.0.5/16","gateway":"10.88.0.1"},
         {"interface":2,"address":"fd00:88::5/64","gateway":"fd00:88::1"}],
  "routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0"}],"dns":{}})";
constexpr char kBridge04[] = R"({"cniVersion":"0.4.0","interfaces":[
  {"name":"cni0","mac":"6a:1c:0e:22:33:44"},
  {"name":"veth3f2a1b0c","mac":"2e:8a:11:22:33:44"},
  {"name":"eth0","mac":"0a:58:0a:58:00:05","sandbox":"/var/run/netns/cni-1234"}],
  "ips":[{"version":"4","interface":2,"address":"10.88.0.5/16","gateway":"10.88.0.1"}],
  "dns":{}})";
constexpr char kMacvlan[] = R"({"cniVersion":"1.1.0","interfaces":[
  {"name":"eth0","mac":"5e:8d:2b:00:11:22","mtu":9000,"sandbox":"/var/run/netns/pod"}],
  "ips":[{"interface":0,"address":"192.168.10.7/24","gateway":"192.168.10.1"}],"dns":{}})";
// sriov-cni: the VF moved into the pod, no MAC when none was set, pciID in 1.1.
constexpr char kSriov[] = R"({"cniVersion":"1.1.0","interfaces":[
  {"name":"net1","sandbox":"/proc/4242/ns/net","pciID":"0000:3b:02.1"}],
  "ips":[{"interface":0,"address":"172.16.5.9/24"}]})";
// ipvlan: no MAC of its own; ips without an interface index.
constexpr char kIpvlan[] = R"({"cniVersion":"1.0.0","interfaces":[
  {"name":"eth0","sandbox":"/var/run/netns/x"}],
  "ips":[{"address":"10.1.2.3/24","gateway":"10.1.2.1"}]})";
// Two pod interfaces (multus-like): addresses go where their index says.
constexpr char kTwo[] = R"({"cniVersion":"1.0.0","interfaces":[
  {"name":"veth0"},{"name":"eth0","sandbox":"/n"},{"name":"net1","sandbox":"/n"}],
  "ips":[{"interface":2,"address":"10.2.0.2/24"},{"interface":1,"address":"10.1.0.2/24"},
         {"interface":0,"address":"10.0.0.1/24"}]})";

std::string Conf(const std::string& version, const std::string& prev,
                 const std::string& extra = "") {
  std::string s =
      absl::StrCat(R"({"cniVersion":")", version, R"(","name":"pods","type":"fabric-cni")");
  if (!prev.empty()) absl::StrAppend(&s, R"(,"prevResult":)", prev);
  if (!extra.empty()) absl::StrAppend(&s, ",", extra);
  return s + "}";
}

struct ConfigCase {
  std::string name;
  std::string input;
  Command command;
  int code;            // 0: parses
  std::string in_msg;  // the error names this
};

TEST(ParseConfigTest, Table) {
  const std::string macvlan_11 = Conf("1.1.0", kMacvlan);
  const std::vector<ConfigCase> cases = {
      {"0.4.0 add", Conf("0.4.0", kBridge04), Command::kAdd, 0, ""},
      {"1.0.0 add", Conf("1.0.0", kBridge10), Command::kAdd, 0, ""},
      {"1.1.0 add", macvlan_11, Command::kAdd, 0, ""},
      {"1.1.0 check", macvlan_11, Command::kCheck, 0, ""},
      {"1.1.0 status", Conf("1.1.0", ""), Command::kStatus, 0, ""},
      {"1.0.0 status", Conf("1.0.0", ""), Command::kStatus, kIncompatibleVersion, "1.1.0"},
      {"0.4.0 gc", Conf("0.4.0", ""), Command::kGc, kIncompatibleVersion, "GC"},
      {"0.3.1", Conf("0.3.1", kBridge10), Command::kAdd, kIncompatibleVersion, "0.3.1"},
      {"2.0.0", Conf("2.0.0", kBridge10), Command::kAdd, kIncompatibleVersion, "2.0.0"},
      {"no cniVersion", R"({"name":"x","type":"fabric-cni","prevResult":{}})", Command::kAdd,
       kIncompatibleVersion, "cniVersion"},
      {"numeric cniVersion", R"({"cniVersion":1,"prevResult":{}})", Command::kAdd, kInvalidConfig,
       "cniVersion"},
      {"empty", "", Command::kAdd, kDecodeFailure, "JSON"},
      {"truncated", R"({"cniVersion":"1.0.0",)", Command::kAdd, kDecodeFailure, "JSON"},
      {"array", "[]", Command::kAdd, kDecodeFailure, "object"},
      {"nested too deep", Conf("1.0.0", std::string(65, '[') + std::string(65, ']')), Command::kAdd,
       kDecodeFailure, "deeper"},
      {"nested 60 deep in a string is fine",
       Conf("1.0.0", "{}", absl::StrCat(R"("x":")", std::string(100, '['), "\"")), Command::kAdd, 0,
       ""},
      {"nested 60 deep",
       Conf("1.0.0", "{}", absl::StrCat(R"("x":)", std::string(60, '['), std::string(60, ']'))),
       Command::kAdd, 0, ""},
      {"trailing garbage", Conf("1.0.0", kBridge10) + "x", Command::kAdd, kDecodeFailure, ""},
      {"add without prevResult", Conf("1.0.0", ""), Command::kAdd, kInvalidConfig, "prevResult"},
      {"add with null prevResult", Conf("1.0.0", "null"), Command::kAdd, kInvalidConfig,
       "prevResult"},
      {"check without prevResult", Conf("1.0.0", ""), Command::kCheck, kInvalidConfig,
       "prevResult"},
      {"del without prevResult", Conf("1.0.0", ""), Command::kDel, 0, ""},
      {"del with empty prevResult", Conf("0.4.0", "{}"), Command::kDel, 0, ""},
      {"del with null prevResult", Conf("1.1.0", "null"), Command::kDel, 0, ""},
      {"prevResult a string", Conf("1.0.0", R"("x")"), Command::kDel, kInvalidConfig, "prevResult"},
      {"name a number", R"({"cniVersion":"1.0.0","name":5,"prevResult":{}})", Command::kAdd,
       kInvalidConfig, "name"},
      {"runtimeConfig an array", Conf("1.0.0", "{}", R"("runtimeConfig":[])"), Command::kAdd,
       kInvalidConfig, "runtimeConfig"},
      {"unknown keys", Conf("1.0.0", "{}", R"("ipam":{"type":"host-local"},"mtu":"x","foo":[1])"),
       Command::kAdd, 0, ""},
      {"all our keys", Conf("1.0.0", "{}", R"("announce":{"count":5,"intervalMs":50,
        "tailMs":[500,2000],"arpReply":true,"ipv6":false},"gateway":{"prime":false,
        "timeoutMs":300},"conflictProbe":{"enabled":true,"timeoutMs":150},
        "agentSocket":"/tmp/a.sock","requireAgent":true,"envDir":"/run/fabric-env",
        "stateDir":"/tmp/st","sysfsRoot":"/tmp/host/sys","logLevel":"debug")"),
       Command::kAdd, 0, ""},
      {"announce a string", Conf("1.0.0", "{}", R"("announce":"yes")"), Command::kAdd,
       kInvalidConfig, "announce"},
      {"count a string", Conf("1.0.0", "{}", R"("announce":{"count":"3"})"), Command::kAdd,
       kInvalidConfig, "announce.count"},
      {"count a float", Conf("1.0.0", "{}", R"("announce":{"count":3.5})"), Command::kAdd,
       kInvalidConfig, "announce.count"},
      {"count negative", Conf("1.0.0", "{}", R"("announce":{"count":-1})"), Command::kAdd,
       kInvalidConfig, "announce.count"},
      {"count huge", Conf("1.0.0", "{}", R"("announce":{"count":18446744073709551615})"),
       Command::kAdd, kInvalidConfig, "announce.count"},
      {"interval zero", Conf("1.0.0", "{}", R"("announce":{"intervalMs":0})"), Command::kAdd,
       kInvalidConfig, "announce.intervalMs"},
      {"tail not an array", Conf("1.0.0", "{}", R"("announce":{"tailMs":1000})"), Command::kAdd,
       kInvalidConfig, "announce.tailMs"},
      {"tail with a string", Conf("1.0.0", "{}", R"("announce":{"tailMs":[1000,"5s"]})"),
       Command::kAdd, kInvalidConfig, "announce.tailMs[1]"},
      {"tail too late", Conf("1.0.0", "{}", R"("announce":{"tailMs":[600001]})"), Command::kAdd,
       kInvalidConfig, "announce.tailMs[0]"},
      {"tail empty", Conf("1.0.0", "{}", R"("announce":{"tailMs":[]})"), Command::kAdd, 0, ""},
      {"arpReply a string", Conf("1.0.0", "{}", R"("announce":{"arpReply":"true"})"), Command::kAdd,
       kInvalidConfig, "announce.arpReply"},
      {"ipv6 a number", Conf("1.0.0", "{}", R"("announce":{"ipv6":1})"), Command::kAdd,
       kInvalidConfig, "announce.ipv6"},
      {"gateway prime a string", Conf("1.0.0", "{}", R"("gateway":{"prime":"no"})"), Command::kAdd,
       kInvalidConfig, "gateway.prime"},
      {"gateway an array", Conf("1.0.0", "{}", R"("gateway":[])"), Command::kAdd, kInvalidConfig,
       "gateway"},
      {"probe timeout too long", Conf("1.0.0", "{}", R"("conflictProbe":{"timeoutMs":10000})"),
       Command::kAdd, kInvalidConfig, "conflictProbe.timeoutMs"},
      {"probe enabled a string", Conf("1.0.0", "{}", R"("conflictProbe":{"enabled":"on"})"),
       Command::kAdd, kInvalidConfig, "conflictProbe.enabled"},
      {"agentSocket a number", Conf("1.0.0", "{}", R"("agentSocket":5)"), Command::kAdd,
       kInvalidConfig, "agentSocket"},
      {"agentSocket too long",
       Conf("1.0.0", "{}", absl::StrCat(R"("agentSocket":"/)", std::string(120, 'a'), "\"")),
       Command::kAdd, kInvalidConfig, "agentSocket"},
      {"requireAgent a string", Conf("1.0.0", "{}", R"("requireAgent":"true")"), Command::kAdd,
       kInvalidConfig, "requireAgent"},
      {"envDir relative", Conf("1.0.0", "{}", R"("envDir":"env")"), Command::kAdd, kInvalidConfig,
       "envDir"},
      {"sysfsRoot relative", Conf("1.0.0", "{}", R"("sysfsRoot":"host/sys")"), Command::kAdd,
       kInvalidConfig, "sysfsRoot"},
      {"stateDir empty", Conf("1.0.0", "{}", R"("stateDir":"")"), Command::kAdd, kInvalidConfig,
       "stateDir"},
      {"logLevel unknown", Conf("1.0.0", "{}", R"("logLevel":"loud")"), Command::kAdd,
       kInvalidConfig, "logLevel"},
      {"bad keys also fail DEL", Conf("1.0.0", "", R"("requireAgent":1)"), Command::kDel,
       kInvalidConfig, "requireAgent"},
      {"gc attachments", Conf("1.1.0", "", R"("cni.dev/valid-attachments":[
        {"containerID":"a","ifname":"eth0"},{"containerID":"b","ifname":"net1"}])"),
       Command::kGc, 0, ""},
      {"gc attachments not an array", Conf("1.1.0", "", R"("cni.dev/valid-attachments":{})"),
       Command::kGc, kInvalidConfig, "valid-attachments"},
      {"gc attachment without id", Conf("1.1.0", "", R"("cni.dev/valid-attachments":[{}])"),
       Command::kGc, kInvalidConfig, "containerID"},
      {"gc attachment with a bad ifname",
       Conf("1.1.0", "", R"("cni.dev/valid-attachments":[{"containerID":"a","ifname":"a/b"}])"),
       Command::kGc, kInvalidConfig, "valid-attachments[0].ifname \"a/b\": contains '/'"},
  };
  for (const ConfigCase& c : cases) {
    auto config = ParseConfig(c.input, c.command);
    if (c.code == 0) {
      EXPECT_TRUE(config.ok()) << c.name << ": " << config.status();
    } else {
      ASSERT_FALSE(config.ok()) << c.name;
      EXPECT_EQ(CodeOf(config.status()), c.code) << c.name << ": " << config.status();
      EXPECT_NE(config.status().message().find(c.in_msg), absl::string_view::npos)
          << c.name << ": " << config.status();
    }
  }
}

TEST(ParseConfigTest, DefaultsMatchThePlanAndSchedule) {
  auto c = ParseConfig(Conf("1.0.0", kBridge10), Command::kAdd);
  ASSERT_TRUE(c.ok()) << c.status();
  const announce::Plan want;
  EXPECT_EQ(c->plan.schedule.fast_count, 3);
  EXPECT_EQ(c->plan.schedule.fast_interval, absl::Milliseconds(100));
  EXPECT_EQ(c->plan.schedule.tail,
            (std::vector<absl::Duration>{absl::Seconds(1), absl::Seconds(5)}));
  EXPECT_EQ(c->plan.arp_reply_form, false);
  EXPECT_EQ(c->plan.ipv6, true);
  EXPECT_EQ(c->plan.prime_gateway, true);
  EXPECT_EQ(c->plan.gateway_timeout, absl::Milliseconds(500));
  EXPECT_EQ(c->plan.conflict_probe, false);
  EXPECT_EQ(c->plan.conflict_timeout, absl::Milliseconds(200));
  EXPECT_EQ(c->agent_socket, "/run/fabric-agent/announce.sock");
  EXPECT_FALSE(c->require_agent);
  EXPECT_EQ(c->env_dir, "");
  EXPECT_EQ(c->state_dir, "/run/fabric-cni");
  EXPECT_FALSE(c->log_level.has_value());
  EXPECT_EQ(c->name, "pods");
  EXPECT_EQ(c->type, "fabric-cni");
  EXPECT_FALSE(c->valid_attachments.has_value());
}

TEST(ParseConfigTest, OurKeysMapOntoThePlan) {
  auto c = ParseConfig(Conf("1.1.0", kMacvlan, R"("announce":{"count":5,"intervalMs":50,
        "tailMs":[500,2000],"arpReply":true,"ipv6":false},"gateway":{"prime":false,
        "timeoutMs":300},"conflictProbe":{"enabled":true,"timeoutMs":150},
        "agentSocket":"/tmp/a.sock","requireAgent":true,"envDir":"/run/fabric-env",
        "stateDir":"/tmp/st","logLevel":"debug","runtimeConfig":{"mac":"x"})"),
                       Command::kAdd);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->plan.schedule.fast_count, 5);
  EXPECT_EQ(c->plan.schedule.fast_interval, absl::Milliseconds(50));
  EXPECT_EQ(c->plan.schedule.tail,
            (std::vector<absl::Duration>{absl::Milliseconds(500), absl::Seconds(2)}));
  EXPECT_TRUE(c->plan.arp_reply_form);
  EXPECT_FALSE(c->plan.ipv6);
  EXPECT_FALSE(c->plan.prime_gateway);
  EXPECT_EQ(c->plan.gateway_timeout, absl::Milliseconds(300));
  EXPECT_TRUE(c->plan.conflict_probe);
  EXPECT_EQ(c->plan.conflict_timeout, absl::Milliseconds(150));
  EXPECT_EQ(c->agent_socket, "/tmp/a.sock");
  EXPECT_TRUE(c->require_agent);
  EXPECT_EQ(c->env_dir, "/run/fabric-env");
  EXPECT_EQ(c->state_dir, "/tmp/st");
  EXPECT_EQ(c->log_level, LogLevel::kDebug);
  EXPECT_EQ(c->runtime_config.dump(), R"({"mac":"x"})");
}

TEST(ParseConfigTest, GcAttachments) {
  auto c = ParseConfig(Conf("1.1.0", "", R"("cni.dev/valid-attachments":[
        {"containerID":"a","ifname":"eth0"},{"containerID":"b","ifname":"net1"}])"),
                       Command::kGc);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->valid_attachments.has_value());
  ASSERT_EQ(c->valid_attachments->size(), 2u);
  EXPECT_EQ((*c->valid_attachments)[1].container_id, "b");
  EXPECT_EQ((*c->valid_attachments)[1].ifname, "net1");
}

// ---- prevResult: what to announce where ----

struct PrevCase {
  std::string name;
  std::string version;
  std::string prev;
  // "ifname [mac] sandbox: addr/len via gw, ..." per interface; or an error substring.
  std::vector<std::string> want;
  std::string error;
};

std::string Describe(const PodInterface& p) {
  std::vector<std::string> addrs;
  for (const auto& a : p.addresses) addrs.push_back(AddrText(a));
  return absl::StrCat(p.name, " [", p.mac, "] ", p.sandbox, ": ", absl::StrJoin(addrs, ", "));
}

TEST(PodInterfacesTest, Table) {
  const std::vector<PrevCase> cases = {
      {"bridge 1.0.0",
       "1.0.0",
       kBridge10,
       {"eth0 [0a:58:0a:58:00:05] /var/run/netns/cni-1234: 10.88.0.5/16 via 10.88.0.1, "
        "fd00:88::5/64 via fd00:88::1"},
       ""},
      {"bridge 0.4.0",
       "0.4.0",
       kBridge04,
       {"eth0 [0a:58:0a:58:00:05] /var/run/netns/cni-1234: 10.88.0.5/16 via 10.88.0.1"},
       ""},
      {"macvlan",
       "1.1.0",
       kMacvlan,
       {"eth0 [5e:8d:2b:00:11:22] /var/run/netns/pod: 192.168.10.7/24 via 192.168.10.1"},
       ""},
      {"sriov without mac", "1.1.0", kSriov, {"net1 [] /proc/4242/ns/net: 172.16.5.9/24"}, ""},
      {"ipvlan without index",
       "1.0.0",
       kIpvlan,
       {"eth0 [] /var/run/netns/x: 10.1.2.3/24 via 10.1.2.1"},
       ""},
      {"two pod interfaces",
       "1.0.0",
       kTwo,
       {"eth0 [] /n: 10.1.0.2/24", "net1 [] /n: 10.2.0.2/24"},
       ""},
      {"empty", "1.0.0", "{}", {}, ""},
      {"host side only",
       "1.0.0",
       R"({"interfaces":[{"name":"veth0"}],"ips":[
        {"interface":0,"address":"10.0.0.1/24"}]})",
       {},
       ""},
      {"ips without index and two pod interfaces",
       "1.0.0",
       R"({"interfaces":[
        {"name":"a","sandbox":"/n"},{"name":"b","sandbox":"/n"}],"ips":[
        {"address":"10.0.0.1/24"}]})",
       {"a [] /n: ", "b [] /n: "},
       ""},
      {"null ips and interfaces", "1.0.0", R"({"interfaces":null,"ips":null})", {}, ""},
      {"0.4.0 wrong version",
       "0.4.0",
       R"({"interfaces":[{"name":"eth0","sandbox":"/n"}],
        "ips":[{"version":"6","interface":0,"address":"10.0.0.1/24"}]})",
       {},
       "ips[0].version"},
      {"index out of range",
       "1.0.0",
       R"({"interfaces":[{"name":"eth0","sandbox":"/n"}],
        "ips":[{"interface":1,"address":"10.0.0.1/24"}]})",
       {},
       "ips[0].interface"},
      {"index negative",
       "1.0.0",
       R"({"interfaces":[{"name":"eth0","sandbox":"/n"}],
        "ips":[{"interface":-1,"address":"10.0.0.1/24"}]})",
       {},
       "ips[0].interface"},
      {"index a string",
       "1.0.0",
       R"({"interfaces":[{"name":"eth0","sandbox":"/n"}],
        "ips":[{"interface":"0","address":"10.0.0.1/24"}]})",
       {},
       "ips[0].interface"},
      {"index without interfaces",
       "1.0.0",
       R"({"ips":[{"interface":0,"address":"10.0.0.1/24"}]})",
       {},
       "ips[0].interface"},
      {"address without prefix",
       "1.0.0",
       R"({"ips":[{"address":"10.0.0.1"}]})",
       {},
       "ips[0].address"},
      {"address garbage", "1.0.0", R"({"ips":[{"address":"ten/8"}]})", {}, "ips[0].address"},
      {"prefix too long", "1.0.0", R"({"ips":[{"address":"10.0.0.1/33"}]})", {}, "ips[0].address"},
      {"prefix signed", "1.0.0", R"({"ips":[{"address":"10.0.0.1/+8"}]})", {}, "ips[0].address"},
      {"address missing", "1.0.0", R"({"ips":[{"gateway":"10.0.0.1"}]})", {}, "ips[0].address"},
      {"gateway family",
       "1.0.0",
       R"({"ips":[{"address":"10.0.0.1/8","gateway":"fd00::1"}]})",
       {},
       "ips[0].gateway"},
      {"interfaces an object", "1.0.0", R"({"interfaces":{}})", {}, "prevResult.interfaces"},
      {"interface name bad",
       "1.0.0",
       R"({"interfaces":[{"name":"a/b","sandbox":"/n"}]})",
       {},
       "interfaces[0].name"},
      {"interface a number", "1.0.0", R"({"interfaces":[1]})", {}, "interfaces[0]"},
      {"mac a number",
       "1.0.0",
       R"({"interfaces":[{"name":"eth0","mac":1,"sandbox":"/n"}]})",
       {},
       "interfaces[0].mac"},
  };
  for (const PrevCase& c : cases) {
    auto ifaces = PodInterfaces(Json::parse(c.prev), c.version);
    if (!c.error.empty()) {
      ASSERT_FALSE(ifaces.ok()) << c.name;
      EXPECT_EQ(CodeOf(ifaces.status()), kInvalidConfig) << c.name;
      EXPECT_NE(ifaces.status().message().find(c.error), absl::string_view::npos)
          << c.name << ": " << ifaces.status();
      continue;
    }
    ASSERT_TRUE(ifaces.ok()) << c.name << ": " << ifaces.status();
    std::vector<std::string> got;
    for (const auto& p : *ifaces) got.push_back(Describe(p));
    EXPECT_EQ(got, c.want) << c.name;
  }
}

TEST(ParseCidrTest, FamiliesAndLayout) {
  auto v4 = ParseCidr("10.1.2.3/24");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->family, AF_INET);
  EXPECT_EQ(v4->prefix_len, 24);
  EXPECT_EQ(v4->addr.s6_addr[0], 10);
  EXPECT_EQ(v4->addr.s6_addr[3], 3);
  EXPECT_EQ(v4->addr.s6_addr[4], 0);  // IPv4 in the first 4 bytes, the rest zero
  auto v6 = ParseCidr("fe80::1/64");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->family, AF_INET6);
  EXPECT_EQ(v6->addr.s6_addr[0], 0xfe);
  for (const char* bad : {"", "/", "1.2.3.4/", "1.2.3.4/-0", "::/129", "1.2.3.4/1000", "1.2.3.4 /8",
                          "::ffff:1.2.3.4.5/8"}) {
    EXPECT_FALSE(ParseCidr(bad).ok()) << bad;
  }
}

// ---- What the plugin prints ----

TEST(ResultJsonTest, EqualsPrevResultKeyForKey) {
  for (const char* prev : {kBridge10, kBridge04, kMacvlan, kSriov, kIpvlan, kTwo}) {
    const std::string version = Json::parse(prev)["cniVersion"].get<std::string>();
    auto c = ParseConfig(Conf(version, prev), Command::kAdd);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string out = ResultJson(*c);
    // ordered_json compares member order too.
    EXPECT_EQ(Json::parse(out), Json::parse(prev)) << out;
    EXPECT_EQ(out, Json::parse(prev).dump());
  }
}

TEST(ResultJsonTest, AddsCniVersionWhenPrevResultHasNone) {
  auto c = ParseConfig(Conf("1.0.0", R"({"ips":[]})"), Command::kAdd);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ResultJson(*c), R"({"ips":[],"cniVersion":"1.0.0"})");
}

TEST(ErrorJsonTest, Fields) {
  EXPECT_EQ(ErrorJson("1.0.0", Error(kInvalidConfig, "announce.count: must be an integer")),
            R"({"cniVersion":"1.0.0","code":7,"msg":"announce.count: must be an integer"})");
  EXPECT_EQ(ErrorJson("0.4.0", Error(kTryAgain, "agent busy", "retry")),
            R"({"cniVersion":"0.4.0","code":11,"msg":"agent busy","details":"retry"})");
  // Unknown versions answer in the newest one.
  EXPECT_EQ(ErrorJson("9.9.9", absl::InternalError("x")),
            R"({"cniVersion":"1.1.0","code":100,"msg":"x"})");
  // Bytes that are not UTF-8 do not break the writer.
  EXPECT_FALSE(ErrorJson("", Error(kDecodeFailure, "bad \xff byte")).empty());
  EXPECT_EQ(CodeOf(absl::InvalidArgumentError("x")), kInvalidConfig);
  EXPECT_EQ(CodeOf(absl::UnavailableError("x")), kTryAgain);
}

TEST(VersionJsonTest, ListsAllVersions) {
  EXPECT_EQ(VersionJson(),
            R"({"cniVersion":"1.1.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]})");
}

// A runaway writer's stdin is named as too large, not as bad JSON, and never echoed.
TEST(ParseConfigTest, StdinOverFourMiB) {
  std::string valid = Conf("1.0.0", kBridge10);
  // Valid JSON padded with whitespace: only the size is wrong.
  std::string big = valid + std::string(kMaxStdinBytes + 1 - valid.size(), ' ');
  ASSERT_EQ(big.size(), kMaxStdinBytes + 1);
  auto config = ParseConfig(big, Command::kAdd);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(CodeOf(config.status()), kDecodeFailure);
  EXPECT_EQ(config.status().message(), "stdin larger than 4 MiB");
  EXPECT_EQ(PeekVersion(big), "");
  // Exactly at the bound is still read.
  big.pop_back();
  EXPECT_TRUE(ParseConfig(big, Command::kAdd).ok());
}

TEST(ParseEnvTest, IfnameErrorsNameTheRuleAndEscapeTheInput) {
  auto env = ParseEnv(With(Full("ADD"), "CNI_IFNAME", std::string("fa0\x01\n")));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(CodeOf(env.status()), kInvalidEnv);
  EXPECT_EQ(env.status().message(), "CNI_IFNAME \"fa0\\x01\\n\": contains whitespace");
  env = ParseEnv(With(Full("ADD"), "CNI_COMMAND", std::string(100000, 'X')));
  ASSERT_FALSE(env.ok());
  EXPECT_LT(env.status().message().size(), 200u) << "the input is quoted as an excerpt";
}

TEST(PeekVersionTest, ReadsWhatItCan) {
  EXPECT_EQ(PeekVersion(R"({"cniVersion":"0.4.0"})"), "0.4.0");
  EXPECT_EQ(PeekVersion(R"({"cniVersion":4})"), "");
  EXPECT_EQ(PeekVersion("{"), "");
  EXPECT_EQ(PeekVersion(""), "");
}

// ---- podRouting ----

TEST(ParseConfigTest, PodRoutingDefaults) {
  auto c = ParseConfig(Conf("1.0.0", kBridge10), Command::kAdd);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->routing.mode, announce::RoutingConfig::Mode::kAuto);
  EXPECT_EQ(c->routing.table_first, 10000u);
  EXPECT_EQ(c->routing.table_last, 10999u);
  EXPECT_EQ(c->routing.rule_priority, 1000u);
}

TEST(ParseConfigTest, PodRoutingKeys) {
  auto c = ParseConfig(Conf("1.0.0", kBridge10,
                            R"("podRouting":{"mode":"on","tableRange":[300,301],
                               "rulePriority":500})"),
                       Command::kAdd);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->routing.mode, announce::RoutingConfig::Mode::kOn);
  EXPECT_EQ(c->routing.table_first, 300u);
  EXPECT_EQ(c->routing.table_last, 301u);
  EXPECT_EQ(c->routing.rule_priority, 500u);
  c = ParseConfig(Conf("1.0.0", kBridge10, R"("podRouting":{"mode":"off"})"), Command::kAdd);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->routing.mode, announce::RoutingConfig::Mode::kOff);
}

TEST(ParseConfigTest, PodRoutingBadValuesNameTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("podRouting":true)", "podRouting"},
      {R"("podRouting":{"mode":"yes"})", "podRouting.mode"},
      {R"("podRouting":{"mode":1})", "podRouting.mode"},
      {R"("podRouting":{"tableRange":[5]})", "podRouting.tableRange"},
      {R"("podRouting":{"tableRange":[0,10]})", "podRouting.tableRange[0]"},
      {R"("podRouting":{"tableRange":[20,10]})", "podRouting.tableRange[1]"},
      {R"("podRouting":{"tableRange":[200,260]})", "podRouting.tableRange"},
      {R"("podRouting":{"tableRange":[1,"2"]})", "podRouting.tableRange[1]"},
      {R"("podRouting":{"rulePriority":32766})", "podRouting.rulePriority"},
      {R"("podRouting":{"rulePriority":0})", "podRouting.rulePriority"},
  };
  for (const auto& [extra, key] : cases) {
    auto c = ParseConfig(Conf("1.0.0", kBridge10, extra), Command::kAdd);
    ASSERT_FALSE(c.ok()) << extra;
    EXPECT_EQ(CodeOf(c.status()), kInvalidConfig) << extra;
    EXPECT_NE(c.status().message().find(key), absl::string_view::npos)
        << extra << ": " << c.status().message();
  }
}

TEST(PodInterfacesTest, RoutesGoToTheInterfaceOfTheirGateway) {
  const Json prev = Json::parse(R"({"interfaces":[{"name":"net1","sandbox":"/x"},
      {"name":"net2","sandbox":"/x"}],
      "ips":[{"address":"10.50.0.11/24","gateway":"10.50.0.1","interface":0},
             {"address":"10.60.0.12/24","interface":1}],
      "routes":[{"dst":"10.99.0.0/16","gw":"10.60.0.1"},{"dst":"10.98.0.0/16"},
                {"dst":"10.97.0.0/16","gw":"192.0.2.1"}]})");
  auto pods = PodInterfaces(prev, "1.0.0");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_TRUE((*pods)[0].routes.empty());
  ASSERT_EQ((*pods)[1].routes.size(), 1u);
  EXPECT_EQ((*pods)[1].routes[0].dst_len, 16);
  auto bad = PodInterfaces(Json::parse(R"({"routes":[{"dst":"10.0.0.0"}]})"), "1.0.0");
  EXPECT_FALSE(bad.ok());
  bad = PodInterfaces(Json::parse(R"({"routes":[{"dst":"10.0.0.0/8","gw":"fd00::1"}]})"), "1.0.0");
  EXPECT_FALSE(bad.ok());
}

// fabric-cni(8) documents exactly keys ParseConfig reads: each, given a value of no valid type,
// fails with code 7 naming it (a key the parser does not read would be ignored).
TEST(ManPageTest, EveryDocumentedKeyIsRead) {
  ASSERT_GT(ConfigKeys().size(), 10u);
  for (const ConfigKey& k : ConfigKeys()) {
    Json conf = {{"cniVersion", "1.0.0"}, {"name", "n"}, {"type", "fabric-cni"}};
    Json* at = &conf;
    for (absl::string_view part : absl::StrSplit(k.key, '.')) at = &(*at)[std::string(part)];
    *at = Json{{"not", "a valid value"}};
    auto got = ParseConfig(conf.dump(), Command::kDel);
    ASSERT_FALSE(got.ok()) << k.key;
    EXPECT_EQ(CodeOf(got.status()), kInvalidConfig) << k.key;
    EXPECT_EQ(got.status().message().substr(0, std::string(k.key).size() + 1),
              absl::StrCat(k.key, ":"));
  }
}

}  // namespace
}  // namespace fabric::cni
