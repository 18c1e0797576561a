// Search tables of the lattice i-quant quantizers (internal to quant/): for each grid, the lattice
// coordinates of its points, a map from a point's packed coordinates to its grid index, and for the
// points off the grid the list of nearest grid points to try instead. They are ggml's
// iq2xs_init_impl / iq3xs_init_impl tables (same grids, same neighbour lists in the same order), built
// from the grids of quant/iq_grids.h on first use, once per process (std::call_once), so the row
// quantizers may run on several threads.
#pragma once

#include <cstdint>
#include <vector>

namespace tmill::kquant {

enum LatticeId : int { kLatIQ2XXS = 0, kLatIQ2XS, kLatIQ2S, kLatIQ1S, kLatIQ3XXS, kLatIQ3S, kLatCount };

struct Lattice {
  int group = 8;  // elements per grid point (8, or 4 for the IQ3 grids)
  int bits = 2;   // bits per coordinate in a packed index (2, or 3 for the IQ3 grids)
  // Coordinate l (0, 1, 2, ...) of element i of grid point j at level[group * j + i]; the point the
  // search compares with is 2 * l + 1 (ggml's grid bytes).
  std::vector<uint8_t> level;
  // Packed coordinates u (coordinate i in bits [bits * i, bits * (i + 1))) -> grid index, or, off the
  // grid, -(1 + position in `lists` of u's neighbour list: the count n, then n grid indices).
  std::vector<int32_t> map;
  std::vector<uint16_t> lists;

  const uint8_t* point(int j) const { return level.data() + group * j; }
  const uint16_t* neighbours(uint32_t u) const { return lists.data() + (-map[u] - 1); }
};

// The tables of one grid, built on the first call.
const Lattice& lattice(LatticeId id);

// Grid point among `nb` (a neighbour list) nearest to xval in the metric sum w * (scale * (2l+1) - x)^2
// (ggml's iq2_find_best_neighbour / iq3_find_best_neighbour); its coordinates go to L[0..group).
int nearest_neighbour(const Lattice& lat, const uint16_t* nb, const float* xval, const float* w, float scale,
                      int8_t* L);

}  // namespace tmill::kquant
