// Text from the wire made safe for logs, labels and JSON: switches put anything in their names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fabric::neighbors {

// `raw` with trailing NULs dropped (some switches NUL-terminate), printable ASCII kept and every
// other byte (and the backslash) escaped as \xNN, cut to at most `cap` characters without
// splitting an escape.
std::string PrintableText(std::string_view raw, size_t cap);

// Whether `raw` (trailing NULs dropped) is non-empty printable ASCII.
bool IsPrintable(std::string_view raw);

// "aa:bb:cc" (lowercase, colon-separated), at most `cap` characters.
std::string HexBytes(std::string_view raw, size_t cap);

// FNV-1a 64 (the published offset basis and prime): a stable hash for label values.
uint64_t Fnv1a64(std::string_view bytes);

// The byte at `at` of a frame or MAD (the caller has checked the length).
inline uint8_t U8(std::string_view b, size_t at) { return static_cast<uint8_t>(b[at]); }

}  // namespace fabric::neighbors
