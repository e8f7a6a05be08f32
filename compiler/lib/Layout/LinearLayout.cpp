#include "tessera/compiler/Layout/LinearLayout.h"

#include <cassert>
#include <map>
#include <sstream>

namespace tessera::layout {

namespace {
bool isZero(const Coord &c) {
  for (int64_t v : c)
    if (v)
      return false;
  return true;
}

void xorInto(Coord &acc, const Coord &basis) {
  for (size_t d = 0; d < acc.size(); ++d)
    acc[d] ^= basis[d];
}
} // namespace

LinearLayout::LinearLayout(Coord shape, Bases registers, Bases lanes, Bases warps)
    : shape_(std::move(shape)), registers_(std::move(registers)), lanes_(std::move(lanes)),
      warps_(std::move(warps)) {}

LinearLayout LinearLayout::blocked(const Coord &shape, const std::vector<int> &sizePerThread,
                                   const std::vector<int> &threadsPerWarp,
                                   const std::vector<int> &warpsPerCTA,
                                   const std::vector<int> &order) {
  size_t rank = shape.size();
  Bases registers, lanes, warps;
  // Bases for `count` consecutive steps of `stride` along `dim`; past the shape they
  // replicate (zero basis).
  auto add = [&](Bases &out, int dim, int64_t stride, int64_t count) {
    for (int bit = 0; (int64_t(1) << bit) < count; ++bit) {
      Coord basis(rank, 0);
      int64_t step = stride << bit;
      basis[dim] = step < shape[dim] ? step : 0;
      out.push_back(basis);
    }
  };
  for (int dim : order)
    add(registers, dim, 1, std::min<int64_t>(sizePerThread[dim], shape[dim]));
  for (int dim : order)
    add(lanes, dim, sizePerThread[dim], threadsPerWarp[dim]);
  for (int dim : order)
    add(warps, dim, int64_t(sizePerThread[dim]) * threadsPerWarp[dim], warpsPerCTA[dim]);
  // Where the tensor is larger than one CTA tile, the tile repeats in registers.
  for (int dim : order) {
    int64_t tile = int64_t(sizePerThread[dim]) * threadsPerWarp[dim] * warpsPerCTA[dim];
    if (tile < shape[dim])
      add(registers, dim, tile, shape[dim] / tile);
  }
  return LinearLayout(shape, registers, lanes, warps);
}

LinearLayout LinearLayout::mma(const Coord &shape, unsigned wm, unsigned wn, int opIdx) {
  int64_t rows = shape[0], cols = shape[1];
  Bases regs, lanes, warps;
  auto at = [](int64_t r, int64_t c) { return Coord{r, c}; };
  auto repeat = [&](int64_t from, int64_t limit, bool alongRows) {
    for (int64_t step = from; step < limit; step *= 2)
      regs.push_back(alongRows ? at(step, 0) : at(0, step));
  };
  if (opIdx == 1) { // B [K, N]: lane l holds k = 2(l%4) + {0, 1, 8, 9}, n = l/4
    regs = {at(1, 0), at(8, 0)};
    lanes = {at(2, 0), at(4, 0), at(0, 1), at(0, 2), at(0, 4)};
    repeat(16, rows, true);
    repeat(8, cols / wn, false);
  } else if (opIdx == 0) { // A [M, K]: rows l/4 + {0, 8}, k = 2(l%4) + {0, 1, 8, 9}
    regs = {at(0, 1), at(8, 0), at(0, 8)};
    lanes = {at(0, 2), at(0, 4), at(1, 0), at(2, 0), at(4, 0)};
    repeat(16, cols, false);
    repeat(16, rows / wm, true);
  } else { // accumulator [M, N]: rows l/4 + {0, 8}, columns 2(l%4) + {0, 1}
    regs = {at(0, 1), at(8, 0)};
    lanes = {at(0, 2), at(0, 4), at(1, 0), at(2, 0), at(4, 0)};
    repeat(8, cols / wn, false);
    repeat(16, rows / wm, true);
  }
  // Warps split M first, so that 4 consecutive warps (a warpgroup, for wgmma) hold 64
  // consecutive rows of the same columns.
  for (unsigned w = 1; w < wm; w *= 2)
    warps.push_back(opIdx == 1 ? at(0, 0) : at(w * (rows / wm), 0));
  for (unsigned w = 1; w < wn; w *= 2)
    warps.push_back(opIdx == 0 ? at(0, 0) : at(0, w * (cols / wn)));
  // On tiles smaller than an instruction (a [M, 1] column to broadcast, say), positions past
  // the shape hold replicas.
  for (Bases *bases : {&regs, &lanes, &warps})
    for (Coord &basis : *bases)
      for (size_t d = 0; d < 2; ++d)
        if (basis[d] >= shape[d])
          basis[d] = 0;
  return LinearLayout(shape, regs, lanes, warps);
}

Coord LinearLayout::apply(int64_t reg, int64_t lane, int64_t warp) const {
  Coord coord(shape_.size(), 0);
  auto accumulate = [&](const Bases &bases, int64_t index) {
    for (size_t bit = 0; bit < bases.size(); ++bit)
      if ((index >> bit) & 1)
        xorInto(coord, bases[bit]);
  };
  accumulate(registers_, reg);
  accumulate(lanes_, lane);
  accumulate(warps_, warp);
  return coord;
}

int64_t LinearLayout::contiguousRegisters(int dim, int64_t limit) const {
  int64_t run = 1;
  for (const Coord &basis : registers_) {
    Coord unit(shape_.size(), 0);
    unit[dim] = run;
    if (basis != unit || run * 2 > limit)
      break;
    run *= 2;
  }
  for (;; run /= 2) {
    bool aligned = true;
    size_t inside = 0;
    while ((int64_t(1) << inside) < run)
      ++inside;
    for (size_t i = inside; i < registers_.size(); ++i)
      aligned &= registers_[i][dim] % run == 0;
    for (const Bases *bases : {&lanes_, &warps_})
      for (const Coord &basis : *bases)
        aligned &= basis[dim] % run == 0;
    if (aligned || run == 1)
      return run;
  }
}

LinearLayout LinearLayout::map(const Coord &shape, const std::function<Coord(const Coord &)> &fn) const {
  Bases registers, lanes, warps;
  for (const Coord &basis : registers_) {
    Coord mapped = fn(basis);
    if (!isZero(mapped))
      registers.push_back(mapped);
  }
  for (const Coord &basis : lanes_)
    lanes.push_back(fn(basis));
  for (const Coord &basis : warps_)
    warps.push_back(fn(basis));
  return LinearLayout(shape, registers, lanes, warps);
}

LinearLayout LinearLayout::sliced(int dim) const {
  Coord shape = shape_;
  shape.erase(shape.begin() + dim);
  return map(shape, [dim](const Coord &c) {
    Coord out = c;
    out.erase(out.begin() + dim);
    return out;
  });
}

std::optional<std::vector<int64_t>> LinearLayout::registersFrom(const LinearLayout &source) const {
  if (source.shape_ != shape_ || source.lanes_ != lanes_ || source.warps_ != warps_)
    return std::nullopt;
  std::map<Coord, int64_t> where;
  for (int64_t reg = source.numRegisters() - 1; reg >= 0; --reg)
    where[source.apply(reg, 0, 0)] = reg;
  std::vector<int64_t> result;
  for (int64_t reg = 0; reg < numRegisters(); ++reg) {
    auto it = where.find(apply(reg, 0, 0));
    if (it == where.end())
      return std::nullopt;
    result.push_back(it->second);
  }
  return result;
}

bool LinearLayout::operator==(const LinearLayout &other) const {
  return shape_ == other.shape_ && registers_ == other.registers_ && lanes_ == other.lanes_ &&
         warps_ == other.warps_;
}

std::string LinearLayout::str() const {
  std::ostringstream os;
  auto bases = [&os](const char *name, const Bases &b) {
    os << name << " = [";
    for (size_t i = 0; i < b.size(); ++i) {
      os << (i ? ", " : "") << "[";
      for (size_t d = 0; d < b[i].size(); ++d)
        os << (d ? ", " : "") << b[i][d];
      os << "]";
    }
    os << "]";
  };
  os << "shape = [";
  for (size_t d = 0; d < shape_.size(); ++d)
    os << (d ? ", " : "") << shape_[d];
  os << "], ";
  bases("register", registers_);
  os << ", ";
  bases("lane", lanes_);
  os << ", ";
  bases("warp", warps_);
  return os.str();
}

Coord broadcastSource(const Coord &sourceShape, const Coord &resultCoord) {
  Coord out = resultCoord;
  for (size_t d = 0; d < out.size(); ++d)
    if (sourceShape[d] == 1)
      out[d] = 0;
  return out;
}

Coord expandDimsSource(int axis, const Coord &resultCoord) {
  Coord out = resultCoord;
  out.erase(out.begin() + axis);
  return out;
}

Coord transSource(const std::vector<int> &order, const Coord &resultCoord) {
  Coord out(resultCoord.size(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    out[order[i]] = resultCoord[i];
  return out;
}

int64_t linearIndex(const Coord &shape, const Coord &coord) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    index = index * shape[d] + coord[d];
  return index;
}

Coord reshapeSource(const Coord &sourceShape, const Coord &resultShape, const Coord &resultCoord) {
  int64_t index = linearIndex(resultShape, resultCoord);
  Coord out(sourceShape.size(), 0);
  for (int d = static_cast<int>(sourceShape.size()) - 1; d >= 0; --d) {
    out[d] = index % sourceShape[d];
    index /= sourceShape[d];
  }
  return out;
}

} // namespace tessera::layout
