// fabricctl's tables: columns aligned whatever the names' lengths, an optional header row, and
// cells clipped to a width where a default view must fit 100 columns.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fabric {

// How a command prints its tables: --wide (every column, nothing clipped) and --no-headers.
struct TableStyle {
  bool wide = false;
  bool headers = true;
};

// The default views fit this many columns on the example hosts.
inline constexpr size_t kDefaultWidth = 100;

using Rows = std::vector<std::vector<std::string>>;

// `rows` as columns two spaces apart, each line after `indent`, trailing spaces trimmed; columns
// are left-aligned, those `right` marks right-aligned (numbers). The first row is the header:
// left out when `headers` is false.
std::string Table(const Rows& rows, bool headers = true, std::string_view indent = "",
                  const std::vector<bool>& right = {});

// Characters on screen: UTF-8 code points (the tables hold ASCII and "…").
size_t DisplayWidth(std::string_view s);

// `s` cut to `width` characters, the last being "…" when cut; unchanged in the wide view.
std::string Clip(std::string_view s, size_t width, const TableStyle& style);

}  // namespace fabric
