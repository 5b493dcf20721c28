#include "agent/fabric/perftest/options.h"

#include "agent/fabric/perftest/wire.h"

namespace fabric::probes {

namespace pt = ::fabric::perftest;

int32_t PerftestVerb(TestKind test) {
  switch (VerbOf(test)) {
    case Verb::kSend:
      return pt::kVerbSend;
    case Verb::kRead:
      return pt::kVerbRead;
    case Verb::kWrite:
      break;
  }
  return pt::kVerbWrite;
}

}  // namespace fabric::probes
