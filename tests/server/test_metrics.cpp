// Metrics fed synthetic engine events: the rendered exposition text is parsed back and every value,
// bucket count and label checked, including requests aborted before they ran.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"

namespace flashserve {
namespace {

using namespace std::chrono_literals;
using Labels = std::map<std::string, std::string>;

constexpr const char* kModel = "tiny-test";

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

// One exposition line `name{k="v",...} value` (label values here never hold quotes or commas).
Sample parse_sample(const std::string& line) {
  Sample s;
  const size_t space = line.rfind(' ');
  const std::string series = line.substr(0, space);
  s.value = std::stod(line.substr(space + 1));
  const size_t brace = series.find('{');
  s.name = series.substr(0, brace);
  if (brace == std::string::npos) return s;
  std::stringstream labels(series.substr(brace + 1, series.size() - brace - 2));
  for (std::string pair; std::getline(labels, pair, ',');) {
    const size_t eq = pair.find('=');
    s.labels[pair.substr(0, eq)] = pair.substr(eq + 2, pair.size() - eq - 3);
  }
  return s;
}

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> counter, gauge, histogram

  explicit Exposition(const std::string& text) {
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("# TYPE ")) {
        const size_t space = line.find(' ', 7);
        types[line.substr(7, space - 7)] = line.substr(space + 1);
      } else if (!line.empty() && line[0] != '#') {
        samples.push_back(parse_sample(line));
      }
    }
  }

  // The value of the one series named `name` with model_name plus exactly `extra` as labels.
  double value(const std::string& name, Labels extra = {}) const {
    extra["model_name"] = kModel;
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == extra) return s.value;
    }
    ADD_FAILURE() << "no series " << name << " with those labels";
    return -1;
  }
  double count(const std::string& histogram) const { return value(histogram + "_count"); }
  double sum(const std::string& histogram) const { return value(histogram + "_sum"); }
  double bucket(const std::string& histogram, const std::string& le) const {
    return value(histogram + "_bucket", {{"le", le}});
  }
};

// A request's timeline in milliseconds from a fixed origin; -1 leaves a stamp unset, as the engine
// does for steps a request never reached.
Clock::time_point at_ms(int ms) {
  static const Clock::time_point origin = Clock::now();
  return ms < 0 ? Clock::time_point{} : origin + std::chrono::milliseconds(ms);
}

RequestOutput event(const std::string& id, int prompt_tokens, int output_tokens, bool has_token) {
  RequestOutput o;
  o.req_id = id;
  o.num_prompt_tokens = prompt_tokens;
  o.num_output_tokens = output_tokens;
  if (has_token) o.tokens.push_back(SampledToken{});
  return o;
}

RequestTimings timings(int arrival, int scheduled, int first_token, int last_token, int finished) {
  return {at_ms(arrival), at_ms(scheduled), at_ms(first_token), at_ms(last_token), at_ms(finished)};
}

// Arrives at 0, first scheduled at 10 ms, tokens at 50, 70 and 100 ms, finishes with the third
// (max_tokens): 7 prompt tokens, 3 output tokens.
void stream_length_request(Metrics& m, const std::string& id) {
  RequestOutput o = event(id, 7, 1, true);
  o.timings = timings(0, 10, 50, 50, -1);
  m.on_output(o);
  o = event(id, 7, 2, true);
  o.timings = timings(0, 10, 50, 70, -1);
  m.on_output(o);
  o = event(id, 7, 3, true);
  o.timings = timings(0, 10, 50, 100, 100);
  o.finish = FinishReason::Length;
  m.on_output(o);
}

const EngineStats kIdle = [] {
  EngineStats s;
  s.num_kv_blocks = 10;
  s.num_free_kv_blocks = 10;
  return s;
}();

