// A writer of the Prometheus text exposition format, version 0.0.4: what a scrape of /metrics
// returns (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
//   Exposition out;
//   out.Gauge("fabric_rdma_devices", "RDMA devices.", {}, 9);
//   out.Counter("fabric_port_link_downed_total", "Link downs.", {{"device", "mlx5_1"}}, 0);
//   std::string text = out.Render();
//
// Samples are collected first and rendered at the end, so callers may add them in any order: each
// family (metric name) is rendered once, with its HELP and TYPE lines, followed by all of its
// samples. A sample that would make the output invalid (a bad metric or label name, a counter not
// named *_total, a name used with two types, a label name given twice, a label value that is not
// UTF-8) is a programming error: it is dropped and counted (dropped(), drop_reasons()), never
// rendered and never fatal.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace fabric::metrics {

// A sample's labels, in the order they are rendered.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A sample value: a double, or an integer kept exact (a 64-bit counter is printed digit for
// digit, not rounded to a double's 53 bits).
class SampleValue {
 public:
  SampleValue(double v) : kind_(Kind::kDouble), d_(v) {}  // NOLINT: implicit on purpose
  template <std::integral T>
  SampleValue(T v) {  // NOLINT: implicit on purpose
    if constexpr (std::is_signed_v<T>) {
      kind_ = Kind::kInt;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = Kind::kUint;
      u_ = static_cast<uint64_t>(v);
    }
  }

  // The value as the text format spells it: integers exactly ("123456789012"); integral doubles
  // below 2^63 in magnitude the same way; other doubles in the shortest form that reads back
  // as the same double ("0.5", "1e+20"); "NaN", "+Inf", "-Inf".
  std::string Format() const;

 private:
  enum class Kind { kDouble, kInt, kUint };
  Kind kind_ = Kind::kDouble;
  double d_ = 0;
  int64_t i_ = 0;
  uint64_t u_ = 0;
};

class Exposition {
 public:
  // A gauge sample of family `name`. `help` is the family's HELP text (the first one given for a
  // family is kept).
  void Gauge(std::string_view name, std::string_view help, const Labels& labels, SampleValue value);
  // A counter sample; `name` must end in "_total", and the TYPE line names the family with it
  // (`# TYPE fabric_x_total counter`), as client_golang writes format 0.0.4.
  void Counter(std::string_view name, std::string_view help, const Labels& labels,
               SampleValue value);

  // The text: families in the order they were first added, each as
  //   # HELP <name> <help>            (left out when the help text is empty)
  //   # TYPE <name> gauge|counter
  //   <name>{<label>="<value>",...} <value>
  // with samples in the order they were added. A series (name and labels) given again keeps its
  // first value. Label values escape \ " and newline; HELP escapes \ and newline. Empty when
  // nothing was added.
  std::string Render() const;

  // Samples rendered (series kept).
  size_t samples() const { return samples_; }
  // Samples dropped as programming errors (see above); a repeated series is not counted here.
  size_t dropped() const { return dropped_; }
  // Why, for the first kMaxDropReasons drops, e.g. "fabric_x: counter name must end in _total".
  const std::vector<std::string>& drop_reasons() const { return drop_reasons_; }
  static constexpr size_t kMaxDropReasons = 16;

  // Syntax of names, as the format defines them. A metric name is [a-zA-Z_:][a-zA-Z0-9_:]*; a
  // label name [a-zA-Z_][a-zA-Z0-9_]* that does not start with "__" (reserved for Prometheus).
  static bool IsValidMetricName(std::string_view name);
  static bool IsValidLabelName(std::string_view name);

 private:
  enum class Type { kGauge, kCounter };
  struct Family {
    std::string name;
    std::string help;
    Type type;
    std::vector<std::string> lines;  // Rendered sample lines, without the trailing newline.
  };

  void Add(Type type, std::string_view name, std::string_view help, const Labels& labels,
           SampleValue value);
  void Drop(std::string_view name, std::string_view why);

  std::vector<Family> families_;
  std::unordered_map<std::string, size_t> family_index_;
  std::unordered_set<std::string> series_;  // name{labels} of every sample kept.
  size_t samples_ = 0;
  size_t dropped_ = 0;
  std::vector<std::string> drop_reasons_;
};

}  // namespace fabric::metrics
