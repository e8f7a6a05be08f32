// Every kernel the library ships, with the configs it launches them with: CI compiles each to
// PTX and assembles it with ptxas.
#ifndef TESSERA_KERNELS_CATALOG_H
#define TESSERA_KERNELS_CATALOG_H

#include <tessera/dsl.h>

#include <string>
#include <vector>

namespace tessera::kernels {

struct ShippedKernel {
  dsl::Kernel kernel;
  dsl::Config config;
  std::string variant; ///< tells apart one kernel's shipped configs, e.g. "f16.d128.causal"
};

std::vector<ShippedKernel> shipped_kernels();

} // namespace tessera::kernels

#endif // TESSERA_KERNELS_CATALOG_H
