#include "server/grpc_convert.h"

#include "model/utf8.h"

namespace flashserve::grpc_api {
namespace {

void copy_sampling(const pb::SamplingParams& s, SamplingParams& p) {
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_k()) p.top_k = s.top_k();
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) p.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) p.frequency_penalty = s.frequency_penalty();
  for (const auto& [id, bias] : s.logit_bias()) p.logit_bias.emplace_back(id, bias);
  if (s.has_seed()) p.seed = s.seed();
  if (s.has_logprobs()) p.logprobs = s.logprobs();
}

void copy_stopping(const pb::StoppingParams& s, SamplingParams& p) {
  if (s.has_max_tokens()) p.max_tokens = s.max_tokens();
  p.ignore_eos = s.ignore_eos();
  p.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  p.stop.assign(s.stop().begin(), s.stop().end());
}

}  // namespace

SamplingParams to_sampling_params(const pb::GenerateRequest& req) {
  SamplingParams p;
  copy_sampling(req.sampling(), p);
  copy_stopping(req.stopping(), p);
  return p;
}

pb::FinishReason to_proto(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return pb::FINISH_REASON_STOP;
    case FinishReason::Length: return pb::FINISH_REASON_LENGTH;
    case FinishReason::Abort: return pb::FINISH_REASON_ABORT;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

void fill_usage(const RequestOutput& finished, pb::Usage* usage) {
  usage->set_prompt_tokens(finished.num_prompt_tokens);
  usage->set_completion_tokens(finished.num_output_tokens);
  usage->set_cached_prompt_tokens(finished.num_cached_tokens);
}

void add_tokens(const std::vector<SampledToken>& tokens, bool with_logprobs, const Tokenizer& tok,
                google::protobuf::RepeatedPtrField<pb::GeneratedToken>* out) {
  for (const SampledToken& t : tokens) {
    pb::GeneratedToken* g = out->Add();
    g->set_token_id(t.token);
    if (!with_logprobs) continue;
    g->set_logprob(t.logprob);
    for (const auto& [id, logprob] : t.top_logprobs) {
      pb::TokenLogprob* alt = g->add_top_logprobs();
      alt->set_token_id(id);
      alt->set_token(valid_utf8(tok.token_bytes(id)));
      alt->set_logprob(logprob);
    }
  }
}

std::string valid_utf8(std::string bytes) { return utf8::take_complete(bytes, /*final=*/true); }

}  // namespace flashserve::grpc_api
