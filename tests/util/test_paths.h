#pragma once
#include <string>

namespace flashserve::test {

// tests/fixtures/<name>
std::string fixture_path(const std::string& name);
// The real SmolLM2 file: $FLASHSERVE_MODEL, else the project cache. Fails the calling test (with
// how to fetch it) when the file is missing; real-model checks are never silently skipped.
std::string real_model_path();

}  // namespace flashserve::test
