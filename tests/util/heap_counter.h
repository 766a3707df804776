// Counts the bytes held through global operator new, so a test can bound what a component
// allocates. Only binaries that link tests/util/heap_counter.cpp (which replaces operator new and
// delete) get the counts; allocations through aligned new or plain malloc are not counted.
#pragma once
#include <cstddef>

namespace flashserve::test {

// Bytes currently held through operator new, as malloc_usable_size reports them.
size_t heap_bytes_in_use();

// Tracks the highest heap use from its construction on. One at a time: each one restarts the
// single process-wide peak.
class HeapPeak {
 public:
  HeapPeak();
  // The peak since construction minus what was in use at construction.
  size_t growth() const;

 private:
  size_t start_;
};

}  // namespace flashserve::test
