// How a 2-D tile lies in shared memory. Plain C++, so that CPU tests check it exhaustively; the
// lowering emits the same index arithmetic from these parameters.
#ifndef TESSERA_COMPILER_LAYOUT_SWIZZLEDTILE_H
#define TESSERA_COMPILER_LAYOUT_SWIZZLEDTILE_H

#include <cstdint>

namespace tessera::layout {

/// Row-major in 16-byte chunks; rows wider than 128 bytes are split into 128-byte-wide atoms
/// stored one after another ([cols / atomColumns][rows][atomColumns]); within an atom, chunk c
/// of row r moves to chunk c ^ phase(r), phase(r) = (r / rowsPerPhase) % phases. That is
/// Hopper's 128-, 64- or 32-byte swizzle of the atom's row width, so ldmatrix (8 rows of one
/// chunk) and 16-byte vector accesses hit distinct banks and wgmma reads a stage through a
/// matrix descriptor. Tiles that are not 2-D or have rows under 32 bytes are plain row-major.
/// Sizes are powers of two.
struct SwizzledTile {
  SwizzledTile(int64_t rows, int64_t cols, int64_t elementBytes);

  int64_t rows, cols, elementBytes;
  bool swizzled;
  int64_t chunkElements; ///< elements per 16-byte chunk
  int64_t atomColumns;   ///< columns of one atom: all of them, or 128 bytes' worth
  int64_t rowsPerPhase;  ///< consecutive rows with the same phase
  int64_t phases;        ///< distinct phases (chunks an atom row has, at most 8)

  /// Element offset of (row, col) from the tile's start.
  int64_t index(int64_t row, int64_t col) const;
};

} // namespace tessera::layout

#endif // TESSERA_COMPILER_LAYOUT_SWIZZLEDTILE_H
