#include "agent/publish/metrics/exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"

namespace fabric::metrics {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF), as Prometheus requires
// of label values and HELP text.
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::string SampleValue::Format() const {
  switch (kind_) {
    case Kind::kInt:
      return absl::StrCat(i_);
    case Kind::kUint:
      return absl::StrCat(u_);
    case Kind::kDouble:
      break;
  }
  if (std::isnan(d_)) return "NaN";
  if (std::isinf(d_)) return d_ > 0 ? "+Inf" : "-Inf";
  // Integral doubles below 2^63 convert to int64 exactly: print every digit.
  if (d_ == std::trunc(d_) && std::fabs(d_) < 9223372036854775808.0) {
    return absl::StrCat(static_cast<int64_t>(d_));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d_);
  if (ec != std::errc()) return "NaN";  // Not reached: 64 bytes hold any double.
  return std::string(buf, end);
}

bool Exposition::IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(IsAlpha(c) || c == '_' || c == ':' || (i > 0 && IsDigit(c)))) return false;
  }
  return true;
}

bool Exposition::IsValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(IsAlpha(c) || c == '_' || (i > 0 && IsDigit(c)))) return false;
  }
  return true;
}

void Exposition::Gauge(std::string_view name, std::string_view help, const Labels& labels,
                       SampleValue value) {
  Add(Type::kGauge, name, help, labels, value);
}

void Exposition::Counter(std::string_view name, std::string_view help, const Labels& labels,
                         SampleValue value) {
  Add(Type::kCounter, name, help, labels, value);
}

void Exposition::Drop(std::string_view name, std::string_view why) {
  ++dropped_;
  if (drop_reasons_.size() < kMaxDropReasons) {
    std::string shown(name.substr(0, 200));
    if (!IsUtf8(shown)) shown = "(not UTF-8)";
    drop_reasons_.push_back(absl::StrCat(shown, ": ", Av(why)));
  }
}

void Exposition::Add(Type type, std::string_view name, std::string_view help, const Labels& labels,
                     SampleValue value) {
  if (!IsValidMetricName(name)) return Drop(name, "invalid metric name");
  constexpr std::string_view kTotal = "_total";
  if (type == Type::kCounter &&
      (name.size() <= kTotal.size() || name.substr(name.size() - kTotal.size()) != kTotal)) {
    return Drop(name, "counter name must end in _total");
  }
  if (!IsUtf8(help)) return Drop(name, "HELP text is not UTF-8");
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& [label, label_value] = labels[i];
    if (!IsValidLabelName(label)) {
      return Drop(name, absl::StrCat("invalid label name \"", Av(label.substr(0, 100)), "\""));
    }
    for (size_t j = 0; j < i; ++j) {
      if (labels[j].first == label) {
        return Drop(name, absl::StrCat("label \"", label, "\" given twice"));
      }
    }
    if (!IsUtf8(label_value)) {
      return Drop(name, absl::StrCat("value of label \"", label, "\" is not UTF-8"));
    }
  }
  auto it = family_index_.find(std::string(name));
  if (it != family_index_.end() && families_[it->second].type != type) {
    return Drop(name, "metric name already used with another type");
  }

  // The series' identity: the name and its labels in a fixed order (Prometheus ignores order).
  Labels sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  std::string key(name);
  for (const auto& [label, label_value] : sorted) {
    absl::StrAppend(&key, " ", label.size(), ":", label, label_value.size(), ":", label_value);
  }
  if (!series_.insert(std::move(key)).second) return;  // Repeated series: the first one stays.

  if (it == family_index_.end()) {
    it = family_index_.emplace(std::string(name), families_.size()).first;
    families_.push_back(Family{std::string(name), std::string(help), type, {}});
  }
  std::string line(name);
  if (!labels.empty()) {
    line.push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) line.push_back(',');
      absl::StrAppend(&line, labels[i].first, "=\"");
      AppendEscaped(&line, labels[i].second, /*quote=*/true);
      line.push_back('"');
    }
    line.push_back('}');
  }
  absl::StrAppend(&line, " ", value.Format());
  families_[it->second].lines.push_back(std::move(line));
  ++samples_;
}

std::string Exposition::Render() const {
  std::string out;
  for (const Family& f : families_) {
    if (!f.help.empty()) {
      absl::StrAppend(&out, "# HELP ", f.name, " ");
      AppendEscaped(&out, f.help, /*quote=*/false);
      out.push_back('\n');
    }
    absl::StrAppend(&out, "# TYPE ", f.name, f.type == Type::kCounter ? " counter\n" : " gauge\n");
    for (const std::string& line : f.lines) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace fabric::metrics
