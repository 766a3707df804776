// `flashserve generate`: prompts in, text out, through the same engine the server uses. One prompt
// streams to stdout as it is produced; several run batched and print in order when all are done.
// A speed line goes to stderr.
#pragma once
#include <string>
#include <vector>
#include <CLI/CLI.hpp>
#include "scheduler/sampling_params.h"
#include "server/engine_options.h"

namespace flashserve {

struct GenerateOptions {
  std::string model_path;
  std::vector<std::string> prompts;
  bool chat = false;  // wrap each prompt in the model's chat template
  SamplingParams sampling;
  EngineOptions engine;

  GenerateOptions();
  void add_to(CLI::App& app);
};

// Returns the process exit code; errors are printed to stderr, never thrown.
int run_generate(const GenerateOptions& opts);

}  // namespace flashserve
