// Kubernetes label syntax (apimachinery's IsQualifiedName / IsValidLabelValue): one home for
// the NFD labels and the switch names that become label values.
#pragma once

#include <string_view>

namespace fabric {

// A value: empty, or at most 63 characters of [A-Za-z0-9._-] that start and end with a letter or
// digit. A key: an optional DNS-subdomain prefix (at most 253 characters, lower-case labels of
// [a-z0-9-] separated by dots) and "/", then a name with the rules of a non-empty value.
bool IsValidLabelValue(std::string_view value);
bool IsValidLabelKey(std::string_view key);
// An RFC 1123 subdomain, as object and node names are: at most 253 characters, lower-case labels
// of [a-z0-9-] (alphanumeric at both ends, at most 63) separated by dots.
bool IsDnsSubdomain(std::string_view s);

}  // namespace fabric
