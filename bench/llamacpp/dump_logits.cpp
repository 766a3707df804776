// dump_logits: llama.cpp's view of a GGUF file, as JSON the flashserve tests read
// (same shape as tests/fixtures/smollm2_llamacpp.json from scripts/gen_llamacpp_fixture.py).
//
// For each prompt: llama.cpp's token ids, its greedy continuation of N tokens (argmax of the raw
// logits, EOS not special-cased), and the top-k (id, logit) at every continuation position twice:
// teacher-forced over prompt + continuation in one batch ("top_logits"), and as seen while decoding
// token by token ("top_logits_incremental"). Where the two disagree on the top-1, llama.cpp's own
// rounding decides, which tells a comparison which positions are too close to call.
//
// Built by bench/llamacpp/build.sh against the libllama it builds:
//   dump_logits --model M.gguf --prompts P.json --out O.json [--n-predict 32] [--top-k 5]
//               [--threads 2] [--model-sha256 HEX] [--verbose] [--tokenize-only]
// P.json: {"prompts": [...]} or a bare array; each item is {"text": "...", "add_special": bool}
// (add_special: let the tokenizer add BOS/EOS as the model asks; default false, as in
// gen_llamacpp_fixture.py, since rendered chat templates carry their own BOS) or {"ids": [...]}.
// --tokenize-only: no logits, only llama.cpp's token ids of each text ({"tokenized": [{"text",
// "add_special", "parse_special", "ids"}]}; parse_special defaults to true), from the vocabulary alone.
// The context mirrors gen_llamacpp_fixture.py's: flash attention off, F16 KV cache, logits of every
// evaluated position requested, one physical batch for the whole sequence.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"

namespace {

using nlohmann::json;

struct Options {
  std::string model, prompts, out, model_sha256;
  int n_predict = 32;
  int top_k = 5;
  int threads = 2;
  bool verbose = false;
  bool tokenize_only = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "dump_logits: %s\nusage: dump_logits --model M.gguf --prompts P.json --out O.json "
               "[--n-predict 32] [--top-k 5] [--threads 2] [--model-sha256 HEX] [--verbose] [--tokenize-only]\n",
               why);
  std::exit(2);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--model") o.model = value();
    else if (a == "--prompts") o.prompts = value();
    else if (a == "--out") o.out = value();
    else if (a == "--model-sha256") o.model_sha256 = value();
    else if (a == "--n-predict") o.n_predict = std::atoi(value().c_str());
    else if (a == "--top-k") o.top_k = std::atoi(value().c_str());
    else if (a == "--threads") o.threads = std::atoi(value().c_str());
    else if (a == "--verbose") o.verbose = true;
    else if (a == "--tokenize-only") o.tokenize_only = true;
    else usage(("unknown argument " + a).c_str());
  }
  if (o.model.empty() || o.prompts.empty() || o.out.empty()) usage("--model, --prompts and --out are required");
  if (o.n_predict < 1 || o.top_k < 2 || o.threads < 1) usage("--n-predict >= 1, --top-k >= 2, --threads >= 1");
  return o;
}

// Only warnings and errors from llama.cpp unless --verbose.
void quiet_log(ggml_log_level level, const char* text, void* verbose) {
  if (*static_cast<bool*>(verbose) || level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) {
    std::fputs(text, stderr);
  }
}

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool add_special,
                                  bool parse_special = true) {
  std::vector<llama_token> ids(text.size() + 8);
  int32_t n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), add_special,
                             parse_special);
  if (n < 0) {
    ids.resize(size_t(-n));
    n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), add_special,
                       parse_special);
  }
  if (n < 0) throw std::runtime_error("llama_tokenize failed on: " + text);
  ids.resize(size_t(n));
  return ids;
}

std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& ids) {
  std::string text(ids.size() * 16 + 16, '\0');
  int32_t n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()),
                               /*remove_special=*/false, /*unparse_special=*/false);
  if (n < 0) {
    text.resize(size_t(-n));
    n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()), false, false);
  }
  text.resize(size_t(std::max(n, 0)));
  return text;
}

// The k largest logits of a row, largest first (ties: lower id first, as argmax picks).
json top_logits(const float* row, int32_t n_vocab, int k) {
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  json top = json::array();
  for (int i = 0; i < k; ++i) top.push_back(json::array({ids[size_t(i)], double(row[ids[size_t(i)]])}));
  return top;
}

int32_t argmax(const float* row, int32_t n_vocab) { return int32_t(std::max_element(row, row + n_vocab) - row); }

