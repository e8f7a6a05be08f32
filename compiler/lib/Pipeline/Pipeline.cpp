// The whole compiler, stage by stage: traced tile IR -> layouts -> shared memory -> LLVM/NVVM
// -> LLVM IR -> PTX. TESSERA_DUMP_IR=<dir> writes every stage to <dir>/<kernel>.<k>.<n>-<stage>.
#include "tessera/compiler/Compiler.h"
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Target/PTX.h"
#include "tessera/compiler/Transforms/Passes.h"
#include "tessera/error.h"

#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdlib>
#include <fstream>

namespace tessera::compiler {
namespace {

/// Writes each stage's text to $TESSERA_DUMP_IR/<kernel>.<compile>.<n>-<stage> when that is set
/// (<compile> counts the compilations of this process, so specializations do not overwrite).
class StageDumper {
public:
  explicit StageDumper(const std::string &kernel) {
    static std::atomic<int> compilations{0};
    kernel_ = kernel + "." + std::to_string(++compilations);
    if (const char *dir = std::getenv("TESSERA_DUMP_IR"))
      dir_ = dir;
  }
  void operator()(const char *stage, const std::string &text) {
    if (dir_.empty())
      return;
    llvm::sys::fs::create_directories(dir_);
    std::ofstream(dir_ + "/" + kernel_ + "." + std::to_string(++count_) + "-" + stage) << text;
  }
  void operator()(const char *stage, mlir::ModuleOp module) {
    if (dir_.empty())
      return;
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    (*this)(stage, text);
  }

private:
  std::string kernel_, dir_;
  int count_ = 0;
};

/// Runs one stage's passes; failures become a tessera::Error with MLIR's diagnostics.
void runStage(mlir::ModuleOp module, const std::string &kernel, const char *stage,
              const std::function<void(mlir::OpPassManager &)> &build) {
  mlir::PassManager pm(module->getContext());
  build(pm);
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(module->getContext(), [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(messages);
    os << "\n  " << diag.str();
    for (const mlir::Diagnostic &note : diag.getNotes())
      os << "\n    note: " << note.str();
    return mlir::success();
  });
  if (failed(pm.run(module)))
    throw Error("kernel '" + kernel + "': compiler stage '" + stage + "' failed:" + messages);
}

/// The config's num_warps (default 4), num_stages (default 3), invariant_operands_in_shared
/// (default 0), wgmma and tma (default 1: on Hopper, dots may use warpgroup MMA and block
/// pointers' loads the tensor memory accelerator), warp_specialize (default 0: on Hopper,
/// a producer warpgroup issues the TMA loads), ping_pong (default 0: with warp_specialize and
/// 8 warps, the two consumer warpgroups take turns at issuing their wgmma, 1, or at their
/// exponentials, 2), staged_stores
/// (default 0: on Hopper, stores leave through shared memory in 16-byte vectors where that
/// fits), programs_per_sm (default 1: how many programs' registers an SM holds at once),
/// exp2_on_fma (default 0: how many of every 8 exponentials a polynomial computes on the FMA
/// pipe), tree_max (default 0: max reductions fold each thread's values as balanced trees)
/// and defer_lane_sums (default 0: sums that loops carry add up their lanes after the loop)
/// on the kernel, checked.
int setNumWarps(mlir::ModuleOp module, const std::string &kernel, const Target &target) {
  int warps = 4, stages = 3;
  int64_t wgmmaKnob = 1, tmaKnob = 1, specializeKnob = 0, pingPongKnob = 0, stagedKnob = 0, programsKnob = 1,
          exp2OnFmaKnob = 0, treeMaxKnob = 0, deferLaneSumsKnob = 0, producerWarps = 0;
  module->walk([&](mlir::func::FuncOp func) {
    auto config = func->getAttrOfType<mlir::DictionaryAttr>("tile.config");
    auto knob = [&](const char *name, int64_t fallback) {
      auto attr = config ? config.getAs<mlir::IntegerAttr>(name) : mlir::IntegerAttr();
      return attr ? attr.getInt() : fallback;
    };
    warps = static_cast<int>(knob("num_warps", warps));
    stages = static_cast<int>(knob("num_stages", stages));
    if (knob("invariant_operands_in_shared", 0))
      func->setAttr(tile::kInvariantOperandsInSharedAttrName, mlir::UnitAttr::get(module->getContext()));
    wgmmaKnob = knob("wgmma", wgmmaKnob);
    tmaKnob = knob("tma", tmaKnob);
    specializeKnob = knob("warp_specialize", specializeKnob);
    pingPongKnob = knob("ping_pong", pingPongKnob);
    stagedKnob = knob("staged_stores", stagedKnob);
    programsKnob = knob("programs_per_sm", programsKnob);
    exp2OnFmaKnob = knob("exp2_on_fma", exp2OnFmaKnob);
    treeMaxKnob = knob("tree_max", treeMaxKnob);
    deferLaneSumsKnob = knob("defer_lane_sums", deferLaneSumsKnob);
    if (target.major == 9 && wgmmaKnob == 1)
      func->setAttr(tile::kWarpgroupMmaAttrName, mlir::UnitAttr::get(module->getContext()));
    if (target.major == 9 && tmaKnob == 1)
      func->setAttr(tile::kTmaAttrName, mlir::UnitAttr::get(module->getContext()));
    if (target.major == 9 && tmaKnob == 1 && specializeKnob == 1) {
      func->setAttr(tile::kWarpSpecializeAttrName, mlir::UnitAttr::get(module->getContext()));
      producerWarps = tile::kProducerWarps;
      if (pingPongKnob != 0)
        func->setAttr(tile::kPingPongAttrName, mlir::StringAttr::get(module->getContext(), pingPongKnob == 1
                                                                                          ? tile::kPingPongAtDots
                                                                                          : tile::kPingPongAtExponentials));
    }
    if (target.major == 9 && stagedKnob == 1)
      func->setAttr(tile::kStagedStoresAttrName, mlir::UnitAttr::get(module->getContext()));
    mlir::Builder b(module->getContext());
    if (programsKnob > 1)
      func->setAttr(tile::kProgramsPerSmAttrName, b.getI32IntegerAttr(static_cast<int32_t>(programsKnob)));
    if (exp2OnFmaKnob > 0)
      func->setAttr(tile::kExp2OnFmaAttrName, b.getI32IntegerAttr(static_cast<int32_t>(exp2OnFmaKnob)));
    if (treeMaxKnob == 1)
      func->setAttr(tile::kTreeMaxAttrName, mlir::UnitAttr::get(module->getContext()));
    if (deferLaneSumsKnob == 1)
      func->setAttr(tile::kDeferLaneSumsAttrName, mlir::UnitAttr::get(module->getContext()));
    func->setAttr(tile::kNumWarpsAttrName, b.getI32IntegerAttr(warps));
    func->setAttr(tile::kNumStagesAttrName, b.getI32IntegerAttr(stages));
  });
  if (stages < 1 || stages > 8)
    throw Error("kernel '" + kernel + "': num_stages must be from 1 to 8, got " + std::to_string(stages));
  if (wgmmaKnob != 0 && wgmmaKnob != 1)
    throw Error("kernel '" + kernel + "': wgmma must be 0 or 1, got " + std::to_string(wgmmaKnob));
  if (tmaKnob != 0 && tmaKnob != 1)
    throw Error("kernel '" + kernel + "': tma must be 0 or 1, got " + std::to_string(tmaKnob));
  if (specializeKnob != 0 && specializeKnob != 1)
    throw Error("kernel '" + kernel + "': warp_specialize must be 0 or 1, got " + std::to_string(specializeKnob));
  if (pingPongKnob < 0 || pingPongKnob > 2)
    throw Error("kernel '" + kernel + "': ping_pong must be 0, 1 (turns at the dots) or 2 (at the exponentials), got " +
                std::to_string(pingPongKnob));
  if (stagedKnob != 0 && stagedKnob != 1)
    throw Error("kernel '" + kernel + "': staged_stores must be 0 or 1, got " + std::to_string(stagedKnob));
  if (exp2OnFmaKnob < 0 || exp2OnFmaKnob > 8)
    throw Error("kernel '" + kernel + "': exp2_on_fma must be from 0 to 8 (eighths of the exponentials on the FMA "
                "pipe), got " + std::to_string(exp2OnFmaKnob));
  if (treeMaxKnob != 0 && treeMaxKnob != 1)
    throw Error("kernel '" + kernel + "': tree_max must be 0 or 1, got " + std::to_string(treeMaxKnob));
  if (deferLaneSumsKnob != 0 && deferLaneSumsKnob != 1)
    throw Error("kernel '" + kernel + "': defer_lane_sums must be 0 or 1, got " + std::to_string(deferLaneSumsKnob));
  if (pingPongKnob != 0 && (specializeKnob != 1 || warps != 8))
    throw Error("kernel '" + kernel + "': ping_pong needs warp_specialize = 1 and num_warps = 8 (two consumer "
                "warpgroups), got warp_specialize = " + std::to_string(specializeKnob) + ", num_warps = " +
                std::to_string(warps));
  if (warps < 1 || warps > 32 || (warps & (warps - 1)))
    throw Error("kernel '" + kernel + "': num_warps must be a power of two from 1 to 32, got " +
                std::to_string(warps));
  const int programWarps = warps + static_cast<int>(producerWarps), maxPrograms = 64 / programWarps;
  if (programsKnob < 1 || programsKnob > maxPrograms)
    throw Error("kernel '" + kernel + "': programs_per_sm must be from 1 to " + std::to_string(maxPrograms) +
                " (an SM runs 64 warps, a program " + std::to_string(programWarps) + "), got " +
                std::to_string(programsKnob));
  return warps;
}

/// The tensor maps tile-pipeline-loops added as kernel arguments, for the launcher.
std::vector<TensorMap> tensorMaps(mlir::ModuleOp module) {
  std::vector<TensorMap> maps;
  module->walk([&](mlir::func::FuncOp func) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto attr = func.getArgAttrOfType<mlir::DictionaryAttr>(i, tile::kTensorMapAttrName);
      if (!attr)
        continue;
      auto array = [&](const char *name) { return attr.getAs<mlir::DenseI64ArrayAttr>(name).asArrayRef(); };
      auto values = [&](const char *args, const char *constants) {
        std::vector<LaunchValue> out;
        for (auto [arg, value] : llvm::zip(array(args), array(constants)))
          out.push_back({static_cast<int>(arg), value});
        return out;
      };
      TensorMap map;
      map.pointer = static_cast<int>(attr.getAs<mlir::IntegerAttr>("pointer").getInt());
      map.element_bytes = static_cast<int>(attr.getAs<mlir::IntegerAttr>("element_bytes").getInt());
      map.shape = values("shape_args", "shape_values");
      map.strides = values("stride_args", "stride_values");
      map.box.assign(array("box").begin(), array("box").end());
      map.swizzle_bytes = static_cast<int>(attr.getAs<mlir::IntegerAttr>("swizzle_bytes").getInt());
      maps.push_back(std::move(map));
    }
  });
  return maps;
}

} // namespace

