#include <CLI/CLI.hpp>

#include "kernels/threads.h"
#include "server/generate_command.h"

int main(int argc, char** argv) {
  CLI::App app{"flashserve: an LLM inference server"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads for the kernels (default: all cores)");

  flashserve::GenerateOptions gen;
  CLI::App* generate = app.add_subcommand("generate", "Generate text for prompts, through the engine");
  gen.add_to(*generate);

  CLI11_PARSE(app, argc, argv);
  if (threads > 0) flashserve::kernels::set_num_threads(threads);
  if (generate->parsed()) return flashserve::run_generate(gen);
  return 0;
}
