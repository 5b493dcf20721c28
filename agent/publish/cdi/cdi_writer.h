// The CDI spec file in its directory (/var/run/cdi), kept as a KeptFile: runtimes re-reading the
// directory never see a half-written spec.
#pragma once

#include <string>

#include "agent/common/kept_file.h"

namespace fabric::cdi {

// Where runtimes look (podman 4.3 only here and in /etc/cdi), and the file: "<vendor>-<class>".
inline constexpr char kDefaultDir[] = "/var/run/cdi";
inline constexpr char kSpecFile[] = "fabric.io-rdma.json";

class SpecWriter : public KeptFile {
 public:
  // `dir`: the CDI directory; the file is kSpecFile in it.
  explicit SpecWriter(std::string dir) : KeptFile(std::move(dir), kSpecFile, "CDI") {}
};

}  // namespace fabric::cdi
