// Device buffers, random inputs and output checks shared by the GPU benchmark's cases.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/dtype.h"

namespace flashserve::bench {

// Grid-stride launches use up to 16 blocks per SM: set from the device's SM count.
void set_grid_sms(int sms);
unsigned grid_for(size_t n, int threads = 256);

// Device memory for n elements of T, freed with the object.
template <typename T>
class Buf {
 public:
  explicit Buf(size_t n) : n_(n) { FLASHSERVE_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(1, n) * sizeof(T))); }
  ~Buf() { cudaFree(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  void upload(const std::vector<T>& h) {
    if (h.size() != n_) throw std::logic_error("Buf::upload: size mismatch");
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(p_, h.data(), bytes(), cudaMemcpyHostToDevice));
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

// Uniform in [lo, hi), a fresh seed each call. T: float, __half or __nv_bfloat16.
template <typename T>
void fill_uniform(T* p, size_t n, float lo, float hi, cudaStream_t s);
void fill_bytes(uint8_t* p, size_t n, cudaStream_t s);
// A weight matrix of `rows` rows of k elements, random, in its GGUF layout (sane quant scales).
void fill_weights(void* w, kernels::DType t, int64_t rows, int64_t k, cudaStream_t s);
// A KV cache of n F16 or BF16 elements.
void fill_cache(void* p, kernels::DType t, size_t n, cudaStream_t s);

// "ok", or what is wrong: "nonfinite:N" / "out_of_range:N" (values outside [lo, hi)).
std::string check_finite(const float* p, size_t n, cudaStream_t s);
std::string check_range(const int32_t* p, size_t n, int32_t lo, int32_t hi, cudaStream_t s);
std::string join_checks(const std::string& a, const std::string& b);

// The lower-case GGUF type name, as case ids spell it (f16, q4_0, ...).
std::string type_name(kernels::DType t);

}  // namespace flashserve::bench
