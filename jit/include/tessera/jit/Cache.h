// The on-disk cache of compiled kernels: $TESSERA_CACHE_DIR (default ~/.cache/tessera).
// Entries are written to a temporary file and renamed into place, so concurrent processes
// never see a partial entry; an entry that does not parse is ignored and rebuilt.
#ifndef TESSERA_JIT_CACHE_H
#define TESSERA_JIT_CACHE_H

#include "tessera/compiler/Compiler.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tessera::jit {

/// The cache directory (created on demand).
std::string cache_dir();

/// A stable key for compiling `traced` for `target` with this compiler build.
std::string cache_key(const std::string &traced_ir, const compiler::Target &target);

std::optional<compiler::CompiledKernel> cache_load(const std::string &key);
void cache_store(const std::string &key, const compiler::CompiledKernel &kernel);

struct CacheStats {
  int64_t entries = 0;
  int64_t bytes = 0;
};
CacheStats cache_stats();
/// Remove every entry; returns how many.
int64_t cache_clear();

} // namespace tessera::jit

#endif // TESSERA_JIT_CACHE_H
