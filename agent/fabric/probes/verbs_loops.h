// perftest's measurement loops on connected RC QPs: write/send/read bandwidth and latency.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {

// The client's loop of the test. Every wait is bounded by `timeout` without progress and by
// `cancel`; `watch`, the control connection, is polled for a peer that gave up (none: null).
// `stamp_posts`: bandwidth tests record each post's time (Measurement::post_ns).
absl::StatusOr<Measurement> RunVerbsClient(VerbsResources& verbs, absl::Duration timeout,
                                           const Canceller* cancel, const Channel* watch,
                                           bool stamp_posts = false);
// Stock perftest's write_lat and send_lat ping-pongs (run_iter_lat_write, run_iter_lat_send),
// either side; the time before each post in Measurement::posts.
absl::StatusOr<Measurement> RunPerftestLat(VerbsResources& verbs, bool server,
                                           absl::Duration timeout, const Canceller* cancel);
// perftest's --perform_warm_up (perform_warm_up): a tx depth of signalled messages on each QP,
// all completed, before the timed run.
absl::Status PerftestWarmUp(VerbsResources& verbs, absl::Duration timeout, const Canceller* cancel);
// Stock perftest's send_bw server (run_iter_bw_server): receives the client's messages (its
// iterations on every QP, or for its duration from the first message) and times them from the
// first receive to the last (Measurement::first_ns, last_ns, messages).
absl::StatusOr<Measurement> RunPerftestSendBwServer(VerbsResources& verbs, absl::Duration timeout,
                                                    const Canceller* cancel);
// Stock perftest's send_bw -b (run_iter_bi), either side: sends and receives at once, the
// server's sends after its first receive. By iterations the stamps are the sends' (as
// RunVerbsClient's with stamp_posts); with -D `messages` counts the window's sends and receives.
absl::StatusOr<Measurement> RunPerftestBi(VerbsResources& verbs, bool server,
                                          absl::Duration timeout, const Canceller* cancel);
// The server's part until its loop ends (write_bw, read_bw and read_lat leave its CPU out); the
// client's Done on `ch` ends send_bw's receive loop.
absl::Status RunVerbsServer(VerbsResources& verbs, absl::Duration timeout, const Canceller* cancel,
                            const Channel* watch, Channel& ch);

}  // namespace fabric::probes
