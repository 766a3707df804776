// bench_cuda_ops: GPU timings of the CUDA ops (kernels/cuda), one line of key=value fields per case.
//
// First the device and its two measured ceilings: copy bandwidth (a large device-to-device copy,
// bytes read + bytes written) and a bf16 GEMM through cuBLASLt (8192^3, f32 accumulation). Every
// later case reports its time (median / p95 / p99 / min over the timed runs, microseconds), the
// device memory it raised (peak_mib), the bytes it must move and the flops it must do, the rates
// those give (gbps = 1e9 bytes/s, tflops = 1e12 flop/s) and their fractions of the measured
// ceilings (frac_bw, frac_tflops). Targets that need no other program are judged here
// (target / target_met); those against PyTorch are judged by compare.py. See bench/README.md.
//
//   bench_cuda_ops [--quick] [--filter SUBSTR] [--runs N] [--warmup N] [--max-seconds S]
//                  [--no-flush] [--list]
//
// Exit codes: 0 all cases ran, 1 some case failed (its line says status=error), 2 no CUDA device
// or bad arguments.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/bench_case.h"
#include "bench/kernels/ceilings.h"
#include "bench/kernels/device_inputs.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/moe_routing.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/swiglu.h"

namespace fk = flashserve::kernels;
using namespace flashserve::bench;

