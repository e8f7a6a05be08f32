// Helpers shared by the DSL unit tests.
#ifndef TESSERA_TESTS_UNIT_TEST_UTIL_H
#define TESSERA_TESTS_UNIT_TEST_UTIL_H

#include <tessera/dsl.h>

#include <functional>
#include <string>

namespace tessera::testing {

/// How often `needle` occurs in `text`.
inline int count(const std::string &text, const std::string &needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

/// The arguments of a probe kernel: one of each kind a test may need.
struct ProbeArgs {
  dsl::Ptr<dsl::f32> x;
  dsl::Ptr<dsl::f16> h;
  dsl::Ptr<dsl::i32> ip;
  dsl::Int n;
  dsl::Long l;
  dsl::Float f;
};

/// A kernel `name` over (Ptr<f32>, Ptr<f16>, Ptr<i32>, Int, Long, Float) whose body is `body`.
inline dsl::Kernel probe(const std::string &name, std::function<void(ProbeArgs &)> body) {
  using namespace tessera::dsl;
  return kernel(name, [body](Ptr<f32> x, Ptr<f16> h, Ptr<i32> ip, Int n, Long l, Float f) {
    ProbeArgs args{x, h, ip, n, l, f};
    body(args);
  });
}

} // namespace tessera::testing

#endif // TESSERA_TESTS_UNIT_TEST_UTIL_H
