// Linear layouts checked exhaustively against a direct formula and against the coordinate maps
// of the shape ops: silent wrong answers hide in layout math.
#include "tessera/compiler/Layout/LinearLayout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace {

using namespace tessera::layout;

struct Blocked {
  Coord shape;
  std::vector<int> spt, tpw, wpc, order;
};

/// Triton's blocked-layout semantics written out directly: per-dimension thread and register
/// indices, wrapped modulo the shape (replication) where the CTA tile is larger.
Coord reference(const Blocked &b, int64_t reg, int64_t lane, int64_t warp) {
  size_t rank = b.shape.size();
  Coord laneC(rank), warpC(rank), elem(rank), rep(rank), out(rank);
  for (int d : b.order) {
    laneC[d] = lane % b.tpw[d];
    lane /= b.tpw[d];
  }
  for (int d : b.order) {
    warpC[d] = warp % b.wpc[d];
    warp /= b.wpc[d];
  }
  for (int d : b.order) {
    int64_t n = std::min<int64_t>(b.spt[d], b.shape[d]);
    elem[d] = reg % n;
    reg /= n;
  }
  for (int d : b.order) {
    int64_t tile = int64_t(b.spt[d]) * b.tpw[d] * b.wpc[d];
    int64_t n = tile < b.shape[d] ? b.shape[d] / tile : 1;
    rep[d] = reg % n;
    reg /= n;
  }
  for (size_t d = 0; d < rank; ++d) {
    int64_t tile = int64_t(b.spt[d]) * b.tpw[d] * b.wpc[d];
    out[d] = (rep[d] * tile + warpC[d] * b.spt[d] * b.tpw[d] + laneC[d] * b.spt[d] + elem[d]) %
             b.shape[d];
  }
  return out;
}

std::vector<Blocked> cases() {
  std::vector<Blocked> all;
  std::vector<Coord> shapes2 = {{128, 64}, {16, 16}, {1, 64}, {128, 1}, {64, 128}, {2, 8}, {256, 32}};
  for (const Coord &shape : shapes2)
    for (std::vector<int> spt : {std::vector<int>{1, 4}, {1, 1}, {2, 2}, {1, 8}})
      for (std::vector<int> tpw : {std::vector<int>{8, 4}, {1, 32}, {32, 1}, {4, 8}})
        for (std::vector<int> wpc : {std::vector<int>{4, 1}, {1, 4}, {2, 4}, {1, 1}})
          for (std::vector<int> order : {std::vector<int>{1, 0}, {0, 1}})
            all.push_back({shape, spt, tpw, wpc, order});
  for (int64_t n : {1, 16, 128, 1024, 4096})
    for (int spt : {1, 4, 8})
      for (int wpc : {1, 4, 8})
        all.push_back({{n}, {spt}, {32}, {wpc}, {0}});
  all.push_back({{4, 8, 16}, {1, 2, 4}, {2, 4, 4}, {2, 1, 2}, {2, 1, 0}});
  all.push_back({{4, 8, 16}, {1, 2, 4}, {2, 4, 4}, {2, 1, 2}, {0, 2, 1}});
  return all;
}

TEST(LinearLayout, BlockedMatchesTheDirectFormulaEverywhere) {
  for (const Blocked &b : cases()) {
    LinearLayout layout = LinearLayout::blocked(b.shape, b.spt, b.tpw, b.wpc, b.order);
    int64_t lanes = 1, warps = 1;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      lanes *= b.tpw[d];
      warps *= b.wpc[d];
    }
    ASSERT_EQ(layout.numLanes(), lanes);
    ASSERT_EQ(layout.numWarps(), warps);
    for (int64_t w = 0; w < warps; ++w)
      for (int64_t l = 0; l < lanes; ++l)
        for (int64_t r = 0; r < layout.numRegisters(); ++r)
          ASSERT_EQ(layout.apply(r, l, w), reference(b, r, l, w))
              << layout.str() << " at reg " << r << " lane " << l << " warp " << w;
  }
}

TEST(LinearLayout, BlockedCoversEveryElementEquallyOften) {
  for (const Blocked &b : cases()) {
    LinearLayout layout = LinearLayout::blocked(b.shape, b.spt, b.tpw, b.wpc, b.order);
    std::map<Coord, int64_t> hits;
    for (int64_t w = 0; w < layout.numWarps(); ++w)
      for (int64_t l = 0; l < layout.numLanes(); ++l)
        for (int64_t r = 0; r < layout.numRegisters(); ++r)
          ++hits[layout.apply(r, l, w)];
    int64_t numel = 1;
    for (int64_t s : b.shape)
      numel *= s;
    ASSERT_EQ(static_cast<int64_t>(hits.size()), numel) << layout.str();
    int64_t copies = hits.begin()->second;
    for (const auto &[coord, n] : hits) {
      ASSERT_EQ(n, copies) << layout.str();
      for (size_t d = 0; d < coord.size(); ++d)
        ASSERT_LT(coord[d], b.shape[d]);
    }
  }
}

