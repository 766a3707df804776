// Percentiles and the benchmark report on hand-checked samples.
#include <gtest/gtest.h>

#include "client/stats.h"

namespace fb = flashserve::bench;

TEST(Percentile, InterpolatesBetweenClosestRanks) {
  const std::vector<double> s = {4, 1, 3, 2, 5};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(fb::percentile(s, 0), 1);
  EXPECT_DOUBLE_EQ(fb::percentile(s, 50), 3);
  EXPECT_DOUBLE_EQ(fb::percentile(s, 90), 4.6);
  EXPECT_DOUBLE_EQ(fb::percentile(s, 100), 5);
  EXPECT_DOUBLE_EQ(fb::percentile({1, 2}, 50), 1.5);
  EXPECT_DOUBLE_EQ(fb::percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(fb::percentile({}, 50), 0);
}

TEST(Percentile, SummaryIsInMilliseconds) {
  const fb::LatencySummary s = fb::summarize_ms({0.001, 0.002, 0.003, 0.004});
  EXPECT_DOUBLE_EQ(s.mean_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_NEAR(s.p90_ms, 3.7, 1e-12);
  EXPECT_NEAR(s.p99_ms, 3.97, 1e-12);
}

namespace {

fb::RequestResult ok(double ttft_s, double e2e_s, int32_t tokens, std::vector<double> itl = {}) {
  fb::RequestResult r;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.output_tokens = tokens;
  r.input_len = 10;
  r.itl_s = std::move(itl);
  return r;
}

fb::RequestResult failed(fb::ErrorKind kind) {
  fb::RequestResult r;
  r.error = kind;
  return r;
}

}  // namespace

TEST(Report, TpotExcludesTheFirstToken) {
  EXPECT_DOUBLE_EQ(ok(0.1, 0.5, 5).tpot_s(), 0.1);
  EXPECT_DOUBLE_EQ(ok(0.1, 0.1, 1).tpot_s(), 0.0);
}

TEST(Report, ThroughputGoodputAndErrors) {
  const std::vector<fb::RequestResult> results = {
      ok(0.1, 0.5, 5, {0.1, 0.1, 0.1, 0.1}),  // TPOT 100 ms: meets both SLOs
      ok(0.3, 0.7, 5, {0.1, 0.1, 0.1, 0.1}),  // TTFT 300 ms: misses the TTFT SLO
      ok(0.1, 0.9, 5, {0.2, 0.2, 0.2, 0.2}),  // TPOT 200 ms: misses the TPOT SLO
      failed(fb::ErrorKind::Timeout), failed(fb::ErrorKind::HttpStatus), failed(fb::ErrorKind::HttpStatus)};
  const fb::Report r = fb::make_report(results, 2.0, {.ttft_ms = 200, .tpot_ms = 150});
  EXPECT_EQ(r.num_requests, 6);
  EXPECT_EQ(r.num_ok, 3);
  EXPECT_EQ(r.total_output_tokens, 15);
  EXPECT_EQ(r.total_input_len, 30);
  EXPECT_DOUBLE_EQ(r.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(r.output_throughput, 7.5);
  EXPECT_DOUBLE_EQ(r.goodput, 0.5);
  EXPECT_NEAR(r.ttft.mean_ms, 500.0 / 3, 1e-9);
  EXPECT_NEAR(r.ttft.median_ms, 100, 1e-9);
  EXPECT_NEAR(r.itl.median_ms, 100, 1e-9);  // 8 gaps of 100 ms, 4 of 200 ms
  EXPECT_NEAR(r.tpot.mean_ms, 400.0 / 3, 1e-9);
  EXPECT_NEAR(r.e2e.p99_ms, 896, 1e-9);  // 700 + 0.98 * 200
  EXPECT_EQ(r.errors.at("timeout"), 1);
  EXPECT_EQ(r.errors.at("http_status"), 2);
}

TEST(Report, IntervalsSplitARunBySendTime) {
  auto at = [](fb::RequestResult r, double sent_s) {
    r.sent_s = sent_s;
    return r;
  };
  const std::vector<fb::RequestResult> results = {
      at(ok(0.1, 0.5, 5), 0.5), at(ok(0.1, 0.5, 5), 9.9), at(ok(9.0, 9.5, 5), 10.0),  // the last misses TTFT
      at(failed(fb::ErrorKind::HttpStatus), 25.0)};
  const nlohmann::json j = fb::interval_reports(results, 10.0, {.ttft_ms = 5000});
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["start_s"], 0.0);
  EXPECT_EQ(j[0]["num_ok"], 2);
  EXPECT_DOUBLE_EQ(j[0]["goodput"].get<double>(), 0.2);
  EXPECT_EQ(j[1]["num_ok"], 1);
  EXPECT_DOUBLE_EQ(j[1]["goodput"].get<double>(), 0.0);
  EXPECT_EQ(j[2]["start_s"], 20.0);
  EXPECT_EQ(j[2]["errors"]["http_status"], 1);
}

TEST(Report, NoSloMeansEverySuccessIsGood) {
  const fb::Report r = fb::make_report({ok(5, 10, 3), failed(fb::ErrorKind::Connect)}, 1.0, {});
  EXPECT_DOUBLE_EQ(r.goodput, 1.0);
}

TEST(Report, TableAndJsonCarryTheNumbers) {
  const fb::Report r = fb::make_report({ok(0.1, 0.5, 5), failed(fb::ErrorKind::Connect)}, 1.0, {});
  const std::string table = fb::format_table(r);
  EXPECT_NE(table.find("Successful requests:"), std::string::npos);
  EXPECT_NE(table.find("errors (connect):"), std::string::npos);
  EXPECT_NE(table.find("Median TTFT (ms):"), std::string::npos);
  EXPECT_NE(table.find("100.00"), std::string::npos);
  const nlohmann::json j = fb::to_json(r);
  EXPECT_EQ(j["num_ok"], 1);
  EXPECT_EQ(j["errors"]["connect"], 1);
  EXPECT_DOUBLE_EQ(j["ttft"]["median_ms"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["output_throughput"].get<double>(), 5);
}
