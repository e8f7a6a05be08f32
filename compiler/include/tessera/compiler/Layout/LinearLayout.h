// Linear layouts: where each element of a tile lives among a CTA's registers, lanes and warps.
//
// A layout maps the bits of a (register, lane, warp) index to tensor coordinates, linearly over
// GF(2): coords(r, l, w) is the XOR of the bases of the set bits of r, l and w. With power-of-two
// shapes this one representation covers blocked layouts, their slices (reduction results),
// broadcasts (zero bases: replication) and, later, mma and swizzled shared layouts; conversions
// between any two are decided by comparing bases. Plain C++ so that the CPU tests can check it
// exhaustively.
#ifndef TESSERA_COMPILER_LAYOUT_LINEARLAYOUT_H
#define TESSERA_COMPILER_LAYOUT_LINEARLAYOUT_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera::layout {

using Coord = std::vector<int64_t>;
using Bases = std::vector<Coord>;

class LinearLayout {
public:
  LinearLayout(Coord shape, Bases registers, Bases lanes, Bases warps);

  /// A blocked layout: each thread holds sizePerThread consecutive elements per dimension,
  /// threadsPerWarp and warpsPerCTA tile the tensor in `order` (fastest dimension first);
  /// the tile repeats in registers where the tensor is larger, and threads hold replicas
  /// where it is smaller. Every size must be a power of two.
  static LinearLayout blocked(const Coord &shape, const std::vector<int> &sizePerThread,
                              const std::vector<int> &threadsPerWarp,
                              const std::vector<int> &warpsPerCTA, const std::vector<int> &order);

  /// The registers of mma.sync m16n8k16 over a [rows, cols] tile split over wm x wn warps:
  /// the accumulator (opIdx -1), operand A [M, K] (0) or operand B [K, N] (1). Instruction
  /// tiles repeat in registers across each warp's part; warps split M first (a warpgroup's 4
  /// warps hold 64 rows of one column slice), then N; an operand is shared by the warps along
  /// the other axis.
  static LinearLayout mma(const Coord &shape, unsigned wm, unsigned wn, int opIdx);

  const Coord &shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const Bases &registers() const { return registers_; }
  const Bases &lanes() const { return lanes_; }
  const Bases &warps() const { return warps_; }
  int64_t numRegisters() const { return int64_t(1) << registers_.size(); }
  int64_t numLanes() const { return int64_t(1) << lanes_.size(); }
  int64_t numWarps() const { return int64_t(1) << warps_.size(); }

  /// How many consecutive registers hold consecutive elements along `dim` (a vector in memory
  /// where `dim` is contiguous), at most `limit`, with every other basis moving whole runs.
  int64_t contiguousRegisters(int dim, int64_t limit) const;

  /// The coordinates of register `reg` of lane `lane` in warp `warp`.
  Coord apply(int64_t reg, int64_t lane, int64_t warp) const;

  /// The layout after `map` (a GF(2)-linear map of coordinates, e.g. a transpose, a reshape, a
  /// projection) sends every coordinate into a tensor of `shape`. Register bases that become
  /// zero are dropped: they would only repeat a register.
  LinearLayout map(const Coord &shape, const std::function<Coord(const Coord &)> &fn) const;

  /// The layout of the tensor with dimension `dim` removed (what a reduction along `dim` leaves).
  LinearLayout sliced(int dim) const;

  /// If every element this layout places in a thread is already in that thread under `source`
  /// (same shape), the source register holding each of this layout's registers.
  std::optional<std::vector<int64_t>> registersFrom(const LinearLayout &source) const;

  bool operator==(const LinearLayout &other) const;
  bool operator!=(const LinearLayout &other) const { return !(*this == other); }
  std::string str() const;

private:
  Coord shape_;
  Bases registers_, lanes_, warps_;
};

/// Coordinate maps of the tile shape ops, from a result coordinate to the source coordinate
/// it reads; each is GF(2)-linear for power-of-two shapes.
Coord broadcastSource(const Coord &sourceShape, const Coord &resultCoord);
Coord expandDimsSource(int axis, const Coord &resultCoord);
Coord transSource(const std::vector<int> &order, const Coord &resultCoord);
Coord reshapeSource(const Coord &sourceShape, const Coord &resultShape, const Coord &resultCoord);

/// Row-major linear index of `coord` in `shape`.
int64_t linearIndex(const Coord &shape, const Coord &coord);

} // namespace tessera::layout

#endif // TESSERA_COMPILER_LAYOUT_LINEARLAYOUT_H
