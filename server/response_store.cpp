#include "server/response_store.h"

namespace flashserve {

void ResponseStore::put(const std::string& id, StoredResponse entry) {
  const size_t bytes = id.size() + entry.conversation.dump().size() + entry.response.dump().size();
  std::lock_guard lock(mu_);
  if (!enabled() || bytes > max_bytes_) return;
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    entries_.erase(it->second);
    index_.erase(it);
  }
  entries_.push_front({id, std::move(entry), bytes});
  index_[id] = entries_.begin();
  bytes_ += bytes;
  evict_to_fit();
}

void ResponseStore::evict_to_fit() {
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= entries_.back().bytes;
    index_.erase(entries_.back().id);
    entries_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  entries_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace flashserve
