// Natural order of device and interface names: runs of digits compare as numbers, so "mlx5_2"
// sorts before "mlx5_10" (the order operators expect, and the one NCCL's prefix trap ignores).
#pragma once

#include <string_view>

namespace fabric {

// A strict total order: equal numbers with more leading zeros sort after ("x1" < "x01").
bool NaturalLess(std::string_view a, std::string_view b);

}  // namespace fabric
