// Rate sweeps: the table and JSON for fake runs, the rate list, the gnuplot inputs; then a real
// 2-rate sweep against the tiny model, with its JSON and (when gnuplot is installed) its PNG.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "client/http_backend.h"
#include "client/plot.h"
#include "client/sweep.h"
#include "tests/util/server_process.h"

namespace fb = flashserve::bench;
namespace fs = std::filesystem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

fb::Report fake_report(double req_s, double ttft_ms, int errors) {
  fb::Report r;
  r.num_requests = 10;
  r.num_ok = 10 - errors;
  r.duration_s = 5;
  r.request_throughput = req_s;
  r.output_throughput = req_s * 64;
  r.ttft = {ttft_ms, ttft_ms, ttft_ms * 1.5, ttft_ms * 2};
  r.tpot = {10, 10, 12, 15};
  r.e2e = {700, 700, 800, 900};
  if (errors > 0) r.errors["timeout"] = errors;
  return r;
}

std::vector<fb::SweepRow> two_rows() { return {{2.0, fake_report(1.9, 50, 0)}, {kInf, fake_report(6.5, 400, 1)}}; }

bool has_png_magic(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::string(magic, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

bool gnuplot_installed() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

}  // namespace

TEST(Sweep, ParsesRateLists) {
  const auto rates = fb::parse_rates("1,2.5,inf");
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_DOUBLE_EQ(rates[1], 2.5);
  EXPECT_TRUE(std::isinf(rates[2]));
  for (const char* bad : {"", "1,,2", "0", "-1", "fast", "2x"}) EXPECT_THROW(fb::parse_rates(bad), std::invalid_argument) << bad;
}

TEST(Sweep, TableHasARowPerRate) {
  const std::string table = fb::format_sweep_table(two_rows());
  EXPECT_NE(table.find("TTFT p99"), std::string::npos) << table;
  EXPECT_NE(table.find("       2      1.90       121.6      50.00     100.00"), std::string::npos) << table;
  EXPECT_NE(table.find("     inf      6.50"), std::string::npos) << table;
  EXPECT_NE(table.find("       1\n"), std::string::npos) << "errors column\n" << table;
}

TEST(Sweep, JsonIsAnArrayOfPerRunReportsWithTheRate) {
  const nlohmann::json j = fb::sweep_json(two_rows());
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["request_rate"], 2.0);
  EXPECT_EQ(j[1]["request_rate"], "inf");
  for (size_t i = 0; i < 2; ++i) {
    nlohmann::json per_run = fb::to_json(two_rows()[i].report);
    nlohmann::json row = j[i];
    row.erase("request_rate");
    EXPECT_EQ(row, per_run) << "row " << i << " is the per-run report plus the rate";
  }
  EXPECT_EQ(j[1]["errors"]["timeout"], 1);
}

TEST(Plot, DataSortedByAchievedRateAndScriptNamesBothFiles) {
  auto rows = two_rows();
  std::swap(rows[0], rows[1]);
  const std::string data = fb::plot_data(rows);
  EXPECT_LT(data.find("\n1.9 50 100 10 15\n"), data.find("\n6.5 400 800 10 15\n")) << data;
  const std::string script = fb::plot_script("/tmp/d'x.dat", "/tmp/out.png");
  EXPECT_NE(script.find("set output '/tmp/out.png'"), std::string::npos);
  EXPECT_NE(script.find("'/tmp/d''x.dat' using 1:3 with linespoints title 'TTFT p99'"), std::string::npos) << script;
}

TEST(Plot, WritesAPngWhenGnuplotIsInstalled) {
  if (!gnuplot_installed()) GTEST_SKIP() << "gnuplot not installed";
  const fs::path png = fs::temp_directory_path() / ("fs-plot-unit-" + std::to_string(getpid()) + ".png");
  fb::write_latency_plot(two_rows(), png.string());
  EXPECT_TRUE(has_png_magic(png));
  fs::remove(png);
}

TEST(SweepIntegration, TwoRatesAgainstTheTinyModel) {
  flashserve::test::ServerProcess server(flashserve::test::tiny_model_for_server());
  fb::HttpOptions http;
  http.port = server.http_port();
  http.timeout_s = 120;
  fb::HttpBackend backend(http);
  const auto requests = fb::make_synthetic_workload({.num_requests = 6, .input_len = 16, .output_len = 8, .seed = 3});
  const auto rows = fb::run_rate_sweep(backend, requests, {2.0, kInf}, {.seed = 3}, {});
  ASSERT_EQ(rows.size(), 2u);
  for (const fb::SweepRow& row : rows) {
    EXPECT_EQ(row.report.num_ok, 6) << server.log();
    EXPECT_EQ(row.report.total_output_tokens, 48);
    EXPECT_GT(row.report.ttft.median_ms, 0.0);
  }
  // Six arrivals at 2 req/s take a couple of seconds; all at once is faster to send.
  EXPECT_GT(rows[0].report.duration_s, 1.0);

  const fs::path dir = fs::temp_directory_path() / ("fs-sweep-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "sweep.json") << fb::sweep_json(rows).dump(2);
  const nlohmann::json back = nlohmann::json::parse(std::ifstream(dir / "sweep.json"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1]["request_rate"], "inf");
  EXPECT_EQ(back[0]["num_ok"], 6);
  if (gnuplot_installed()) {
    fb::write_latency_plot(rows, (dir / "latency.png").string());
    EXPECT_TRUE(has_png_magic(dir / "latency.png"));
  }
  fs::remove_all(dir);
}
