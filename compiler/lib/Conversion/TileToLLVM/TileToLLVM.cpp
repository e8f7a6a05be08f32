// tile-convert-to-llvm: tile programs with layouts -> LLVM + NVVM (see Passes.td).
//
// Three conversions in a row: (1) tile ops and tiles -> per-thread registers (structs), with
// loops carrying the structs; (2) scf -> cf; (3) what is left (arith, math, cf, func) -> LLVM,
// with PTX's fast exp2 and libdevice for the other transcendental functions.
#include "Utility.h"

#include <algorithm>

#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

namespace tessera {
#define GEN_PASS_DEF_TILECONVERTTOLLVM
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;
using namespace tessera::tile::lowering;

namespace {

/// exp2 and exp of f32 (and narrower floats, through f32) on PTX's ex2.approx.ftz: the
/// instruction attention's softmax lives on.
template <typename MathOp, bool NaturalBase>
struct FastExponential : ConvertOpToLLVMPattern<MathOp> {
  FastExponential(const LLVMTypeConverter &converter)
      : ConvertOpToLLVMPattern<MathOp>(converter, /*benefit=*/10) {}
  LogicalResult matchAndRewrite(MathOp op, typename MathOp::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!isa<FloatType>(type) || type.getIntOrFloatBitWidth() > 32)
      return failure();
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    Value x = adaptor.getOperand();
    if (type != f32)
      x = LLVM::FPExtOp::create(rewriter, loc, f32, x);
    if (NaturalBase)
      x = timesLog2e(rewriter, loc, x);
    Value y = ptx(rewriter, loc, f32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", {x}, false);
    if (type != f32)
      y = LLVM::FPTruncOp::create(rewriter, loc, type, y);
    rewriter.replaceOp(op, y);
    return success();
  }
};

void prepareKernels(ModuleOp module) {
  OpBuilder b(module.getContext());
  bool needsShared = false;
  module.walk([&](func::FuncOp func) {
    if (!func->hasAttr(kKernelAttrName))
      return;
    func->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), b.getUnitAttr());
    const int threads = (numWarpsOf(func) + producerWarpsOf(func)) * 32;
    func->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(), b.getDenseI32ArrayAttr({threads, 1, 1}));
    // Every register one program may have; without it ptxas may pick far fewer and spill (and
    // setmaxnreg needs the count at entry).
    func->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(), b.getI32IntegerAttr(entryRegistersOf(func)));
    if (auto bytes = func->getAttrOfType<IntegerAttr>(kSharedMemoryAttrName))
      needsShared |= bytes.getInt() > 0;
    // A program's shared memory may go to the next one once it returns: its bulk adds read
    // their staging first.
    if (func.walk([](BulkAddOp add) { return bulkAddStagingBytes(add) ? WalkResult::interrupt() : WalkResult::advance(); })
            .wasInterrupted())
      func.walk([&](func::ReturnOp ret) {
        b.setInsertionPoint(ret);
        ptx(b, ret.getLoc(), Type(), "cp.async.bulk.wait_group 0;", "", {}, true);
      });
    // A tensor map is a 128-byte, 64-byte-aligned parameter the TMA reads in place
    // (__grid_constant__): its address is taken, yet it is not copied to local memory.
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, kTensorMapAttrName)) {
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), b.getI64IntegerAttr(64));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
      }
  });
  if (!needsShared || module.lookupSymbol("global_smem"))
    return;
  // One buffer for the whole kernel; its size comes at launch (dynamic shared memory).
  b.setInsertionPointToStart(module.getBody());
  LLVM::GlobalOp::create(b, module.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                         /*isConstant=*/false, LLVM::Linkage::External, "global_smem",
                         Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
}

struct TileConvertToLLVMPass : tessera::impl::TileConvertToLLVMBase<TileConvertToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    prepareKernels(module);
    TileTypeConverter converter(context);

    // 1. Tiles -> registers.
    {
      RewritePatternSet patterns(context);
      populateMemoryOpPatterns(converter, patterns);
      populateComputeOpPatterns(converter, patterns);
      populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns, converter);
      ConversionTarget target(*context);
      target.addIllegalDialect<TileDialect>();
      target.addLegalDialect<LLVM::LLVMDialect, NVVM::NVVMDialect, gpu::GPUDialect>();
      target.markUnknownOpDynamicallyLegal([&](Operation *op) { return converter.isLegal(op); });
      target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp func) {
        return converter.isSignatureLegal(func.getFunctionType()) && converter.isLegal(&func.getBody());
      });
      scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
      if (failed(applyPartialConversion(module, target, std::move(patterns))))
        return signalPassFailure();
    }
    // 2. Structured control flow -> branches.
    {
      RewritePatternSet patterns(context);
      populateSCFToControlFlowConversionPatterns(patterns);
      ConversionTarget target(*context);
      target.addIllegalDialect<scf::SCFDialect>();
      target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
      if (failed(applyPartialConversion(module, target, std::move(patterns))))
        return signalPassFailure();
    }
    // 3. Everything else -> LLVM.
    {
      RewritePatternSet patterns(context);
      patterns.add<FastExponential<math::Exp2Op, false>, FastExponential<math::ExpOp, true>>(converter);
      populateLibDeviceConversionPatterns(converter, patterns, /*benefit=*/2);
      populateGpuToNVVMConversionPatterns(converter, patterns); // gpu.printf -> vprintf
      arith::populateArithToLLVMConversionPatterns(converter, patterns);
      populateMathToLLVMConversionPatterns(converter, patterns);
      cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
      populateFuncToLLVMConversionPatterns(converter, patterns);
      ub::populateUBToLLVMConversionPatterns(converter, patterns);
      index::populateIndexToLLVMConversionPatterns(converter, patterns);
      LLVMConversionTarget target(*context);
      target.addLegalDialect<NVVM::NVVMDialect>();
      target.addLegalOp<ModuleOp, UnrealizedConversionCastOp>();
      if (failed(applyPartialConversion(module, target, std::move(patterns))))
        return signalPassFailure();
    }
    // The TMA reads each tensor map on first use: fetch them while the kernel starts up.
    module.walk([](LLVM::LLVMFuncOp func) {
      if (func.isExternal())
        return;
      OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (func.getArgAttr(i, kTensorMapAttrName)) {
          Location loc = func.getLoc();
          Value address = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), func.getArgument(i));
          ptx(b, loc, Type(), "prefetch.tensormap [$0];", "l", {address}, true);
        }
    });
    // tile.* attributes have done their job; LLVM IR translation does not know them.
    module.walk([](LLVM::LLVMFuncOp func) {
      for (NamedAttribute attr : llvm::to_vector(func->getDiscardableAttrs()))
        if (attr.getName().strref().starts_with("tile."))
          func->removeDiscardableAttr(attr.getName());
    });
  }
};

} // namespace
