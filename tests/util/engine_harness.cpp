#include "tests/util/engine_harness.h"

#include <gtest/gtest.h>

#include "model/gguf.h"
#include "scheduler/output_processor.h"
#include "tests/util/tiny_model.h"

namespace flashserve::test {

RunStats run_jobs(ModelRunner& runner, const Tokenizer& tok, const EngineConfig& cfg, const std::vector<Job>& jobs) {
  Engine engine(runner, tok, cfg);
  OutputProcessor outputs(engine, tok);
  RunStats run;
  run.results.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    GenerateRequest g{"job-" + std::to_string(i), jobs[i].prompt, jobs[i].params, jobs[i].priority};
    g.speculative = jobs[i].speculative;
    JobResult* res = &run.results[i];
    auto rejected = outputs.submit(std::move(g), [res](const RequestOutput& o) {
      ++res->num_events;
      for (const SampledToken& t : o.tokens) res->tokens.push_back(t.token);
      res->sampled.insert(res->sampled.end(), o.tokens.begin(), o.tokens.end());
      res->text += o.text;
      if (o.finish) {
        res->finish = o.finish;
        res->num_cached_tokens = o.num_cached_tokens;
        res->num_preemptions = o.num_preemptions;
        res->timings = o.timings;
      }
    });
    if (rejected) ADD_FAILURE() << "job " << i << " rejected: " << rejected->message;
  }
  for (int guard = 0; guard < 1000000 && engine.step(); ++guard) {
  }
  outputs.flush();
  run.engine = engine.stats();
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_TRUE(run.results[i].finish) << "job " << i << " never finished";
  return run;
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::unique_ptr<Tokenizer> tiny_tokenizer() {
  const std::string path = temp_model_path("tokenizer");
  write_tiny_model(path, {});
  return std::make_unique<Tokenizer>(Tokenizer::data_from_gguf(*GgufFile::open(path)));
}

}  // namespace flashserve::test