namespace {

constexpr float kEps = 1e-5f;

void bench_rmsnorm(Bench& b, int64_t rows, int64_t dim) {
  Case c("rmsnorm");
  c.with("dtype", "f32").with("rows", rows).with("dim", dim);
  run_case(b, c, [&] {
    MemProbe probe;
    Buf<float> x(rows * dim), w(dim), y(rows * dim);
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    fill_uniform(w.get(), w.size(), 0.5f, 1.5f, b.stream);
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::rmsnorm(x.get(), w.get(), y.get(), rows, dim, kEps, b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(2 * rows * dim + dim) * 4;  // read x, write y (+ weight)
    m.check = check_finite(y.get(), y.size(), b.stream);
    if (rows >= 4096) {
      set_bandwidth_target(m, b, 0.80);
    }
    return m;
  });
}

void bench_add_rmsnorm(Bench& b, int64_t rows, int64_t dim) {
  Case c("add_rmsnorm");
  c.with("dtype", "f32").with("rows", rows).with("dim", dim);
  run_case(b, c, [&] {
    MemProbe probe;
    Buf<float> x(rows * dim), r(rows * dim), w(dim), y(rows * dim);
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    fill_uniform(r.get(), r.size(), -0.01f, 0.01f, b.stream);  // x grows slowly over the runs
    fill_uniform(w.get(), w.size(), 0.5f, 1.5f, b.stream);
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::add_rmsnorm(x.get(), r.get(), w.get(), y.get(), rows, dim, kEps, b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(4 * rows * dim + dim) * 4;  // read x and residual, write x and y
    m.check = join_checks(check_finite(y.get(), y.size(), b.stream), check_finite(x.get(), x.size(), b.stream));
    if (rows >= 4096) {
      set_bandwidth_target(m, b, 0.80);
    }
    return m;
  });
}

void bench_rope(Bench& b, int64_t tokens, int64_t heads, int64_t head_dim) {
  Case c("rope");
  c.with("dtype", "f32").with("tokens", tokens).with("heads", heads).with("head_dim", head_dim);
  run_case(b, c, [&] {
    MemProbe probe;
    Buf<float> x(tokens * heads * head_dim);
    Buf<int32_t> pos(tokens);
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    std::vector<int32_t> hp(tokens);
    for (int64_t t = 0; t < tokens; ++t) hp[t] = int32_t(t % 8192);  // sequences of up to 8192 positions
    pos.upload(hp);
    fk::RopeParams p;
    p.rot_dim = int32_t(head_dim);
    p.theta_base = 10000.0f;
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::rope(x.get(), pos.get(), tokens, heads, head_dim, p, b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(2 * tokens * heads * head_dim) * 4 + double(tokens) * 4;  // in place: read + write x
    m.check = check_finite(x.get(), x.size(), b.stream);
    return m;
  });
}

void bench_swiglu(Bench& b, int64_t rows, int64_t dim) {
  Case c("swiglu");
  c.with("dtype", "f32").with("rows", rows).with("dim", dim);
  run_case(b, c, [&] {
    MemProbe probe;
    const size_t n = size_t(rows * dim);
    Buf<float> g(n), u(n), o(n);
    fill_uniform(g.get(), n, -4.0f, 4.0f, b.stream);
    fill_uniform(u.get(), n, -1.0f, 1.0f, b.stream);
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::swiglu(g.get(), u.get(), o.get(), int64_t(n), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = 3.0 * double(n) * 4;
    m.check = check_finite(o.get(), n, b.stream);
    return m;
  });
}

void bench_get_rows(Bench& b, fk::DType t, int64_t vocab, int64_t k, int64_t n) {
  Case c("get_rows");
  c.with("wtype", type_name(t)).with("vocab", vocab).with("k", k).with("n", n);
  run_case(b, c, [&] {
    MemProbe probe;
    const size_t rb = fk::row_bytes(t, k);
    Buf<uint8_t> w(size_t(vocab) * rb);
    fill_weights(w.get(), t, vocab, k, b.stream);
    std::mt19937 rng(7);
    std::vector<int32_t> hid(n);
    for (auto& v : hid) v = int32_t(rng() % uint32_t(vocab));
    Buf<int32_t> ids(n);
    ids.upload(hid);
    Buf<float> out(size_t(n * k));
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::get_rows(w.get(), t, k, ids.get(), n, out.get(), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(n) * double(rb) + double(n * k) * 4 + double(n) * 4;
    m.check = check_finite(out.get(), out.size(), b.stream);
    return m;
  });
}

// tokens <= kGemvMaxTokens: the dequantizing GEMV (bandwidth: gbps / frac_bw on weight + x + y
// bytes). Above: weights expanded into scratch, then cuBLASLt (compute: tflops / frac_tflops).
void bench_matmul(Bench& b, fk::DType t, int64_t tokens, int64_t n_out, int64_t k) {
  Case c("matmul");
  c.with("wtype", type_name(t)).with("tokens", tokens).with("n_out", n_out).with("k", k);
  run_case(b, c, [&] {
    MemProbe probe;
    const size_t rb = fk::row_bytes(t, k);
    Buf<uint8_t> w(size_t(n_out) * rb);
    fill_weights(w.get(), t, n_out, k, b.stream);
    Buf<float> x(size_t(tokens * k)), y(size_t(tokens * n_out));
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    fk::cuda::MatmulContext ctx;
    ctx.reserve(tokens, k, n_out);
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::matmul(ctx, x.get(), tokens, k, w.get(), t, n_out, y.get(), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(n_out) * double(rb) + double(tokens) * double(k + n_out) * 4;
    m.flops = 2.0 * double(tokens) * double(n_out) * double(k);
    m.add("path", tokens <= fk::cuda::kGemvMaxTokens ? "gemv" : "cublaslt");
    m.add("weight_bytes", std::to_string(size_t(n_out) * rb));
    m.check = check_finite(y.get(), y.size(), b.stream);
    return m;
  });
}

// Block tables: each sequence's blocks, taken in order from a random permutation of the pool, as
// after the allocator has churned. Returns [num_seqs][blocks_per_seq].
std::vector<int32_t> shuffled_block_tables(int64_t num_seqs, int64_t blocks_per_seq, uint32_t seed) {
  std::vector<int32_t> perm(size_t(num_seqs * blocks_per_seq));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  return perm;
}

constexpr int32_t kBlockSize = 16;
constexpr int32_t kHeads = 32;
constexpr int32_t kKvHeads = 8;

void bench_kv_write(Bench& b, fk::DType kv, int64_t tokens, int32_t head_dim) {
  Case c("kv_write");
  c.with("dtype", type_name(kv)).with("tokens", tokens).with("kv_heads", kKvHeads).with("head_dim", head_dim);
  run_case(b, c, [&] {
    MemProbe probe;
    const fk::KvLayout layout{kBlockSize, kKvHeads, head_dim};
    const int64_t blocks = (tokens + kBlockSize - 1) / kBlockSize;
    const size_t row = size_t(kKvHeads) * head_dim;
    const size_t cache_elems = size_t(blocks) * kBlockSize * row;
    Buf<uint16_t> kc(cache_elems), vc(cache_elems);
    Buf<float> k(size_t(tokens) * row), v(size_t(tokens) * row);
    fill_uniform(k.get(), k.size(), -1.0f, 1.0f, b.stream);
    fill_uniform(v.get(), v.size(), -1.0f, 1.0f, b.stream);
    const std::vector<int32_t> table = shuffled_block_tables(1, blocks, 11);
    std::vector<int32_t> slots(tokens);
    for (int64_t t = 0; t < tokens; ++t) slots[t] = table[t / kBlockSize] * kBlockSize + int32_t(t % kBlockSize);
    Buf<int32_t> slot_mapping(tokens);
    slot_mapping.upload(slots);
    Measure m;
    m.st = b.timer->run(
        [&] {
          fk::cuda::kv_write(layout, kv, kc.get(), vc.get(), k.get(), v.get(), slot_mapping.get(), tokens, b.stream);
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(tokens) * double(row) * 2 * (4 + 2) + double(tokens) * 4;  // read f32 K,V; write 16-bit K,V
    return m;
  });
}

struct AttnBuffers {
  Buf<int32_t> query_start, context_lens, block_tables;
  AttnBuffers(int64_t seqs, int64_t blocks_per_seq)
      : query_start(seqs + 1), context_lens(seqs), block_tables(seqs * blocks_per_seq) {}
};

// Causal prefill of `batch` fresh sequences of `seq` tokens each (their K/V already in the pages).
void bench_prefill(Bench& b, fk::DType kv, int32_t head_dim, int64_t seq, int64_t batch) {
  Case c("prefill_attention");
  c.with("dtype", type_name(kv)).with("head_dim", head_dim).with("seq", seq).with("batch", batch)
      .with("heads", kHeads).with("kv_heads", kKvHeads);
  run_case(b, c, [&] {
    MemProbe probe;
    const fk::KvLayout layout{kBlockSize, kKvHeads, head_dim};
    const int64_t tokens = seq * batch;
    const int64_t bps = (seq + kBlockSize - 1) / kBlockSize;
    const size_t cache_elems = size_t(batch * bps) * kBlockSize * kKvHeads * head_dim;
    Buf<uint16_t> kc(cache_elems), vc(cache_elems);
    fill_cache(kc.get(), kv, cache_elems, b.stream);
    fill_cache(vc.get(), kv, cache_elems, b.stream);
    Buf<float> q(size_t(tokens) * kHeads * head_dim), out(size_t(tokens) * kHeads * head_dim);
    fill_uniform(q.get(), q.size(), -1.0f, 1.0f, b.stream);
    AttnBuffers ab(batch, bps);
    std::vector<int32_t> qs(batch + 1), cl(batch, int32_t(seq));
    for (int64_t s = 0; s <= batch; ++s) qs[s] = int32_t(s * seq);
    ab.query_start.upload(qs);
    ab.context_lens.upload(cl);
    ab.block_tables.upload(shuffled_block_tables(batch, bps, 13));
    fk::AttentionBatch ba;
    ba.query_start = ab.query_start.get();
    ba.context_lens = ab.context_lens.get();
    ba.block_tables = ab.block_tables.get();
    ba.num_seqs = int32_t(batch);
    ba.max_blocks_per_seq = int32_t(bps);
    ba.max_num_queries = int32_t(seq);
    ba.max_context_len = int32_t(seq);
    const float scale = 1.0f / std::sqrt(float(head_dim));
    Measure m;
    m.st = b.timer->run(
        [&] {
          fk::cuda::prefill_attention(q.get(), kc.get(), vc.get(), kv, layout, ba, kHeads, scale, out.get(), b.stream);
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    // Causal: half of the QK^T and PV products, 2 flops each -> 4 * seq^2 * d * heads / 2 per sequence.
    m.flops = double(batch) * 4.0 * double(seq) * double(seq) * head_dim * kHeads / 2.0;
    m.bytes = double(tokens) * kHeads * head_dim * 4 * 2 + double(tokens) * kKvHeads * head_dim * 2 * 2;
    m.check = check_finite(out.get(), out.size(), b.stream);
    if (seq >= 2048) {
      m.target = "speed_vs_torch_sdpa_flash>=0.90";
      m.target_met = "compare.py";
    }
    m.add("q_out", "f32");
    return m;
  });
}

// One query per sequence over `context` cached positions.
void bench_decode(Bench& b, fk::DType kv, int32_t head_dim, int64_t batch, int64_t context) {
  Case c("decode_attention");
  c.with("dtype", type_name(kv)).with("head_dim", head_dim).with("batch", batch).with("context", context)
      .with("heads", kHeads).with("kv_heads", kKvHeads);
  run_case(b, c, [&] {
    MemProbe probe;
    const fk::KvLayout layout{kBlockSize, kKvHeads, head_dim};
    const int64_t bps = (context + kBlockSize - 1) / kBlockSize;
    const size_t cache_elems = size_t(batch * bps) * kBlockSize * kKvHeads * head_dim;
    Buf<uint16_t> kc(cache_elems), vc(cache_elems);
    fill_cache(kc.get(), kv, cache_elems, b.stream);
    fill_cache(vc.get(), kv, cache_elems, b.stream);
    Buf<float> q(size_t(batch) * kHeads * head_dim), out(size_t(batch) * kHeads * head_dim);
    fill_uniform(q.get(), q.size(), -1.0f, 1.0f, b.stream);
    AttnBuffers ab(batch, bps);
    std::vector<int32_t> qs(batch + 1), cl(batch, int32_t(context));
    for (int64_t s = 0; s <= batch; ++s) qs[s] = int32_t(s);
    ab.query_start.upload(qs);
    ab.context_lens.upload(cl);
    ab.block_tables.upload(shuffled_block_tables(batch, bps, 17));
    fk::AttentionBatch ba;
    ba.query_start = ab.query_start.get();
    ba.context_lens = ab.context_lens.get();
    ba.block_tables = ab.block_tables.get();
    ba.num_seqs = int32_t(batch);
    ba.max_blocks_per_seq = int32_t(bps);
    ba.max_num_queries = 1;
    ba.max_context_len = int32_t(context);
    const size_t ws_bytes =
        fk::cuda::decode_attention_workspace_bytes(int32_t(batch), kHeads, head_dim, int32_t(context));
    Buf<uint8_t> ws(ws_bytes);
    const float scale = 1.0f / std::sqrt(float(head_dim));
    Measure m;
    m.st = b.timer->run(
        [&] {
          fk::cuda::decode_attention(q.get(), kc.get(), vc.get(), kv, layout, ba, kHeads, scale, out.get(), ws.get(),
                                     b.stream);
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    // The K and V pages each sequence reads, once: the floor of any decode kernel.
    const double kv_bytes = double(batch) * double(context) * kKvHeads * head_dim * 2 * 2;
    m.bytes = kv_bytes;
    m.flops = 4.0 * double(batch) * double(context) * head_dim * kHeads;
    m.add("floor_us", b.peaks.copy_gbps > 0 ? kv_bytes / (b.peaks.copy_gbps * 1e3) : 0, 2);
    m.add("workspace_mib", double(ws_bytes) / (1 << 20), 2);
    m.check = check_finite(out.get(), out.size(), b.stream);
    if (kv == fk::DType::F16 && head_dim == 128 && batch == 64 && context == 4096) {
      set_bandwidth_target(m, b, 0.80);
    }
    return m;
  });
}

void bench_moe(Bench& b, int64_t tokens, int32_t experts, int32_t top_k) {
  Case c("moe_route");
  c.with("dtype", "f32").with("tokens", tokens).with("experts", experts).with("top_k", top_k);
  run_case(b, c, [&] {
    MemProbe probe;
    Buf<float> logits(size_t(tokens) * experts);
    fill_uniform(logits.get(), logits.size(), -3.0f, 3.0f, b.stream);
    const size_t assignments = size_t(tokens) * top_k;
    Buf<int32_t> ids(assignments), offsets(size_t(experts) + 1), sorted(assignments);
    Buf<float> weights(assignments);
    const size_t ws_bytes = fk::cuda::moe_route_workspace_bytes(tokens, experts, top_k);
    Buf<uint8_t> ws(ws_bytes);
    fk::MoeRouting r{ids.get(), weights.get(), offsets.get(), sorted.get()};
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::moe_route(logits.get(), tokens, experts, top_k, true, r, ws.get(), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(tokens) * experts * 4 + double(assignments) * (4 + 4 + 4) + double(experts + 1) * 4;
    m.add("renormalize", "1");
    m.add("workspace_mib", double(ws_bytes) / (1 << 20), 3);
    int32_t total = -1;
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(&total, offsets.get() + experts, sizeof total, cudaMemcpyDeviceToHost));
    std::string chk = join_checks(check_range(ids.get(), assignments, 0, experts, b.stream),
                                  check_range(sorted.get(), assignments, 0, int32_t(assignments), b.stream));
    chk = join_checks(chk, check_finite(weights.get(), assignments, b.stream));
    if (total != int32_t(assignments)) chk = join_checks(chk, "offsets_total:" + std::to_string(total));
    m.check = chk;
    if (tokens == 32768 && experts == 64 && top_k == 2) {
      m.target = "median_us<150";
      m.target_met = m.st.median_us < 150.0 ? "yes" : "no";
    }
    return m;
  });
}

void bench_sample(Bench& b, const std::string& mode, int32_t rows, int32_t vocab) {
  Case c("sample_rows");
  c.with("mode", mode).with("rows", rows).with("vocab", vocab);
  run_case(b, c, [&] {
    MemProbe probe;
    const size_t n = size_t(rows) * vocab;
    Buf<float> pristine(n), logits(n);
    fill_uniform(pristine.get(), n, -10.0f, 10.0f, b.stream);
    std::mt19937 rng(23);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    std::vector<fk::SamplingRow> hrows(rows);
    std::vector<fk::TokenAdjust> hadj;
    for (int32_t r = 0; r < rows; ++r) {
      fk::SamplingRow& s = hrows[r];
      s.uniform = uni(rng);
      if (mode == "greedy") {
        s.temperature = 0.0f;
      } else if (mode == "top_p") {
        s.temperature = 0.8f;
        s.top_p = 0.9f;
      } else {  // top_k_top_p_penalties
        s.temperature = 0.7f;
        s.top_k = 50;
        s.top_p = 0.95f;
        s.repetition_penalty = 1.1f;
        s.presence_penalty = 0.1f;
        s.frequency_penalty = 0.1f;
        s.adjust_begin = int32_t(hadj.size());
        for (int i = 0; i < 32; ++i) hadj.push_back({int32_t(rng() % uint32_t(vocab)), int32_t(rng() % 3), 1, 0.0f});
        s.adjust_end = int32_t(hadj.size());
      }
    }
    if (hadj.empty()) hadj.push_back({0, 0, 0, 0.0f});  // a valid pointer even when no row uses it
    Buf<fk::SamplingRow> drows(rows);
    drows.upload(hrows);
    Buf<fk::TokenAdjust> dadj(hadj.size());
    dadj.upload(hadj);
    Buf<int32_t> tokens(rows);
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::sample_rows(logits.get(), rows, vocab, drows.get(), dadj.get(), nullptr, tokens.get(), b.stream); },
        // The op overwrites its logits: restore them before every run, untimed.
        [&] {
          FLASHSERVE_CUDA_CHECK(
              cudaMemcpyAsync(logits.get(), pristine.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, b.stream));
        },
        &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(n) * 4;  // the logits, read once
    m.check = check_range(tokens.get(), size_t(rows), 0, vocab, b.stream);
    return m;
  });
}

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--filter SUBSTR] [--runs N] [--warmup N] [--max-seconds S] [--no-flush] [--list]\n"
               "  --quick        3 warm-up runs, at most 30 timed runs (0.5 s) per case\n"
               "  --filter S     only cases whose id (kernel:key=value,...) contains S\n"
               "  --runs N       at most N timed runs per case (default 200; at least 20 unless N is smaller)\n"
               "  --warmup N     warm-up runs per case (default 10)\n"
               "  --max-seconds  fewer timed runs when a case would take longer than this (default 2)\n"
               "  --no-flush     do not evict L2 before each run\n"
               "  --list         print the case ids and exit (needs no GPU)\n",
               argv0);
}

void all_cases(Bench& b) {
  using fk::DType;
  bench_rmsnorm(b, 16384, 4096);
  bench_rmsnorm(b, 64, 4096);
  bench_add_rmsnorm(b, 16384, 4096);
  bench_add_rmsnorm(b, 64, 4096);
  bench_rope(b, 16384, 32, 128);
  bench_rope(b, 64, 32, 128);
  bench_swiglu(b, 16384, 11008);
  bench_swiglu(b, 64, 11008);

  for (DType t : {DType::F16, DType::Q4_0, DType::Q8_0}) bench_get_rows(b, t, 32000, 4096, 4096);

  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}};
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::F16})
    for (int64_t tokens : {1, 8})
      for (auto [n_out, k] : shapes) bench_matmul(b, t, tokens, n_out, k);
  for (DType t : {DType::F16, DType::Q4_0, DType::Q8_0})
    for (int64_t tokens : {512, 4096})
      for (auto [n_out, k] : {shapes[0], shapes[1]}) bench_matmul(b, t, tokens, n_out, k);

  for (DType kv : {DType::F16, DType::BF16}) bench_kv_write(b, kv, 16384, 128);

  for (DType kv : {DType::F16, DType::BF16})
    for (int32_t hd : {64, 128})
      for (int64_t seq : {512, 2048, 4096, 8192}) bench_prefill(b, kv, hd, seq, 16384 / seq);

  bench_decode(b, DType::F16, 128, 64, 4096);
  bench_decode(b, DType::BF16, 128, 64, 4096);
  bench_decode(b, DType::F16, 64, 64, 4096);
  bench_decode(b, DType::F16, 128, 16, 16384);
  bench_decode(b, DType::F16, 128, 256, 1024);
  bench_decode(b, DType::F16, 128, 1, 4096);

  bench_moe(b, 32768, 64, 2);
  bench_moe(b, 32768, 8, 2);
  bench_moe(b, 32768, 256, 8);
  bench_moe(b, 64, 64, 2);

  bench_sample(b, "greedy", 64, 49152);
  bench_sample(b, "top_p", 64, 49152);
  bench_sample(b, "top_k_top_p_penalties", 64, 49152);
  bench_sample(b, "top_p", 64, 128256);
}

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(argv[0]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      b.opt.warmup = 3;
      b.opt.runs = 30;
      b.opt.min_runs = 10;
      b.opt.max_seconds = 0.5;
    } else if (a == "--filter") {
      b.opt.filter = next();
    } else if (a == "--runs") {
      b.opt.runs = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--warmup") {
      b.opt.warmup = std::max(0, std::atoi(next().c_str()));
    } else if (a == "--max-seconds") {
      b.opt.max_seconds = std::atof(next().c_str());
    } else if (a == "--no-flush") {
      b.opt.flush_l2 = false;
    } else if (a == "--list") {
      b.opt.list = true;
    } else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "bench_cuda_ops: unknown argument '%s'\n", a.c_str());
      usage(argv[0]);
      return 2;
    }
  }

  if (b.opt.list) {
    all_cases(b);
    return 0;
  }

  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_cuda_ops: no CUDA device (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
    return 2;
  }

  try {
    FLASHSERVE_CUDA_CHECK(cudaSetDevice(0));
    std::printf("# bench_cuda_ops: warmup=%d runs<=%d min_runs=%d max_seconds=%.2f flush_l2=%d filter=%s\n",
                b.opt.warmup, b.opt.runs, b.opt.min_runs, b.opt.max_seconds, b.opt.flush_l2 ? 1 : 0,
                b.opt.filter.empty() ? "-" : b.opt.filter.c_str());
    print_device(0);
    FLASHSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
    Timer timer(b.opt, b.stream);
    b.timer = &timer;
    // The two ceilings every fraction divides by: always measured, whatever the filter.
    measure_copy(b);
    measure_read(b);
    measure_gemm(b);
    all_cases(b);
    b.timer = nullptr;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_cuda_ops: %s\n", ex.what());
    std::printf("# fatal: %s\n", ex.what());
    return 1;
  }
  std::printf("# done: %d cases, %d failed\n", b.ran, b.failures);
  return b.failures ? 1 : 0;
}
