// fabric-agent: start-up as ordered named steps over one state object, a poll loop that turns
// netlink and uevent messages into rescans, and a teardown that always runs in reverse order.
#pragma once

#include "agent/daemon/lifecycle/agent_options.h"

namespace fabric {

// Exit codes: 0 after SIGTERM/SIGINT, 1 when start-up fails (socket taken, sysfs unreadable),
// 2 for a bad config file or a hand-off socket another process serves.
enum AgentExit { kAgentOk = 0, kAgentFailed = 1, kAgentBadConfig = 2 };

// Runs until SIGTERM or SIGINT. Must be called before any other thread exists: it blocks
// SIGTERM, SIGINT and SIGHUP so that every thread (gRPC's too) leaves them to the loop.
int RunAgent(const AgentOptions& options, Notifier* notifier);

}  // namespace fabric
