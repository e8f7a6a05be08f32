#include "tessera/compiler/Target/PTX.h"
#include "tessera/error.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/Instructions.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>
#include <mutex>

namespace tessera::compiler {
namespace {

constexpr const char *kTriple = "nvptx64-nvidia-cuda";

std::string print(const llvm::Module &module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

/// libdevice.10.bc: $TESSERA_LIBDEVICE, else under $CUDA_HOME or /usr/local/cuda.
std::string libdevicePath() {
  if (const char *path = std::getenv("TESSERA_LIBDEVICE"))
    return path;
  for (const char *root : {std::getenv("CUDA_HOME"), std::getenv("CUDA_PATH"),
                           static_cast<char *>(nullptr)}) {
    root = root ? root : "/usr/local/cuda";
    std::string path = std::string(root) + "/nvvm/libdevice/libdevice.10.bc";
    if (llvm::sys::fs::exists(path))
      return path;
  }
  throw Error("libdevice.10.bc not found (looked in $CUDA_HOME and /usr/local/cuda); set "
              "TESSERA_LIBDEVICE to its path");
}

/// Link the libdevice functions the kernel calls (tanh, erf, log, ...), keep what kernels reach.
void linkLibdevice(llvm::Module &module) {
  bool calls = false;
  for (const llvm::Function &f : module)
    calls |= f.isDeclaration() && f.getName().starts_with("__nv_");
  if (!calls)
    return;
  llvm::SMDiagnostic diagnostic;
  std::string path = libdevicePath();
  std::unique_ptr<llvm::Module> libdevice = llvm::parseIRFile(path, diagnostic, module.getContext());
  if (!libdevice)
    throw Error("cannot read libdevice at " + path + ": " + diagnostic.getMessage().str());
  libdevice->setTargetTriple(module.getTargetTriple());
  libdevice->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(libdevice), llvm::Linker::Flags::LinkOnlyNeeded))
    throw Error("linking libdevice failed");
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && f.getCallingConv() != llvm::CallingConv::PTX_Kernel)
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, mam);
}

/// Freezes the condition of every select that is an and/or of conditions. On NVPTX, LLVM's
/// DAG combiner rewrites select(a && b, x, y) as the chain select(a, select(b, x, y), y),
/// and ptxas keeps one FSEL per condition: a mask of four conditions cost four selects a
/// score (the block-sparse forward's partial blocks: 1037 instructions an iteration, 907
/// frozen, where ISETP folds the and.pred). The freeze hides the and from that combine; it
/// changes no value that is not poison.
void freezeCombinedSelectConditions(llvm::Module &module) {
  for (llvm::Function &function : module)
    for (llvm::BasicBlock &block : function)
      for (llvm::Instruction &instruction : block) {
        auto *select = llvm::dyn_cast<llvm::SelectInst>(&instruction);
        auto *condition = select ? llvm::dyn_cast<llvm::BinaryOperator>(select->getCondition()) : nullptr;
        if (!condition || !condition->getType()->isIntegerTy(1) ||
            (condition->getOpcode() != llvm::Instruction::And && condition->getOpcode() != llvm::Instruction::Or))
          continue;
        select->setCondition(new llvm::FreezeInst(condition, "", select->getIterator()));
      }
}

} // namespace

std::string translateToPTX(mlir::ModuleOp module, const Target &target,
                           const std::function<void(const char *, const std::string &)> &dump) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    // 32-bit shared-memory pointers: every shared address a thread keeps (staging, ldmatrix
    // rows, barriers) takes one register, not two.
    auto *shortPointers = llvm::cl::getRegisteredOptions().lookup("nvptx-short-ptr");
    if (!shortPointers)
      throw Error("LLVM's NVPTX backend has no nvptx-short-ptr option");
    static_cast<llvm::cl::opt<bool> *>(shortPointers)->setValue(true);
  });
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  module->getContext()->appendDialectRegistry(registry);

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, context, "tessera");
  if (!llvmModule)
    throw Error("translating the kernel to LLVM IR failed");

  llvm::Triple triple(kTriple);
  std::string message;
  const llvm::Target *nvptx = llvm::TargetRegistry::lookupTarget(triple, message);
  if (!nvptx)
    throw Error("LLVM has no NVPTX target: " + message);
  std::unique_ptr<llvm::TargetMachine> machine(nvptx->createTargetMachine(
      triple, target.arch(), "+ptx86", llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  linkLibdevice(*llvmModule);
  dump("llvm.ll", print(*llvmModule));
  optimize(*llvmModule, *machine);
  freezeCombinedSelectConditions(*llvmModule);
  dump("llvm.opt.ll", print(*llvmModule));

  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw Error("the NVPTX backend cannot emit assembly");
  codegen.run(*llvmModule);
  return std::string(ptx.str());
}

} // namespace tessera::compiler
