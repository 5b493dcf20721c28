#include "agent/common/k8s_label.h"

namespace fabric {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// A label name or non-empty value: [A-Za-z0-9._-]{1,63}, alphanumeric at both ends.
bool IsValidName(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

// RFC 1123 subdomain: lower-case labels of [a-z0-9-], alphanumeric at both ends, dot-separated.
bool IsValidSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (label.empty() || label.size() > 63) return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

bool IsValidLabelValue(std::string_view value) { return value.empty() || IsValidName(value); }

bool IsValidLabelKey(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return IsValidName(key);
  return IsValidSubdomain(key.substr(0, slash)) && IsValidName(key.substr(slash + 1));
}

bool IsDnsSubdomain(std::string_view s) { return IsValidSubdomain(s); }

}  // namespace fabric
