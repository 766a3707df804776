#include "tests/util/test_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace flashserve::test {

std::string fixture_path(const std::string& name) { return std::string(FLASHSERVE_FIXTURES_DIR) + "/" + name; }

std::string real_model_path() {
  const char* env = std::getenv("FLASHSERVE_MODEL");
  std::string path = env && *env ? env : FLASHSERVE_DEFAULT_MODEL;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "real model not found at " << path << " (run scripts/fetch_model.sh)";
  }
  return path;
}

}  // namespace flashserve::test
