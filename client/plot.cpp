#include "client/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace flashserve::bench {
namespace fs = std::filesystem;

std::string plot_data(const std::vector<SweepRow>& rows) {
  std::vector<const SweepRow*> sorted;
  for (const SweepRow& r : rows) sorted.push_back(&r);
  // The x axis is the achieved rate (finite even for an "inf" sweep point), so lines run left to right.
  std::sort(sorted.begin(), sorted.end(), [](const SweepRow* a, const SweepRow* b) {
    return a->report.request_throughput < b->report.request_throughput;
  });
  std::string out = "# req_per_s ttft_p50_ms ttft_p99_ms tpot_p50_ms tpot_p99_ms\n";
  char buf[160];
  for (const SweepRow* r : sorted) {
    const Report& rep = r->report;
    std::snprintf(buf, sizeof(buf), "%.6g %.6g %.6g %.6g %.6g\n", rep.request_throughput, rep.ttft.median_ms,
                  rep.ttft.p99_ms, rep.tpot.median_ms, rep.tpot.p99_ms);
    out += buf;
  }
  return out;
}

namespace {

// gnuplot strings in single quotes take everything literally except '' for a quote.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string plot_script(const std::string& data_path, const std::string& png_path) {
  const std::string d = quoted(data_path);
  return "set terminal pngcairo size 1000,600 noenhanced\n"
         "set output " + quoted(png_path) + "\n"
         "set title 'Latency vs request rate'\n"
         "set xlabel 'achieved request rate (req/s)'\n"
         "set ylabel 'latency (ms)'\n"
         "set key top left\n"
         "set grid\n"
         "plot " + d + " using 1:2 with linespoints title 'TTFT median', \\\n"
         "     " + d + " using 1:3 with linespoints title 'TTFT p99', \\\n"
         "     " + d + " using 1:4 with linespoints title 'TPOT median', \\\n"
         "     " + d + " using 1:5 with linespoints title 'TPOT p99'\n";
}

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// posix_spawnp rather than std::system: no shell, so paths need no quoting, and a missing
// binary is told apart from a failing one.
int run_gnuplot(const fs::path& script) {
  std::string arg0 = "gnuplot", arg1 = script.string();
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ);
  if (err == ENOENT) throw std::runtime_error("--plot needs gnuplot on PATH (Debian: apt-get install gnuplot-nox)");
  if (err != 0) throw std::runtime_error(std::string("cannot start gnuplot: ") + std::strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void write_latency_plot(const std::vector<SweepRow>& rows, const std::string& png_path) {
  std::string tmpl = (fs::temp_directory_path() / "flashserve-plot-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory for the plot");
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  write_file(dir / "latency.dat", plot_data(rows));
  write_file(dir / "latency.gp", plot_script((dir / "latency.dat").string(), fs::absolute(png_path).string()));
  if (const int status = run_gnuplot(dir / "latency.gp"); status != 0) {
    throw std::runtime_error("gnuplot failed (exit status " + std::to_string(status) + ") writing " + png_path);
  }
  if (!fs::exists(png_path)) throw std::runtime_error("gnuplot wrote no " + png_path);
}

}  // namespace flashserve::bench
