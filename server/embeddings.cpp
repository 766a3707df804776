#include "server/embeddings.h"

#include <openssl/evp.h>

#include <bit>
#include <set>
#include <string_view>

namespace flashserve {
namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit

const std::set<std::string_view> kFields = {"model", "input", "encoding_format", "dimensions", "user"};

ApiError too_long(const Serving& serving) {
  return bad_request("an input is longer than the context window of " + std::to_string(serving.max_model_len()) +
                         " tokens can hold",
                     "input", "context_length_exceeded");
}

std::vector<int32_t> text_input(const json& v, const Serving& serving) {
  const std::string& text = v.get_ref<const std::string&>();
  if (text.empty()) throw bad_request("'input' may not hold an empty string", "input");
  if (text.size() > serving.max_prompt_bytes()) throw too_long(serving);
  return serving.text_prompt(text);
}

std::vector<int32_t> token_input(const json& v, const Serving& serving) {
  if (v.empty()) throw bad_request("'input' may not hold an empty list of tokens", "input");
  if (v.size() > size_t(serving.max_model_len())) throw too_long(serving);
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= serving.tokenizer().vocab_size()) {
      throw bad_request("'input' token ids must be integers in [0, " + std::to_string(serving.tokenizer().vocab_size()) +
                            ")",
                        "input");
    }
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

// A string, an array of strings, an array of token ids, or an array of such arrays.
std::vector<std::vector<int32_t>> inputs(const json& body, const Serving& serving) {
  const json* v = field(body, "input");
  const char* kinds = "a string, an array of strings, an array of token ids or an array of such arrays";
  if (!v) throw bad_request("'input' is required", "input");
  if (v->is_string()) return {text_input(*v, serving)};
  if (!v->is_array() || v->empty()) throw bad_request(std::string("'input' must be ") + kinds, "input");
  if (v->front().is_number()) return {token_input(*v, serving)};
  const size_t most = std::min(kMaxInputs, size_t(serving.max_choices()));
  if (v->size() > most) {
    throw bad_request("'input' may hold at most " + std::to_string(most) + " inputs, got " + std::to_string(v->size()),
                      "input");
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const json& e : *v) {
    if (e.is_string()) {
      prompts.push_back(text_input(e, serving));
    } else if (e.is_array()) {
      prompts.push_back(token_input(e, serving));
    } else {
      throw bad_request(std::string("'input' must be ") + kinds, "input");
    }
  }
  return prompts;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const json& body, const Serving& serving) {
  for (const auto& [key, value] : body.items()) {
    if (!kFields.count(key)) throw bad_request("Unrecognized request argument supplied: " + key, key, "unsupported_parameter");
  }
  check_model(body, serving.model_name());
  const Pooling pooling = serving.model().config().pooling;
  if (pooling == Pooling::Rank) {
    throw bad_request("this model's pooling is 'rank' (a reranker): it scores pairs and makes no embeddings", "model");
  }
  EmbeddingsRequest r;
  if (const json* f = field(body, "encoding_format")) {
    if (*f != "float" && *f != "base64") throw bad_request("'encoding_format' must be 'float' or 'base64'", "encoding_format");
    r.base64 = *f == "base64";
  }
  if (const json* d = field(body, "dimensions")) {
    const int32_t dim = serving.model().config().dim;
    if (!d->is_number_integer() || d->get<int64_t>() != dim) {
      throw bad_request("'dimensions' is not supported: this model's embeddings have " + std::to_string(dim) +
                            " dimensions and cannot be shortened",
                        "dimensions", "unsupported_parameter");
    }
  }
  if (const json* u = field(body, "user"); u && !u->is_string()) throw bad_request("'user' must be a string", "user");
  GenerationRequest& g = r.generation;
  g.pooling = pooling;
  g.prompts = inputs(body, serving);
  return r;
}

std::string base64_floats(const std::vector<float>& values) {
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) {
    const uint32_t u = std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) bytes.push_back(char((u >> (8 * i)) & 0xFF));
  }
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
  out.resize(size_t(n));
  return out;
}

EmbeddingsWriter::EmbeddingsWriter(const GenerationRequest& request, bool base64, std::string model)
    : request_(request), base64_(base64), model_(std::move(model)), embeddings_(request.prompts.size()) {}

std::string EmbeddingsWriter::add(const std::vector<ChoiceEvent>& events) {
  for (const ChoiceEvent& e : events) {
    if (e.output.finish == FinishReason::Abort) {
      failure_ = server_abort_error(e.output);
      return "";
    }
    if (e.output.finish) embeddings_[size_t(e.choice)] = e.output.embedding;
  }
  return "";
}

std::string EmbeddingsWriter::fail_unfinished(const RequestError& error) {
  failure_ = error;
  return "";
}

std::string EmbeddingsWriter::finish() {
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < embeddings_.size(); ++i) {
    tokens += int64_t(request_.prompts[i].size());
    const json vector = base64_ ? json(base64_floats(embeddings_[i])) : json(embeddings_[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vector}});
  }
  return dump({{"object", "list"},
               {"data", std::move(data)},
               {"model", model_},
               {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace flashserve