TEST(Metrics, EverySeriesExistsAtZeroWithModelName) {
  Metrics m(kModel);
  const Exposition e(m.render(kIdle));
  const std::map<std::string, std::string> want = {
      {"flashserve_time_to_first_token_seconds", "histogram"},
      {"flashserve_inter_token_latency_seconds", "histogram"},
      {"flashserve_request_time_per_output_token_seconds", "histogram"},
      {"flashserve_e2e_request_latency_seconds", "histogram"},
      {"flashserve_request_queue_time_seconds", "histogram"},
      {"flashserve_request_prefill_time_seconds", "histogram"},
      {"flashserve_request_decode_time_seconds", "histogram"},
      {"flashserve_request_prompt_tokens", "histogram"},
      {"flashserve_request_generation_tokens", "histogram"},
      {"flashserve_iteration_tokens_total", "histogram"},
      {"flashserve_engine_step_duration_seconds", "histogram"},
      {"flashserve_prompt_tokens_total", "counter"},
      {"flashserve_generation_tokens_total", "counter"},
      {"flashserve_request_success_total", "counter"},
      {"flashserve_request_rejected_total", "counter"},
      {"flashserve_num_preemptions_total", "counter"},
      {"flashserve_prefix_cache_queries_total", "counter"},
      {"flashserve_prefix_cache_hits_total", "counter"},
      {"flashserve_spec_decode_num_drafts_total", "counter"},
      {"flashserve_spec_decode_num_draft_tokens_total", "counter"},
      {"flashserve_spec_decode_num_accepted_tokens_total", "counter"},
      {"flashserve_spec_decode_num_accepted_tokens_per_pos_total", "counter"},
      {"flashserve_num_requests_running", "gauge"},
      {"flashserve_num_requests_waiting", "gauge"},
      {"flashserve_kv_cache_usage_perc", "gauge"},
  };
  EXPECT_EQ(e.types, want);
  for (const Sample& s : e.samples) {
    EXPECT_EQ(s.labels.count("model_name") ? s.labels.at("model_name") : "", kModel) << s.name;
    EXPECT_EQ(s.value, 0) << s.name;
  }
  for (const char* reason : {"stop", "length", "abort"}) {
    EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", reason}}), 0);
  }
  EXPECT_EQ(e.count("flashserve_time_to_first_token_seconds"), 0);
}

TEST(Metrics, StreamedRequestLatencies) {
  Metrics m(kModel);
  stream_length_request(m, "a");
  const Exposition e(m.render(kIdle));

  EXPECT_EQ(e.count("flashserve_time_to_first_token_seconds"), 1);
  EXPECT_NEAR(e.sum("flashserve_time_to_first_token_seconds"), 0.050, 1e-9);
  EXPECT_EQ(e.bucket("flashserve_time_to_first_token_seconds", "0.04"), 0);
  EXPECT_EQ(e.bucket("flashserve_time_to_first_token_seconds", "0.06"), 1);
  EXPECT_EQ(e.bucket("flashserve_time_to_first_token_seconds", "+Inf"), 1);

  // Two gaps: 20 ms and 30 ms.
  EXPECT_EQ(e.count("flashserve_inter_token_latency_seconds"), 2);
  EXPECT_NEAR(e.sum("flashserve_inter_token_latency_seconds"), 0.050, 1e-9);
  EXPECT_EQ(e.bucket("flashserve_inter_token_latency_seconds", "0.015"), 0);
  EXPECT_EQ(e.bucket("flashserve_inter_token_latency_seconds", "0.02"), 1);
  EXPECT_EQ(e.bucket("flashserve_inter_token_latency_seconds", "0.025"), 1);
  EXPECT_EQ(e.bucket("flashserve_inter_token_latency_seconds", "0.03"), 2);

  // (100 - 50) ms over 2 tokens after the first.
  EXPECT_EQ(e.count("flashserve_request_time_per_output_token_seconds"), 1);
  EXPECT_NEAR(e.sum("flashserve_request_time_per_output_token_seconds"), 0.025, 1e-9);

  const std::map<std::string, double> spans = {{"flashserve_e2e_request_latency_seconds", 0.100},
                                               {"flashserve_request_queue_time_seconds", 0.010},
                                               {"flashserve_request_prefill_time_seconds", 0.040},
                                               {"flashserve_request_decode_time_seconds", 0.050}};
  for (const auto& [name, seconds] : spans) {
    EXPECT_EQ(e.count(name), 1) << name;
    EXPECT_NEAR(e.sum(name), seconds, 1e-9) << name;
  }
  EXPECT_EQ(e.bucket("flashserve_e2e_request_latency_seconds", "0.08"), 0);
  EXPECT_EQ(e.bucket("flashserve_e2e_request_latency_seconds", "0.1"), 1);
}

