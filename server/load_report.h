// The load a replica reports to a router in front of it: GET /v1/loads in the shape the Shepherd
// Model Gateway (smg) polls for its load monitor (least_load, power_of_two, overload protection),
// one data-parallel rank: requests running and waiting, KV tokens used of the cache's total, and
// the prefix cache's hit rate. Framework-free.
#pragma once
#include <cstddef>
#include <cstdint>
#include "scheduler/engine.h"
#include "server/openai_json.h"

namespace flashserve {

struct LoadFigures {
  EngineStats engine;
  int32_t block_size = 0;
  int32_t max_num_seqs = 0;
  size_t front_queued = 0;  // HTTP requests still waiting for a worker (not yet in the engine)
};

json load_report(const LoadFigures& f);

}  // namespace flashserve
