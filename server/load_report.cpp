#include "server/load_report.h"

#include <chrono>
#include <ctime>

namespace flashserve {
namespace {

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

json load_report(const LoadFigures& f) {
  const EngineStats& s = f.engine;
  const int64_t total_tokens = int64_t(s.num_kv_blocks) * f.block_size;
  const int64_t used_tokens = int64_t(s.num_kv_blocks - s.num_free_kv_blocks) * f.block_size;
  const int64_t waiting = int64_t(s.num_waiting) + int64_t(f.front_queued);
  const PrefixCacheStats& p = s.prefix_cache;
  json rank = {{"dp_rank", 0},
               {"num_running_reqs", s.num_running},
               {"num_waiting_reqs", waiting},
               {"num_total_reqs", int64_t(s.num_running) + waiting},
               {"num_used_tokens", used_tokens},
               {"max_total_num_tokens", total_tokens},
               {"token_usage", total_tokens > 0 ? double(used_tokens) / double(total_tokens) : 0.0},
               {"cache_hit_rate", p.queried_tokens > 0 ? double(p.hit_tokens) / double(p.queried_tokens) : 0.0},
               {"max_running_requests", f.max_num_seqs}};
  return {{"timestamp", utc_now()}, {"dp_rank_count", 1}, {"loads", json::array({std::move(rank)})}};
}

}  // namespace flashserve