TEST(Metrics, TokenCountsAndFinishReasons) {
  Metrics m(kModel);
  stream_length_request(m, "a");
  RequestOutput stop = event("b", 4, 1, true);
  stop.timings = timings(0, 1, 2, 2, 2);
  stop.finish = FinishReason::Stop;
  m.on_output(stop);
  const Exposition e(m.render(kIdle));

  EXPECT_EQ(e.value("flashserve_prompt_tokens_total"), 11);
  EXPECT_EQ(e.value("flashserve_generation_tokens_total"), 4);
  EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", "length"}}), 1);
  EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", "stop"}}), 1);
  EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", "abort"}}), 0);

  EXPECT_EQ(e.count("flashserve_request_prompt_tokens"), 2);
  EXPECT_EQ(e.sum("flashserve_request_prompt_tokens"), 11);
  EXPECT_EQ(e.bucket("flashserve_request_prompt_tokens", "2"), 0);
  EXPECT_EQ(e.bucket("flashserve_request_prompt_tokens", "5"), 1);
  EXPECT_EQ(e.bucket("flashserve_request_prompt_tokens", "10"), 2);
  EXPECT_EQ(e.sum("flashserve_request_generation_tokens"), 4);
  EXPECT_EQ(e.bucket("flashserve_request_generation_tokens", "1"), 1);
  EXPECT_EQ(e.bucket("flashserve_request_generation_tokens", "2"), 1);
  EXPECT_EQ(e.bucket("flashserve_request_generation_tokens", "5"), 2);
  EXPECT_EQ(e.bucket("flashserve_request_generation_tokens", "1000000"), 2);

  // A one-token request has no time per output token (nothing after the first).
  EXPECT_EQ(e.count("flashserve_request_time_per_output_token_seconds"), 1);
}

TEST(Metrics, GenerationTokensGrowWhileStreaming) {
  Metrics m(kModel);
  RequestOutput o = event("a", 3, 1, true);
  o.timings = timings(0, 1, 5, 5, -1);
  m.on_output(o);
  EXPECT_EQ(Exposition(m.render(kIdle)).value("flashserve_generation_tokens_total"), 1);
  o = event("a", 3, 2, true);
  o.timings = timings(0, 1, 5, 9, -1);
  m.on_output(o);
  const Exposition e(m.render(kIdle));
  EXPECT_EQ(e.value("flashserve_generation_tokens_total"), 2);
  EXPECT_EQ(e.count("flashserve_time_to_first_token_seconds"), 1);
  EXPECT_EQ(e.count("flashserve_inter_token_latency_seconds"), 1);
  EXPECT_EQ(e.value("flashserve_prompt_tokens_total"), 0) << "prompt tokens count at finish";
  EXPECT_EQ(e.count("flashserve_e2e_request_latency_seconds"), 0);
}

TEST(Metrics, AbortedWhileWaitingObservesOnlyWhatHappened) {
  Metrics m(kModel);
  RequestOutput o = event("a", 5, 0, false);
  o.timings = timings(0, -1, -1, -1, 30);
  o.finish = FinishReason::Abort;
  m.on_output(o);
  const Exposition e(m.render(kIdle));

  EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", "abort"}}), 1);
  EXPECT_EQ(e.count("flashserve_e2e_request_latency_seconds"), 1);
  EXPECT_NEAR(e.sum("flashserve_e2e_request_latency_seconds"), 0.030, 1e-9);
  for (const char* never : {"flashserve_request_queue_time_seconds", "flashserve_request_prefill_time_seconds",
                            "flashserve_request_decode_time_seconds", "flashserve_time_to_first_token_seconds",
                            "flashserve_inter_token_latency_seconds",
                            "flashserve_request_time_per_output_token_seconds"}) {
    EXPECT_EQ(e.count(never), 0) << never;
  }
  EXPECT_EQ(e.value("flashserve_prompt_tokens_total"), 5);
  EXPECT_EQ(e.count("flashserve_request_generation_tokens"), 1);
  EXPECT_EQ(e.bucket("flashserve_request_generation_tokens", "1"), 1) << "0 tokens falls in the lowest bucket";
}

