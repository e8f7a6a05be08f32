#include "tessera/jit/Cache.h"

#include "tessera/error.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <random>

namespace tessera::jit {
namespace {

constexpr llvm::StringLiteral kExtension = ".tessera";

std::string entryPath(const std::string &key) { return cache_dir() + "/" + key + kExtension.str(); }

} // namespace

std::string cache_dir() {
  std::string dir;
  if (const char *env = std::getenv("TESSERA_CACHE_DIR"); env && *env)
    dir = env;
  else if (const char *home = std::getenv("HOME"))
    dir = std::string(home) + "/.cache/tessera";
  else
    dir = "/tmp/tessera-cache";
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    throw Error("cannot create the cache directory " + dir + ": " + ec.message());
  return dir;
}

std::string cache_key(const std::string &traced_ir, const compiler::Target &target) {
  llvm::SHA256 hash;
  for (const std::string &part :
       {compiler::version(), target.arch(), std::to_string(target.max_shared_memory), traced_ir}) {
    hash.update(part);
    hash.update(llvm::StringRef("\0", 1));
  }
  std::array<uint8_t, 32> digest = hash.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), 16), /*LowerCase=*/true);
}

namespace {

llvm::json::Array launchValuesToJson(const std::vector<compiler::LaunchValue> &values) {
  llvm::json::Array out;
  for (const compiler::LaunchValue &v : values)
    out.push_back(llvm::json::Array{v.arg, v.value});
  return out;
}

llvm::json::Array tensorMapsToJson(const std::vector<compiler::TensorMap> &maps) {
  llvm::json::Array out;
  for (const compiler::TensorMap &map : maps)
    out.push_back(llvm::json::Object{{"pointer", map.pointer},
                                     {"element_bytes", map.element_bytes},
                                     {"shape", launchValuesToJson(map.shape)},
                                     {"strides", launchValuesToJson(map.strides)},
                                     {"box", llvm::json::Array(map.box)},
                                     {"swizzle_bytes", map.swizzle_bytes}});
  return out;
}

std::optional<std::vector<compiler::LaunchValue>> launchValuesFromJson(const llvm::json::Array *array) {
  if (!array)
    return std::nullopt;
  std::vector<compiler::LaunchValue> out;
  for (const llvm::json::Value &entry : *array) {
    const llvm::json::Array *pair = entry.getAsArray();
    if (!pair || pair->size() != 2 || !(*pair)[0].getAsInteger() || !(*pair)[1].getAsInteger())
      return std::nullopt;
    out.push_back({static_cast<int>(*(*pair)[0].getAsInteger()), *(*pair)[1].getAsInteger()});
  }
  return out;
}

std::optional<std::vector<compiler::TensorMap>> tensorMapsFromJson(const llvm::json::Array *array) {
  if (!array)
    return std::nullopt;
  std::vector<compiler::TensorMap> out;
  for (const llvm::json::Value &entry : *array) {
    const llvm::json::Object *object = entry.getAsObject();
    if (!object)
      return std::nullopt;
    auto pointer = object->getInteger("pointer"), bytes = object->getInteger("element_bytes"),
         swizzle = object->getInteger("swizzle_bytes");
    auto shape = launchValuesFromJson(object->getArray("shape")),
         strides = launchValuesFromJson(object->getArray("strides"));
    const llvm::json::Array *box = object->getArray("box");
    if (!pointer || !bytes || !swizzle || !shape || !strides || !box)
      return std::nullopt;
    compiler::TensorMap map{static_cast<int>(*pointer), static_cast<int>(*bytes), *shape, *strides, {},
                            static_cast<int>(*swizzle)};
    for (const llvm::json::Value &extent : *box) {
      if (!extent.getAsInteger())
        return std::nullopt;
      map.box.push_back(*extent.getAsInteger());
    }
    out.push_back(std::move(map));
  }
  return out;
}

} // namespace

std::optional<compiler::CompiledKernel> cache_load(const std::string &key) {
  auto buffer = llvm::MemoryBuffer::getFile(entryPath(key));
  if (!buffer)
    return std::nullopt;
  // First line: JSON metadata; the rest: PTX.
  auto [meta, ptx] = (*buffer)->getBuffer().split('\n');
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(meta);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt; // corrupt: rebuilt and overwritten by the caller
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return std::nullopt;
  auto name = object->getString("name");
  auto warps = object->getInteger("num_warps");
  auto shared = object->getInteger("shared_memory");
  auto size = object->getInteger("ptx_bytes");
  auto maps = tensorMapsFromJson(object->getArray("tensor_maps"));
  if (!name || !warps || !shared || !size || !maps || static_cast<int64_t>(ptx.size()) != *size)
    return std::nullopt;
  compiler::CompiledKernel kernel;
  kernel.name = name->str();
  kernel.num_warps = static_cast<int>(*warps);
  kernel.shared_memory = *shared;
  kernel.tensor_maps = std::move(*maps);
  kernel.ptx = ptx.str();
  return kernel;
}

void cache_store(const std::string &key, const compiler::CompiledKernel &kernel) {
  std::string dir = cache_dir();
  llvm::json::Object meta{{"name", kernel.name},
                          {"num_warps", kernel.num_warps},
                          {"shared_memory", kernel.shared_memory},
                          {"ptx_bytes", static_cast<int64_t>(kernel.ptx.size())},
                          {"tensor_maps", tensorMapsToJson(kernel.tensor_maps)},
                          {"compiler", compiler::version()}};
  std::random_device random;
  std::string temporary = dir + "/." + key + "." + std::to_string(llvm::sys::Process::getProcessId()) +
                          "." + std::to_string(random()) + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(temporary, ec);
    if (ec)
      return; // a read-only cache is not an error: the kernel still runs
    os << llvm::json::Value(std::move(meta)) << "\n" << kernel.ptx;
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(temporary);
      return;
    }
  }
  if (llvm::sys::fs::rename(temporary, entryPath(key)))
    llvm::sys::fs::remove(temporary);
}

CacheStats cache_stats() {
  CacheStats stats;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(cache_dir(), ec), end; it != end && !ec; it.increment(ec)) {
    if (!llvm::StringRef(it->path()).ends_with(kExtension))
      continue;
    llvm::sys::fs::file_status status;
    if (!llvm::sys::fs::status(it->path(), status)) {
      ++stats.entries;
      stats.bytes += static_cast<int64_t>(status.getSize());
    }
  }
  return stats;
}

int64_t cache_clear() {
  int64_t removed = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(cache_dir(), ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(kExtension) && !llvm::sys::fs::remove(it->path()))
      ++removed;
  return removed;
}

} // namespace tessera::jit
