// The tile-dialect interpreter: runs a traced kernel over host memory, program by program, so
// kernels can be debugged (and CI can run them) without a GPU. TESSERA_INTERPRET=1 sends
// Kernel::launch here, with host pointers; device buffers become host allocations.
#ifndef TESSERA_COMPILER_INTERPRETER_H
#define TESSERA_COMPILER_INTERPRETER_H

#include "tessera/dsl/kernel.h"

#include <cstddef>

namespace tessera::interpreter {

/// Whether TESSERA_INTERPRET asks for the interpreter (set, and not "0").
bool enabled();

/// The host memory kernels may touch; accesses outside every registered range are reported
/// (with the op, the element and the program) instead of corrupting memory.
void register_allocation(const void *base, size_t bytes);
void unregister_allocation(const void *base);

/// Run every program of `grid` of `traced` with these arguments (host pointers and numbers).
void run(const dsl::TracedKernel &traced, dsl::Grid grid, const dsl::LaunchArg *args, size_t count);

} // namespace tessera::interpreter

#endif // TESSERA_COMPILER_INTERPRETER_H
