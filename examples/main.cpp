// tessera-examples: traces the example kernels and prints their tile-dialect IR.
#include "attention.h"
#include "matmul.h"
#include "softmax.h"
#include "vector_add.h"

#include <iostream>

int main() {
  using namespace tessera;
  using namespace tessera::dsl;
  try {
    struct Example {
      Kernel kernel;
      Config config;
    };
    Example examples[] = {
        {examples::vector_add(), {{"BLOCK", 1024}}},
        {examples::softmax<f16>(), {{"BLOCK", 4096}}},
        {examples::matmul<bf16>([](Tile acc) { return maximum(acc, 0.0); }),
         {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 32}}},
        {examples::attention_forward<f16>(), {{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"HEAD_DIM", 64}}},
    };
    for (const Example &example : examples) {
      TracedKernel traced = example.kernel.trace(example.config);
      std::cout << "// " << traced.name() << " " << example.config.str() << "\n"
                << traced.str() << "\n";
    }
  } catch (const Error &error) {
    std::cerr << "tessera-examples: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
