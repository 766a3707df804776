// The device line and the measured ceilings (bench/kernels/ceilings.cu).
#pragma once
#include "bench/kernels/bench_case.h"

namespace flashserve::bench {

void print_device(int dev);   // also sizes grid_for by the device's SM count
void measure_copy(Bench& b);  // sets b.peaks.copy_gbps
void measure_read(Bench& b);
void measure_gemm(Bench& b);  // sets b.peaks.gemm_tflops

}  // namespace flashserve::bench
