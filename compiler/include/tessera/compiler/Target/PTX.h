// LLVM dialect module -> PTX through LLVM's NVPTX backend (in process).
#ifndef TESSERA_COMPILER_TARGET_PTX_H
#define TESSERA_COMPILER_TARGET_PTX_H

#include "tessera/compiler/Compiler.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>

namespace tessera::compiler {

/// Translate `module` (LLVM + NVVM dialects) to LLVM IR, link libdevice when it calls into it,
/// optimize at O3 and emit PTX for `target`. `dump(stage, text)` sees the LLVM IR before and
/// after optimization.
std::string translateToPTX(mlir::ModuleOp module, const Target &target,
                           const std::function<void(const char *, const std::string &)> &dump);

} // namespace tessera::compiler

#endif // TESSERA_COMPILER_TARGET_PTX_H