TEST(Metrics, AbortWithNoTimestampsAtAllIsHarmless) {
  Metrics m(kModel);
  RequestOutput o = event("a", 0, 0, false);
  o.finish = FinishReason::Abort;
  m.on_output(o);
  const Exposition e(m.render(kIdle));
  EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", "abort"}}), 1);
  EXPECT_EQ(e.count("flashserve_e2e_request_latency_seconds"), 0);
}

TEST(Metrics, AbortAfterFirstTokenKeepsItsLatencies) {
  Metrics m(kModel);
  RequestOutput o = event("a", 2, 1, true);
  o.timings = timings(0, 10, 20, 20, -1);
  m.on_output(o);
  o = event("a", 2, 1, false);
  o.timings = timings(0, 10, 20, 20, 45);
  o.finish = FinishReason::Abort;
  m.on_output(o);
  const Exposition e(m.render(kIdle));
  EXPECT_NEAR(e.sum("flashserve_request_prefill_time_seconds"), 0.010, 1e-9);
  EXPECT_EQ(e.sum("flashserve_request_decode_time_seconds"), 0);
  EXPECT_EQ(e.count("flashserve_request_decode_time_seconds"), 1);
  EXPECT_NEAR(e.sum("flashserve_e2e_request_latency_seconds"), 0.045, 1e-9);
  EXPECT_EQ(e.count("flashserve_request_time_per_output_token_seconds"), 0);
}

// A finished request's last-token time must be forgotten: a later request reusing its id starts
// with a first token (TTFT), not an inter-token gap.
TEST(Metrics, FinishForgetsTheRequest) {
  Metrics m(kModel);
  stream_length_request(m, "same");
  stream_length_request(m, "same");
  const Exposition e(m.render(kIdle));
  EXPECT_EQ(e.count("flashserve_time_to_first_token_seconds"), 2);
  EXPECT_EQ(e.count("flashserve_inter_token_latency_seconds"), 4);
}

TEST(Metrics, EngineSteps) {
  Metrics m(kModel);
  m.on_step({0.020, 2, 7, 0});
  m.on_step({0.004, 1, 1, 0});
  const Exposition e(m.render(kIdle));
  EXPECT_EQ(e.count("flashserve_iteration_tokens_total"), 2);
  EXPECT_EQ(e.sum("flashserve_iteration_tokens_total"), 8);
  EXPECT_EQ(e.bucket("flashserve_iteration_tokens_total", "1"), 1);
  EXPECT_EQ(e.bucket("flashserve_iteration_tokens_total", "5"), 1);
  EXPECT_EQ(e.bucket("flashserve_iteration_tokens_total", "10"), 2);
  EXPECT_EQ(e.count("flashserve_engine_step_duration_seconds"), 2);
  EXPECT_NEAR(e.sum("flashserve_engine_step_duration_seconds"), 0.024, 1e-9);
  EXPECT_EQ(e.bucket("flashserve_engine_step_duration_seconds", "0.0025"), 0);
  EXPECT_EQ(e.bucket("flashserve_engine_step_duration_seconds", "0.005"), 1);
  EXPECT_EQ(e.bucket("flashserve_engine_step_duration_seconds", "0.02"), 2);
}

