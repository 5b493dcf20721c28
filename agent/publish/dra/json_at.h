// Reads of the API server's JSON that never throw: a missing key or a value of another type is
// "absent" (nullptr, "" or 0), which the callers turn into their own errors or defaults.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace fabric::dra {

inline const nlohmann::json* JsonAt(const nlohmann::json& j,
                                    std::initializer_list<const char*> path) {
  const nlohmann::json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

inline std::string JsonString(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* at = JsonAt(j, path);
  return at != nullptr && at->is_string() ? at->get<std::string>() : "";
}

inline int64_t JsonInt(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* at = JsonAt(j, path);
  return at != nullptr && at->is_number_integer() ? at->get<int64_t>() : 0;
}

}  // namespace fabric::dra
