#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

#include "model/runner_factory.h"
#include "server/cli_env.h"
#include "server/generate_command.h"
#include "server/serve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"flashserve: an LLM inference server"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads for the kernels (default: one per physical core)")
      ->check(CLI::NonNegativeNumber);
  std::string cpu_kernels = "auto";
  app.add_option("--cpu-kernels", cpu_kernels,
                 "Compiled copy of the CPU kernels: auto (the best this CPU runs, found with cpuid), scalar, "
                 "avx2, avx2-vnni, avx512, avx512-vnni or avx512-amx; a level the CPU lacks is refused")
      ->capture_default_str();
  flashserve::add_env_names(app);

  flashserve::ServeOptions serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve a model over the OpenAI-compatible HTTP API and gRPC");
  serve.add_to(*serve_cmd);
  flashserve::GenerateOptions gen;
  CLI::App* generate_cmd = app.add_subcommand("generate", "Generate text for prompts, through the engine");
  gen.add_to(*generate_cmd);

  CLI11_PARSE(app, argc, argv);
  // Logs go to stderr in every command, so generate's stdout is the answer alone (serve swaps in an
  // asynchronous logger, on stderr too).
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("flashserve", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  flashserve::set_cpu_threads(threads);
  try {
    flashserve::set_cpu_kernels(cpu_kernels);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashserve: %s\n", e.what());
    return 2;
  }
  if (serve_cmd->parsed()) flashserve::run_serve(serve);
  if (generate_cmd->parsed()) return flashserve::run_generate(gen);
  return 0;
}
