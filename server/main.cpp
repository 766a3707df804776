#include <CLI/CLI.hpp>

#include "kernels/threads.h"
#include "server/generate_command.h"

int main(int argc, char** argv) {
  CLI::App app{"flashserve: an LLM inference server"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads for the kernels (default: all cores)");

  flashserve::GenerateOptions gen;
  CLI::App* generate = app.add_subcommand("generate", "Generate text for one prompt and print it as it comes");
  generate->add_option("--model", gen.model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  generate->add_option("--prompt", gen.prompt, "Prompt text")->required();
  generate->add_flag("--chat", gen.chat, "Wrap the prompt in the model's chat template");
  generate->add_option("--max-tokens", gen.max_tokens, "Most tokens to generate")->check(CLI::PositiveNumber);
  generate->add_option("--temperature", gen.temperature, "Sampling temperature; 0 is greedy")->check(CLI::NonNegativeNumber);
  generate->add_option("--seed", gen.seed, "Sampling seed");
  generate->add_option("--block-size", gen.block_size, "KV cache block size in tokens")->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  if (threads > 0) flashserve::kernels::set_num_threads(threads);
  if (generate->parsed()) return flashserve::run_generate(gen);
  return 0;
}