TEST(Metrics, GaugesAndCumulativeCountersFollowEngineStats) {
  Metrics m(kModel);
  EngineStats s;
  s.num_running = 2;
  s.num_waiting = 3;
  s.num_kv_blocks = 10;
  s.num_free_kv_blocks = 4;
  s.num_preemptions = 5;
  s.prefix_cache = {100, 40};
  s.speculation.num_drafts = 6;
  s.speculation.num_draft_tokens = 20;
  s.speculation.num_accepted_tokens = 9;
  s.speculation.accepted_per_position[0] = 5;
  s.speculation.accepted_per_position[1] = 4;
  Exposition e(m.render(s));
  EXPECT_EQ(e.value("flashserve_spec_decode_num_drafts_total"), 6);
  EXPECT_EQ(e.value("flashserve_spec_decode_num_draft_tokens_total"), 20);
  EXPECT_EQ(e.value("flashserve_spec_decode_num_accepted_tokens_total"), 9);
  EXPECT_EQ(e.value("flashserve_spec_decode_num_accepted_tokens_per_pos_total", {{"position", "1"}}), 4);
  EXPECT_EQ(e.value("flashserve_spec_decode_num_accepted_tokens_per_pos_total", {{"position", "2"}}), 0);
  EXPECT_EQ(e.value("flashserve_num_requests_running"), 2);
  EXPECT_EQ(e.value("flashserve_num_requests_waiting"), 3);
  EXPECT_NEAR(e.value("flashserve_kv_cache_usage_perc"), 0.6, 1e-12);
  EXPECT_EQ(e.value("flashserve_num_preemptions_total"), 5);
  EXPECT_EQ(e.value("flashserve_prefix_cache_queries_total"), 100);
  EXPECT_EQ(e.value("flashserve_prefix_cache_hits_total"), 40);

  // Scraping the same totals again must not count them twice.
  e = Exposition(m.render(s));
  EXPECT_EQ(e.value("flashserve_num_preemptions_total"), 5);
  EXPECT_EQ(e.value("flashserve_prefix_cache_queries_total"), 100);
  EXPECT_EQ(e.value("flashserve_spec_decode_num_accepted_tokens_total"), 9);

  s.num_running = 0;
  s.num_free_kv_blocks = 10;
  s.num_preemptions = 7;
  s.prefix_cache = {150, 40};
  e = Exposition(m.render(s));
  EXPECT_EQ(e.value("flashserve_num_requests_running"), 0);
  EXPECT_EQ(e.value("flashserve_kv_cache_usage_perc"), 0);
  EXPECT_EQ(e.value("flashserve_num_preemptions_total"), 7);
  EXPECT_EQ(e.value("flashserve_prefix_cache_queries_total"), 150);
  EXPECT_EQ(e.value("flashserve_prefix_cache_hits_total"), 40);
}

// Scrapes come from several HTTP threads while the engine thread reports: the running totals must
// be added exactly once however the renders interleave.
TEST(Metrics, ConcurrentScrapesCountTotalsOnce) {
  Metrics m(kModel);
  std::vector<std::thread> scrapers;
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&m] {
      EngineStats s = kIdle;
      for (int i = 1; i <= 200; ++i) {
        s.num_preemptions = i;
        s.prefix_cache = {2 * i, i};
        m.render(s);
      }
    });
  }
  for (int i = 0; i < 50; ++i) stream_length_request(m, "r" + std::to_string(i));
  for (std::thread& t : scrapers) t.join();
  const Exposition e(m.render(kIdle));
  EXPECT_EQ(e.value("flashserve_num_preemptions_total"), 200);
  EXPECT_EQ(e.value("flashserve_prefix_cache_queries_total"), 400);
  EXPECT_EQ(e.value("flashserve_prefix_cache_hits_total"), 200);
  EXPECT_EQ(e.value("flashserve_generation_tokens_total"), 150);
  EXPECT_EQ(e.value("flashserve_request_success_total", {{"finished_reason", "length"}}), 50);
}

TEST(Metrics, EmptyKvPoolReadsZeroUsage) {
  Metrics m(kModel);
  EXPECT_EQ(Exposition(m.render(EngineStats{})).value("flashserve_kv_cache_usage_perc"), 0);
}

}  // namespace
}  // namespace flashserve
