// Latency against request rate for a sweep, drawn by gnuplot (an external program, so the client
// needs no plotting library).
#pragma once
#include <string>
#include <vector>

#include "client/sweep.h"

namespace flashserve::bench {

// The gnuplot data (one line per row: achieved req/s, TTFT p50, TTFT p99, TPOT p50, TPOT p99 in
// ms) and the script that draws it from `data_path` into `png_path`. Rows sorted by achieved rate.
std::string plot_data(const std::vector<SweepRow>& rows);
std::string plot_script(const std::string& data_path, const std::string& png_path);

// Writes both to a temporary directory and runs gnuplot. Throws std::runtime_error when gnuplot
// is not installed or fails.
void write_latency_plot(const std::vector<SweepRow>& rows, const std::string& png_path);

}  // namespace flashserve::bench
