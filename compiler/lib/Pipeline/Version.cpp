// The compiler's identity in the kernel and tuning caches.
#include "tessera/compiler/Compiler.h"

#include "CompilerHash.h" // generated: TESSERA_COMPILER_HASH, a hash of the compiler's sources

#include "llvm/Config/llvm-config.h"

namespace tessera::compiler {

std::string version() {
  return std::string("tessera-0.1/llvm-") + LLVM_VERSION_STRING + "/compiler-" + TESSERA_COMPILER_HASH;
}

} // namespace tessera::compiler
