// The Responses API's `store`: finished responses kept in memory so a later request can go on from
// one (`previous_response_id`) or fetch it (GET /v1/responses/{id}). Bounded by a count and a byte
// budget; the least recently used response goes first. Nothing survives a restart. Thread-safe.
#pragma once
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include "server/openai_json.h"

namespace flashserve {

struct StoredResponse {
  json conversation;  // chat messages up to and including this response's answer (no instructions)
  json response;      // the response object as the client received it
};

class ResponseStore {
 public:
  // max_entries 0: storing is off.
  ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  bool enabled() const { return max_entries_ > 0; }
  // Keeps `entry` under `id`, evicting the least recently used beyond the limits; one bigger than the
  // whole byte budget is not kept.
  void put(const std::string& id, StoredResponse entry);
  // The entry, now the most recently used; nullopt when unknown or evicted.
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);
  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    size_t bytes;
  };
  void evict_to_fit();

  const size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace flashserve
