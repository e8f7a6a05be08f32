// layout::SwizzledTile, exhaustively: every shared tile shape the kernels use is a bijection
// onto its elements, keeps 16-byte chunks whole, lets ldmatrix and 16-byte accesses hit
// distinct banks, and is Hopper's 128/64/32-byte swizzle of its atoms (what wgmma's matrix
// descriptors assume, checked on the H200 in issue 11's session).
#include "tessera/compiler/Layout/SwizzledTile.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace {

using tessera::layout::SwizzledTile;

struct Shape {
  int64_t rows, cols, bytes;
};

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (int64_t bytes : {1, 2, 4, 8})
    for (int64_t rows = 1; rows <= 256; rows *= 2)
      for (int64_t cols = 1; cols * bytes <= 1024; cols *= 2)
        all.push_back({rows, cols, bytes});
  return all;
}

TEST(SwizzledTile, IsABijectionThatKeeps16ByteChunksWhole) {
  for (auto [rows, cols, bytes] : shapes()) {
    const SwizzledTile tile(rows, cols, bytes);
    std::vector<bool> used(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t at = tile.index(r, c);
        ASSERT_TRUE(at >= 0 && at < rows * cols && !used[at]) << rows << "x" << cols << "x" << bytes << " at " << r << "," << c;
        used[at] = true;
        if (c % tile.chunkElements) {
          ASSERT_EQ(at, tile.index(r, c - 1) + 1) << "a 16-byte chunk is split";
        }
      }
  }
}

TEST(SwizzledTile, EightRowsOfOneChunkHitEightDistinctBankGroups) {
  // ldmatrix reads one 16-byte chunk from each of 8 consecutive rows (a phase of 8 lanes), as
  // do 16-byte accesses of a column of threads: conflict-free when the 8 chunks fall in 8
  // distinct 16-byte bank groups (bank group = byte address / 16 mod 8).
  for (auto [rows, cols, bytes] : shapes()) {
    const SwizzledTile tile(rows, cols, bytes);
    if (!tile.swizzled || rows < 8 || cols * bytes < 128)
      continue; // narrower rows pack several rows per 128 bytes: checked below
    for (int64_t r0 = 0; r0 < rows; r0 += 8)
      for (int64_t c = 0; c < cols; c += tile.chunkElements) {
        std::set<int64_t> groups;
        for (int64_t r = r0; r < r0 + 8; ++r)
          groups.insert(tile.index(r, c) * bytes / 16 % 8);
        ASSERT_EQ(groups.size(), 8u) << rows << "x" << cols << "x" << bytes << " rows " << r0 << ".. chunk at " << c;
      }
  }
  // Rows of 32 or 64 bytes: the 8 rows cover 256 or 512 bytes, each 128-byte line once per
  // bank group.
  for (int64_t cols : {16, 32}) {
    const SwizzledTile tile(64, cols, 2);
    for (int64_t r0 = 0; r0 < 64; r0 += 8)
      for (int64_t c = 0; c < cols; c += 8) {
        std::set<int64_t> groups;
        for (int64_t r = r0; r < r0 + 8; ++r)
          groups.insert(tile.index(r, c) * 2 / 16 % 8);
        EXPECT_EQ(groups.size(), 8u) << "64x" << cols << " rows " << r0 << ".. chunk at " << c;
      }
  }
}

TEST(SwizzledTile, AtomsAreHoppersSwizzlePatterns) {
  // The tensor cores' 128/64/32-byte swizzle of an address a within an aligned atom: bits 4..6
  // (4..5, 4) XORed with bits 7..9 (7..8, 7).
  auto hardware = [](int64_t a, int64_t rowBytes) {
    int64_t mask = rowBytes == 128 ? 7 : rowBytes == 64 ? 3 : 1;
    return a ^ (((a >> 7) & mask) << 4);
  };
  for (auto [rows, cols, bytes] : shapes()) {
    const SwizzledTile tile(rows, cols, bytes);
    if (!tile.swizzled || bytes != 2 || rows % 8)
      continue;
    int64_t atomBytes = tile.atomColumns * bytes;
    ASSERT_TRUE(atomBytes == 32 || atomBytes == 64 || atomBytes == 128);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t atom = c / tile.atomColumns, plain = r * atomBytes + c % tile.atomColumns * bytes;
        ASSERT_EQ(tile.index(r, c) * bytes, atom * rows * atomBytes + hardware(plain, atomBytes))
            << rows << "x" << cols << " at " << r << "," << c;
      }
  }
}

TEST(SwizzledTile, NarrowOrWideElementsStayRowMajor) {
  EXPECT_FALSE(SwizzledTile(64, 8, 2).swizzled);  // 16-byte rows
  EXPECT_FALSE(SwizzledTile(64, 4, 32).swizzled); // elements wider than a chunk
  EXPECT_EQ(SwizzledTile(64, 8, 2).index(3, 5), 3 * 8 + 5);
  EXPECT_EQ(SwizzledTile(64, 128, 2).atomColumns, 64);
  EXPECT_EQ(SwizzledTile(64, 64, 4).atomColumns, 32);
}

} // namespace
