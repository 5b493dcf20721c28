// metrics_render SYSFS PROCFS: discovers the host below the two roots and prints its metrics as
// a scrape of /metrics would return them. For trying the metrics on an example host
// (fabric-mkhost NAME DIR; metrics_render DIR/sys DIR/proc) and for checking the text with
// another parser in the tests. Exit 0; 1 when samples were dropped (a bug); 2 usage; 3 when
// the host cannot be read.
#include <cstdio>
#include <string>

#include "agent/hostfs/host_fs.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/publish/metrics/exposition.h"
#include "agent/publish/metrics/host_metrics.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: metrics_render SYSFS PROCFS\n");
    return 2;
  }
  fabric::HostFsImpl sys(argv[1]), proc(argv[2]);
  auto host = fabric::Discover(sys, proc);
  if (!host.ok()) {
    std::fprintf(stderr, "metrics_render: %s\n", std::string(host.status().message()).c_str());
    return 3;
  }
  fabric::metrics::Exposition out;
  fabric::metrics::AppendHostMetrics(*host, sys, &out);
  const std::string text = out.Render();
  std::fwrite(text.data(), 1, text.size(), stdout);
  for (const std::string& why : out.drop_reasons()) {
    std::fprintf(stderr, "metrics_render: dropped: %s\n", why.c_str());
  }
  return out.dropped() == 0 ? 0 : 1;
}
