#include "agent/fabricctl/table.h"

#include <algorithm>

namespace fabric {

size_t DisplayWidth(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

std::string Table(const Rows& rows, bool headers, std::string_view indent,
                  const std::vector<bool>& right) {
  const size_t first = headers ? 0 : 1;
  std::vector<size_t> width;
  for (size_t r = first; r < rows.size(); ++r) {
    const auto& row = rows[r];
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], DisplayWidth(row[i]));
  }
  std::string out;
  for (size_t r = first; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - DisplayWidth(row[i]), ' ');
      const bool to_right = i < right.size() && right[i];
      line += to_right ? pad + row[i] : row[i];
      if (i + 1 < row.size()) line += to_right ? "  " : pad + "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Clip(std::string_view s, size_t width, const TableStyle& style) {
  if (style.wide || width == 0 || DisplayWidth(s) <= width) return std::string(s);
  std::string out;
  size_t chars = 0;
  for (char c : s) {
    const bool starts = (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    if (starts && ++chars == width) break;
    out += c;
  }
  return out + "…";
}

}  // namespace fabric