TEST(LinearLayout, SliceHoldsTheReducedCoordinatesOfTheSameThreads) {
  for (const Blocked &b : cases()) {
    if (b.shape.size() < 2)
      continue;
    LinearLayout layout = LinearLayout::blocked(b.shape, b.spt, b.tpw, b.wpc, b.order);
    for (int dim = 0; dim < layout.rank(); ++dim) {
      LinearLayout slice = layout.sliced(dim);
      for (int64_t w = 0; w < layout.numWarps(); ++w)
        for (int64_t l = 0; l < layout.numLanes(); ++l) {
          std::set<Coord> expected, actual;
          for (int64_t r = 0; r < layout.numRegisters(); ++r) {
            Coord c = layout.apply(r, l, w);
            c.erase(c.begin() + dim);
            expected.insert(c);
          }
          for (int64_t r = 0; r < slice.numRegisters(); ++r)
            actual.insert(slice.apply(r, l, w));
          ASSERT_EQ(actual, expected) << layout.str() << " sliced at " << dim;
          ASSERT_EQ(static_cast<size_t>(slice.numRegisters()), expected.size())
              << "a slice holds no duplicate registers";
        }
    }
  }
}

/// Checks a register map from `source` to `target`: every target element is the source element
/// `fn` names, in the same thread.
void expectRegisterMap(const LinearLayout &target, const LinearLayout &source,
                       const std::function<Coord(const Coord &)> &fn) {
  LinearLayout inSource = target.map(source.shape(), fn);
  auto regs = inSource.registersFrom(source);
  ASSERT_TRUE(regs.has_value()) << target.str() << " from " << source.str();
  ASSERT_EQ(static_cast<int64_t>(regs->size()), inSource.numRegisters());
  for (int64_t w = 0; w < target.numWarps(); ++w)
    for (int64_t l = 0; l < target.numLanes(); ++l)
      for (int64_t r = 0; r < target.numRegisters(); ++r) {
        // Target register r maps to the source register of its coordinate in `inSource`.
        Coord wanted = fn(target.apply(r, l, w));
        bool found = false;
        for (int64_t s : *regs)
          found |= source.apply(s, l, w) == wanted;
        ASSERT_TRUE(found) << "reg " << r << " lane " << l << " warp " << w;
      }
}

TEST(LinearLayout, BroadcastExpandTransReshapeAreRegisterMovesInTheRightLayouts) {
  LinearLayout big = LinearLayout::blocked({128, 64}, {1, 4}, {2, 16}, {4, 1}, {1, 0});
  // broadcast [128, 1] -> [128, 64]: the source laid out as the target projected.
  auto bcast = [](const Coord &c) { return broadcastSource({128, 1}, c); };
  expectRegisterMap(big, big.map({128, 1}, bcast), bcast);
  // expand_dims of a row-reduction result ([128] sliced from big) back to [128, 1].
  LinearLayout column = big.map({128, 1}, bcast);
  auto expand = [](const Coord &c) { return expandDimsSource(1, c); };
  expectRegisterMap(column, big.sliced(1), expand);
  // trans [64, 128] <- [128, 64]
  auto transposed = big.map({64, 128}, [](const Coord &c) { return transSource({1, 0}, c); });
  auto trans = [](const Coord &c) { return transSource({1, 0}, c); };
  expectRegisterMap(transposed, big, trans);
  // reshape [8192] <- [128, 64] in the layout the reshape induces.
  auto reshape = [](const Coord &c) { return reshapeSource({128, 64}, {8192}, c); };
  LinearLayout flat({8192}, {}, {}, {});
  auto flatFromBig = [](const Coord &c) { return Coord{linearIndex({128, 64}, c)}; };
  flat = big.map({8192}, flatFromBig);
  expectRegisterMap(flat, big, reshape);
}

TEST(LinearLayout, DifferentThreadPlacementNeedsShuffling) {
  LinearLayout rows = LinearLayout::blocked({64, 64}, {1, 4}, {2, 16}, {4, 1}, {1, 0});
  LinearLayout cols = LinearLayout::blocked({64, 64}, {4, 1}, {16, 2}, {1, 4}, {0, 1});
  EXPECT_FALSE(rows.registersFrom(cols).has_value());
  EXPECT_TRUE(rows.registersFrom(rows).has_value());
  EXPECT_NE(rows, cols);
}

