// tessera's compiler passes (declared in Passes.td, one file each in lib/Transforms and
// lib/Conversion).
#ifndef TESSERA_COMPILER_TRANSFORMS_PASSES_H
#define TESSERA_COMPILER_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace tessera {

#define GEN_PASS_DECL
#include "tessera/compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessera/compiler/Transforms/Passes.h.inc"

} // namespace tessera

#endif // TESSERA_COMPILER_TRANSFORMS_PASSES_H