std::string Target::arch() const {
  return "sm_" + std::to_string(major) + std::to_string(minor) + (major == 9 ? "a" : "");
}

CompiledKernel compile(const dsl::TracedKernel &traced, const Target &target) {
  mlir::DialectRegistry registry;
  registry.insert<tile::TileDialect, mlir::arith::ArithDialect, mlir::math::MathDialect,
                  mlir::scf::SCFDialect, mlir::func::FuncDialect, mlir::cf::ControlFlowDialect,
                  mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  const std::string &name = traced.name();
  StageDumper dump(name);
  CompiledKernel result;
  result.name = name;
  // Tile ops to layouts and shared memory. Staged stores (their scratch) and stages of their
  // own for loads outside loops take shared memory the kernel could do without: where it
  // would not fit, it is lowered again without the staged stores, then without those stages.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  for (bool allowStagedStores = true, stageOutsideLoops = true;;) {
    module = mlir::parseSourceString<mlir::ModuleOp>(traced.str(), &context);
    if (!module)
      throw Error("kernel '" + traced.name() + "': the traced IR does not parse back");
    result.num_warps = setNumWarps(*module, name, target);
    bool storesStaged = false;
    module->walk([&](mlir::func::FuncOp func) {
      if (!allowStagedStores)
        func->removeAttr(tile::kStagedStoresAttrName);
      storesStaged |= func->hasAttr(tile::kStagedStoresAttrName);
    });
    dump("tile.mlir", *module);
    runStage(*module, name, "tile", [&](mlir::OpPassManager &pm) {
      pm.addPass(mlir::createCanonicalizerPass());
      pm.addPass(mlir::createCSEPass());
      pm.addPass(createTilePipelineLoops(TilePipelineLoopsOptions{stageOutsideLoops}));
      pm.addPass(createTilePrefetchLoads());
      pm.addPass(mlir::createCanonicalizerPass());
      pm.addPass(mlir::createCSEPass());
    });
    dump("tile-opt.mlir", *module);

    runStage(*module, name, "layouts", [](mlir::OpPassManager &pm) {
      pm.addPass(createTileAssignLayouts());
      pm.addPass(createTileRemoveLayoutConversions());
      pm.addPass(mlir::createLoopInvariantCodeMotionPass()); // e.g. Q's conversion to mma operands
      pm.addPass(mlir::createCanonicalizerPass());
      pm.addPass(mlir::createCSEPass());
      pm.addPass(createTileVectorizeMemory());
      pm.addPass(createTileStageDotOperands()); // e.g. dS for dQ's wgmma, read from shared memory
      pm.addPass(createTileAllocateSharedMemory());
      pm.addPass(createTileAsyncDots());
      pm.addPass(createTileScopeStageBarriers());
      pm.addPass(createTileSpecializeWarps());
      pm.addPass(createTilePingPong());
      pm.addPass(createTileDeferLaneSums());
    });
    dump("layouts.mlir", *module);
    bool stagedOutsideLoops = false;
    module->walk([&](mlir::func::FuncOp func) {
      if (auto bytes = func->getAttrOfType<mlir::IntegerAttr>(tile::kSharedMemoryAttrName))
        result.shared_memory = bytes.getInt();
      result.num_warps += tile::producerWarpsOf(func);
      stagedOutsideLoops |= func->hasAttr(tile::kStagedOutsideLoopsAttrName);
    });
    if (result.shared_memory <= target.max_shared_memory)
      break;
    if (storesStaged)
      allowStagedStores = false;
    else if (stagedOutsideLoops)
      stageOutsideLoops = false;
    else
      break;
  }
  result.tensor_maps = tensorMaps(*module);

  runStage(*module, name, "llvm", [](mlir::OpPassManager &pm) {
    pm.addPass(createTileConvertToLLVM());
    pm.addPass(mlir::createReconcileUnrealizedCastsPass());
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
  });
  dump("llvm.mlir", *module);

  result.ptx = translateToPTX(*module, target,
                              [&](const char *stage, const std::string &text) { dump(stage, text); });
  dump("ptx", result.ptx);
  return result;
}

} // namespace tessera::compiler
