// How a fuzz target reports a broken invariant: what went wrong and the bytes behind it, escaped
// (the bytes that matter are often CR, LF and NUL), then abort() so libFuzzer saves the input.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace flashserve::fuzz {

[[noreturn]] inline void finding(const char* target, const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "%s: %s\n", target, what);
  for (char c : detail) {
    if (c == '\n' || (c >= ' ' && c <= '~')) {
      std::fputc(c, stderr);
    } else {
      std::fprintf(stderr, "\\x%02x", uint8_t(c));
    }
  }
  std::fputc('\n', stderr);
  std::abort();
}

}  // namespace flashserve::fuzz
