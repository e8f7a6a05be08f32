// tessera::Error: the one exception type tessera throws for misuse and failures.
#ifndef TESSERA_ERROR_H
#define TESSERA_ERROR_H

#include <stdexcept>
#include <string>

namespace tessera {

/// Thrown for every misuse (bad shapes, dtypes, arguments, configs) and every failure
/// (compilation, driver calls). The message names what is wrong and where.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace tessera

#endif // TESSERA_ERROR_H
