// How the CPU ops split work across the kernel threads (kernels/threads.h). The pool itself
// (threads.cpp) is compiled once; op files reach it through run_parallel, a plain function taking a
// function pointer, and wrap their loop bodies with the templates below, which live in each
// compiled copy's namespace like everything else an op file instantiates.
#pragma once
#include <cstdint>
#include "kernels/cpu/isa_namespace.h"

namespace flashserve::kernels {

using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
enum class Split {
  // Threads take the next contiguous run of about n / (8 T) items as they finish one: neighbouring
  // rows stay together, and a core that is slower for the moment (another process on it, the HTTP
  // threads under load, a VM's neighbour) takes fewer runs instead of holding the others up at the
  // end of every op, as one fixed share per thread did.
  Runs,
  OneByOne,  // runs of one item: for items of uneven cost
};
// Calls fn over [0, n) on the pool's threads, the caller's included, and returns when all are done.
// Runs everything on the caller when the pool has one thread, when called from inside a pool job,
// or when another thread's job holds the pool. fn must not throw.
void run_parallel(int64_t n, RangeFn fn, void* ctx, Split split);

namespace FLASHSERVE_ISA {

// body(begin, end) over contiguous runs covering [0, n) once; run on the caller alone when
// !worth_splitting (the work is too small to repay waking the other threads).
template <class Body>
void parallel_for(int64_t n, const Body& body, bool worth_splitting = true) {
  if (!worth_splitting || n <= 1) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
  run_parallel(
      n, [](void* ctx, int64_t begin, int64_t end) { (*static_cast<const Body*>(ctx))(begin, end); },
      const_cast<Body*>(&body), Split::Runs);
}

// body(i) for each i in [0, n), handed out one at a time.
template <class Body>
void parallel_for_each(int64_t n, const Body& body) {
  run_parallel(
      n, [](void* ctx, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) (*static_cast<const Body*>(ctx))(i);
      },
      const_cast<Body*>(&body), Split::OneByOne);
}

}  // namespace FLASHSERVE_ISA
}  // namespace flashserve::kernels