/// mma.sync m16n8k16 fragments as the PTX ISA states them, for the element a lane holds in
/// its register `r` of instruction tile (i, j) and warp (wmi, wni).
Coord ptxFragment(int opIdx, int lane, int element) {
  int group = lane / 4, inGroup = lane % 4;
  if (opIdx == 0) // a0..a7: rows group + 8*(e/2 % 2), k = 2*inGroup + e%2 + 8*(e/4)
    return {group + 8 * ((element / 2) % 2), 2 * inGroup + element % 2 + 8 * (element / 4)};
  if (opIdx == 1) // b0..b3: k = 2*inGroup + e%2 + 8*(e/2), n = group
    return {2 * inGroup + element % 2 + 8 * (element / 2), group};
  return {group + 8 * (element / 2), 2 * inGroup + element % 2}; // c0..c3
}

TEST(LinearLayout, MmaFragmentsMatchThePtxIsa) {
  for (int opIdx : {-1, 0, 1})
    for (auto [rows, cols, wm, wn] : std::vector<std::tuple<int, int, unsigned, unsigned>>{
             {16, 16, 1, 1}, {64, 64, 2, 2}, {128, 128, 4, 1}, {128, 64, 2, 4}, {32, 256, 1, 8}}) {
      int64_t tileRows = 16, tileCols = opIdx == 0 ? 16 : 8;
      LinearLayout layout = LinearLayout::mma({rows, cols}, wm, wn, opIdx);
      int perInstruction = opIdx == 0 ? 8 : 4;
      // Register r: element r % perInstruction of the instruction tile r / perInstruction.
      int64_t tilesRow = opIdx == 1 ? rows / 16 : rows / wm / 16;
      int64_t tilesCol = opIdx == 0 ? cols / 16 : cols / wn / 8;
      ASSERT_EQ(layout.numRegisters(), perInstruction * tilesRow * tilesCol) << layout.str();
      for (int64_t w = 0; w < layout.numWarps(); ++w)
        for (int lane = 0; lane < 32; ++lane) {
          std::set<Coord> seen;
          for (int64_t r = 0; r < layout.numRegisters(); ++r) {
            Coord c = layout.apply(r, lane, w);
            // Register r is element r % perInstruction of its instruction's fragment, where the
            // ISA puts it for this lane (the lowering hands registers to mma.sync in order).
            Coord inTile{c[0] % tileRows, c[1] % tileCols};
            ASSERT_EQ(ptxFragment(opIdx, lane, static_cast<int>(r % perInstruction)), inTile)
                << layout.str() << " reg " << r << " lane " << lane;
            seen.insert(c);
          }
          ASSERT_EQ(static_cast<int64_t>(seen.size()), layout.numRegisters()) << "duplicate registers";
        }
      // Accumulators cover the tile exactly once across warps.
      if (opIdx == -1) {
        std::set<Coord> all;
        for (int64_t w = 0; w < layout.numWarps(); ++w)
          for (int lane = 0; lane < 32; ++lane)
            for (int64_t r = 0; r < layout.numRegisters(); ++r)
              all.insert(layout.apply(r, lane, w));
        ASSERT_EQ(static_cast<int64_t>(all.size()), int64_t(rows) * cols);
      }
    }
}

TEST(LinearLayout, MmaWarpgroupsHoldWholeRowBlocksOfAColumnSlice) {
  // [4, 2] over 64 x 128: warps 0-3 (warpgroup 0) rows 16w.. of columns 0-63, warps 4-7 the same
  // rows of columns 64-127: wgmma's m64 accumulators, one column slice a warpgroup.
  LinearLayout layout = LinearLayout::mma({64, 128}, 4, 2, -1);
  for (int64_t w = 0; w < 8; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int64_t r = 0; r < layout.numRegisters(); ++r) {
        Coord c = layout.apply(r, lane, w);
        EXPECT_EQ(c[0] / 16, w % 4) << "warp " << w;
        EXPECT_EQ(c[1] / 64, w / 4) << "warp " << w;
      }
}

TEST(LinearLayout, CoordinateMaps) {
  EXPECT_EQ(broadcastSource({1, 8}, {5, 3}), (Coord{0, 3}));
  EXPECT_EQ(expandDimsSource(0, {0, 7}), (Coord{7}));
  EXPECT_EQ(transSource({2, 0, 1}, {1, 2, 3}), (Coord{2, 3, 1}));
  EXPECT_EQ(reshapeSource({4, 4}, {16}, {9}), (Coord{2, 1}));
  EXPECT_EQ(linearIndex({4, 8}, {2, 3}), 19);
}

} // namespace
