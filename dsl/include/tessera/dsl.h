// The tessera DSL: write GPU kernels as C++ lambdas over tiles.
#ifndef TESSERA_DSL_H
#define TESSERA_DSL_H

#include "tessera/dsl/dtype.h"
#include "tessera/dsl/kernel.h"
#include "tessera/dsl/ops.h"
#include "tessera/dsl/tile.h"
#include "tessera/error.h"

#endif // TESSERA_DSL_H
