#pragma once

namespace flashserve::kernels {

// Worker threads the CPU kernels split output rows across (default: all cores).
void set_num_threads(int n);
int num_threads();

}  // namespace flashserve::kernels
