#include "agent/fabric/neighbors/text.h"

namespace fabric::neighbors {
namespace {

std::string_view TrimNuls(std::string_view raw) {
  while (!raw.empty() && raw.back() == '\0') raw.remove_suffix(1);
  return raw;
}

bool Printable(char c) { return c >= 0x20 && c <= 0x7e; }

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

std::string PrintableText(std::string_view raw, size_t cap) {
  raw = TrimNuls(raw);
  std::string out;
  out.reserve(raw.size() < cap ? raw.size() : cap);
  for (char c : raw) {
    const auto b = static_cast<uint8_t>(c);
    if (Printable(c) && c != '\\') {
      if (out.size() + 1 > cap) break;
      out.push_back(c);
    } else {
      if (out.size() + 4 > cap) break;
      out += {'\\', 'x', kHex[b >> 4], kHex[b & 0xf]};
    }
  }
  return out;
}

bool IsPrintable(std::string_view raw) {
  raw = TrimNuls(raw);
  if (raw.empty()) return false;
  for (char c : raw) {
    if (!Printable(c)) return false;
  }
  return true;
}

std::string HexBytes(std::string_view raw, size_t cap) {
  std::string out;
  for (char c : raw) {
    const auto b = static_cast<uint8_t>(c);
    const size_t need = out.empty() ? 2 : 3;
    if (out.size() + need > cap) break;
    if (!out.empty()) out.push_back(':');
    out += {kHex[b >> 4], kHex[b & 0xf]};
  }
  return out;
}

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace fabric::neighbors
