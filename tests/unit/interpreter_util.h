// Helpers for tests that run kernels through the interpreter.
#ifndef TESSERA_TESTS_UNIT_INTERPRETER_UTIL_H
#define TESSERA_TESTS_UNIT_INTERPRETER_UTIL_H

#include "tessera/compiler/Interpreter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace tessera::testing {

/// Host memory the interpreter may touch for the lifetime of the object.
template <typename T> struct Registered {
  std::vector<T> data;
  explicit Registered(std::vector<T> values) : data(std::move(values)) {
    interpreter::register_allocation(data.data(), data.size() * sizeof(T));
  }
  Registered(const Registered &) = delete;
  Registered &operator=(const Registered &) = delete;
  ~Registered() { interpreter::unregister_allocation(data.data()); }
  T *ptr() { return data.data(); }
};

/// A fixture whose tests launch through the interpreter (TESSERA_INTERPRET=1).
template <typename Base = ::testing::Test> class Interpreted : public Base {
protected:
  void SetUp() override { setenv("TESSERA_INTERPRET", "1", 1); }
  void TearDown() override { unsetenv("TESSERA_INTERPRET"); }
};

} // namespace tessera::testing

#endif // TESSERA_TESTS_UNIT_INTERPRETER_UTIL_H
