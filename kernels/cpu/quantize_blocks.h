// Reference quantizers, one block (32 or 256 elements of x) at a time; quantize_row dispatches here.
// They build test models and test inputs, so they favour simple round-to-nearest over the scale
// searches llama.cpp runs; every block they write is valid and decodes within a few steps of x.
#pragma once
#include "kernels/cpu/block_codec.h"  // quantize_block for Q8_0, which the KV cache uses in every copy
#include "kernels/cpu/isa_namespace.h"
#include "kernels/dtype.h"

namespace flashserve::kernels::FLASHSERVE_ISA::codec {

void quantize_block(const float* x, BlockQ4_0& y);
void quantize_block(const float* x, BlockQ4_1& y);
void quantize_block(const float* x, BlockQ5_0& y);
void quantize_block(const float* x, BlockQ5_1& y);
void quantize_block(const float* x, BlockIQ4_NL& y);
void quantize_block(const float* x, BlockQ2_K& y);
void quantize_block(const float* x, BlockQ3_K& y);
void quantize_block(const float* x, BlockQ4_K& y);
void quantize_block(const float* x, BlockQ5_K& y);
void quantize_block(const float* x, BlockQ6_K& y);
void quantize_block(const float* x, BlockQ8_K& y);
void quantize_block(const float* x, BlockIQ4_XS& y);

}  // namespace flashserve::kernels::FLASHSERVE_ISA::codec
