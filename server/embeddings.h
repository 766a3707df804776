// OpenAI's embeddings API (POST /v1/embeddings): each input is a prompt the engine computes and
// pools (mean, first or last token, as the model file's pooling_type says) into a unit-length
// vector, batched with everything else it runs. Framework-free, like the other API shapes.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "server/api_writer.h"
#include "server/openai_protocol.h"

namespace flashserve {

struct EmbeddingsRequest {
  GenerationRequest generation;  // one prompt per input, pooling set
  bool base64 = false;           // encoding_format "base64": little-endian float32s, base64-encoded
};

// Refuses by name what it does not support (dimensions other than the model's own, ...).
EmbeddingsRequest parse_embeddings_request(const json& body, const Serving& serving);

class EmbeddingsWriter : public ApiWriter {
 public:
  EmbeddingsWriter(const GenerationRequest& request, bool base64, std::string model);

  std::string add(const std::vector<ChoiceEvent>& events) override;
  std::string fail_unfinished(const RequestError& error) override;
  const std::optional<RequestError>& failure() const override { return failure_; }
  bool produced_tokens() const override { return false; }
  std::string finish() override;

 private:
  const GenerationRequest& request_;
  bool base64_;
  std::string model_;
  std::vector<std::vector<float>> embeddings_;
  std::optional<RequestError> failure_;
};

// The bytes of `values` (little-endian float32) in base64, as OpenAI's encoding_format "base64".
std::string base64_floats(const std::vector<float>& values);

}  // namespace flashserve
