// A plain HTTP GET and Prometheus samples, for tests that scrape the agent's metrics.
#pragma once

#include <string>
#include <utility>

namespace fabric::testing {

// GET http://127.0.0.1:port/PATH; {status ("200 OK"), body}.
std::pair<std::string, std::string> HttpGet(int port, const std::string& path);

// The value of the sample `series` (name and labels exactly as rendered), or -1 when absent.
double Sample(const std::string& text, const std::string& series);

}  // namespace fabric::testing