// Decodes `tokens` at positions pos0.. of sequence 0, one llama_decode call, logits at every position.
void decode_all(llama_context* ctx, const std::vector<llama_token>& tokens, int32_t pos0) {
  llama_batch batch = llama_batch_init(int32_t(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = pos0 + int32_t(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = int32_t(tokens.size());
  const int32_t rc = llama_decode(ctx, batch);
  llama_batch_free(batch);
  if (rc != 0) throw std::runtime_error("llama_decode returned " + std::to_string(rc));
}

json run_prompt(llama_context* ctx, const llama_vocab* vocab, const json& prompt, const Options& o) {
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  json result;
  std::vector<llama_token> prompt_ids;
  if (prompt.contains("ids")) {
    prompt_ids = prompt["ids"].get<std::vector<llama_token>>();
  } else {
    const std::string text = prompt.at("text").get<std::string>();
    const bool add_special = prompt.value("add_special", false);
    prompt_ids = tokenize(vocab, text, add_special);
    result["text"] = text;
    result["add_special"] = add_special;
  }
  if (prompt_ids.empty()) throw std::runtime_error("empty prompt");
  result["prompt_ids"] = prompt_ids;

  // Greedy, token by token.
  llama_memory_clear(llama_get_memory(ctx), true);
  decode_all(ctx, prompt_ids, 0);
  std::vector<llama_token> generated;
  json incremental = json::array();
  const float* row = llama_get_logits_ith(ctx, -1);
  for (int i = 0; i < o.n_predict; ++i) {
    const llama_token next = argmax(row, n_vocab);
    generated.push_back(next);
    incremental.push_back(top_logits(row, n_vocab, o.top_k));
    if (i + 1 == o.n_predict) break;
    decode_all(ctx, {next}, int32_t(prompt_ids.size() + generated.size() - 1));
    row = llama_get_logits_ith(ctx, -1);
  }

  // Teacher-forced: prompt + continuation in one batch; row first + i predicts generated[i].
  std::vector<llama_token> all = prompt_ids;
  all.insert(all.end(), generated.begin(), generated.end());
  llama_memory_clear(llama_get_memory(ctx), true);
  decode_all(ctx, all, 0);
  const int32_t first = int32_t(prompt_ids.size()) - 1;
  json forced = json::array();
  for (int i = 0; i < o.n_predict; ++i) forced.push_back(top_logits(llama_get_logits_ith(ctx, first + i), n_vocab, o.top_k));

  result["generated_ids"] = generated;
  result["generated_text"] = detokenize(vocab, generated);
  result["top_logits"] = std::move(forced);
  result["top_logits_incremental"] = std::move(incremental);
  return result;
}

void write_json(const json& out, const std::string& path) {
  std::ofstream f(path);
  f << out.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

int tokenize_only(const Options& o, const json& texts) {
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
  if (!model) throw std::runtime_error("llama.cpp could not load " + o.model);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  json out;
  out["generator"] = "llama.cpp from llama-cpp-python 0.3.36 (sdist), bench/llamacpp/dump_logits.cpp --tokenize-only";
  out["model"] = o.model;
  if (!o.model_sha256.empty()) out["model_sha256"] = o.model_sha256;
  out["tokenized"] = json::array();
  for (json t : texts) {
    const bool add_special = t.value("add_special", false), parse_special = t.value("parse_special", true);
    t["add_special"] = add_special;
    t["parse_special"] = parse_special;
    t["ids"] = tokenize(vocab, t.at("text").get<std::string>(), add_special, parse_special);
    out["tokenized"].push_back(std::move(t));
  }
  llama_model_free(model);
  llama_backend_free();
  write_json(out, o.out);
  std::fprintf(stderr, "dump_logits: wrote %s (%zu texts tokenized)\n", o.out.c_str(), out["tokenized"].size());
  return 0;
}

int run(const Options& o) {
  std::ifstream in(o.prompts);
  if (!in) throw std::runtime_error("cannot open " + o.prompts);
  json prompts = json::parse(in);
  if (prompts.is_object()) prompts = prompts.at("prompts");
  if (o.tokenize_only) return tokenize_only(o, prompts);

  size_t longest = 0;
  for (const json& p : prompts) {
    longest = std::max(longest, p.contains("ids") ? p["ids"].size() : p.at("text").get<std::string>().size() + 8);
  }
  const uint32_t n_ctx = uint32_t(std::max<size_t>(512, longest + size_t(o.n_predict) + 16));

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
  if (!model) throw std::runtime_error("llama.cpp could not load " + o.model);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_batch = n_ctx;
  cp.n_ubatch = n_ctx;  // the teacher-forced pass is one physical batch
  cp.n_threads = o.threads;
  cp.n_threads_batch = o.threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) throw std::runtime_error("llama.cpp could not create a context for " + o.model);
  const llama_vocab* vocab = llama_model_get_vocab(model);

  char desc[256];
  llama_model_desc(model, desc, sizeof desc);
  json out;
  out["generator"] = "llama.cpp from llama-cpp-python 0.3.36 (sdist), bench/llamacpp/dump_logits.cpp";
  out["model"] = o.model;
  out["model_desc"] = desc;
  if (!o.model_sha256.empty()) out["model_sha256"] = o.model_sha256;
  out["top_k"] = o.top_k;
  out["n_predict"] = o.n_predict;
  out["prompts"] = json::array();
  for (const json& p : prompts) {
    json r = run_prompt(ctx, vocab, p, o);
    std::fprintf(stderr, "dump_logits: %zu prompt tokens -> %s\n", r["prompt_ids"].size(),
                 json(r["generated_text"]).dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    out["prompts"].push_back(std::move(r));
  }
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();

  write_json(out, o.out);
  std::fprintf(stderr, "dump_logits: wrote %s (%zu prompts)\n", o.out.c_str(), out["prompts"].size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  llama_log_set(quiet_log, &o.verbose);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dump_logits: %s\n", e.what());
    return 1;
  }
}
