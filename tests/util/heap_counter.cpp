// Replaces the global operator new and delete with malloc and free plus a byte count. Every
// variant that libstdc++ or a sanitizer runtime could pair with ours is defined here, so no block
// is ever freed by an allocator that did not hand it out.
#include "tests/util/heap_counter.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<size_t> g_in_use{0};
std::atomic<size_t> g_peak{0};

void* counted_alloc(size_t n) noexcept {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) return nullptr;
  size_t now = g_in_use.fetch_add(malloc_usable_size(p), std::memory_order_relaxed) + malloc_usable_size(p);
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return p;
}

void* counted_alloc_or_throw(size_t n) {
  void* p = counted_alloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}

void counted_free(void* p) noexcept {
  if (!p) return;
  g_in_use.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(size_t n) { return counted_alloc_or_throw(n); }
void* operator new[](size_t n) { return counted_alloc_or_throw(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }

namespace flashserve::test {

size_t heap_bytes_in_use() { return g_in_use.load(std::memory_order_relaxed); }

HeapPeak::HeapPeak() : start_(heap_bytes_in_use()) { g_peak.store(start_, std::memory_order_relaxed); }

size_t HeapPeak::growth() const {
  size_t peak = g_peak.load(std::memory_order_relaxed);
  return peak > start_ ? peak - start_ : 0;
}

}  // namespace flashserve::test
