// The Serving the request fuzz targets map requests against: the tiny test model on the CPU, built
// once per process. Nothing is ever submitted to its engine.
#pragma once
#include <filesystem>
#include <string>

#include "server/serving.h"
#include "tests/util/tiny_model.h"

namespace flashserve::fuzz {

inline const Serving& tiny_serving(const std::string& target) {
  static const Serving* s = [&] {
    // The file is only read while loading (the weights are mapped), so it can go at once.
    const std::string path = test::temp_model_path(target);
    test::write_tiny_model(path, {});
    auto* model = Model::load(path).release();
    std::filesystem::remove(path);
    EngineOptions options;
    options.kv_cache_bytes = 1 << 20;
    options.device = "cpu";
    return new Serving(*model, "test-model", options, nullptr);
  }();
  return *s;
}

}  // namespace flashserve::fuzz
