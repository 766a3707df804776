// The cuBLASLt calls kernels/cuda/matmul.cu makes (one TN product, 16-bit or f32 operands, f32
// accumulation and output), done plainly on the host: enough for the GEMM path's tests and for the
// runner's prefill steps under the emulator. Anything else is refused as not supported.
#include <cublasLt.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "tests/cuda_emu/cuda_emu.h"

struct cublasLtContext {};

namespace {

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Desc {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};

// The opaque descriptors are fixed-size blobs in the header; ours are copied in and out of them.
template <class T, class Opaque>
T read(const Opaque* o) {
  static_assert(sizeof(T) <= sizeof(o->data) && std::is_trivially_copyable_v<T>);
  T t;
  std::memcpy(&t, o->data, sizeof(T));
  return t;
}
template <class T, class Opaque>
void write(Opaque* o, const T& t) {
  static_assert(sizeof(T) <= sizeof(o->data) && std::is_trivially_copyable_v<T>);
  std::memcpy(o->data, &t, sizeof(T));
}

float element(const void* base, cudaDataType type, int64_t i) {
  switch (type) {
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

bool supported(cudaDataType t) { return t == CUDA_R_16F || t == CUDA_R_16BF || t == CUDA_R_32F; }

}  // namespace

const char* cublasLtGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED";
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "not supported by the cuda_emu cuBLASLt subset";
}
cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = new cublasLtMatmulDescOpaque_t{};
  write(*desc, Desc{});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  if (bytes != sizeof(cublasOperation_t)) return CUBLAS_STATUS_NOT_SUPPORTED;
  Desc d = read<Desc>(desc);
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA) std::memcpy(&d.trans_a, buf, bytes);
  else if (attr == CUBLASLT_MATMUL_DESC_TRANSB) std::memcpy(&d.trans_b, buf, bytes);
  else return CUBLAS_STATUS_NOT_SUPPORTED;
  write(desc, d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!supported(type) || ld < int64_t(rows)) return CUBLAS_STATUS_NOT_SUPPORTED;
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  write(*layout, Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* found) {
  const Desc o = read<Desc>(desc);
  const Layout la = read<Layout>(a), lb = read<Layout>(b), ld = read<Layout>(d);
  const bool tn = o.trans_a == CUBLAS_OP_T && o.trans_b == CUBLAS_OP_N;
  if (!tn || la.rows != lb.rows || la.cols != ld.rows || lb.cols != ld.cols || ld.type != CUDA_R_32F ||
      requested < 1)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

// The operands widened to f32 once, column after column (each a K-long row in memory).
std::vector<float> widen_columns(const void* base, const Layout& l) {
  std::vector<float> out(l.rows * l.cols);
  for (uint64_t j = 0; j < l.cols; ++j)
    for (uint64_t i = 0; i < l.rows; ++i) out[j * l.rows + i] = element(base, l.type, int64_t(j) * l.ld + int64_t(i));
  return out;
}

// Sixteen running sums the compiler can keep in vector registers.
float dot(const float* a, const float* b, uint64_t k) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  uint64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int u = 0; u < kLanes; ++u) lanes[u] += a[i + u] * b[i + u];
  float sum = 0.0f;
  for (; i < k; ++i) sum += a[i] * b[i];
  for (float x : lanes) sum += x;
  return sum;
}

}  // namespace

// D (m x n) = alpha A^T B + beta C with A k x m and B k x n, column-major; C is D's own buffer here.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t*, void*, size_t,
                              cudaStream_t stream) {
  const Layout la = read<Layout>(a_desc), lb = read<Layout>(b_desc), ld = read<Layout>(d_desc);
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  if (c != d) return CUBLAS_STATUS_NOT_SUPPORTED;
  flashserve::cuda_emu::enqueue(stream, [=] {
    const std::vector<float> wa = widen_columns(a, la), wb = widen_columns(b, lb);
    float* out = static_cast<float*>(d);
    for (uint64_t j = 0; j < ld.cols; ++j)
      for (uint64_t i = 0; i < ld.rows; ++i) {
        const float acc = dot(&wa[i * la.rows], &wb[j * lb.rows], la.rows);
        float& y = out[int64_t(j) * ld.ld + int64_t(i)];
        y = be == 0.0f ? al * acc : al * acc + be * y;
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}
