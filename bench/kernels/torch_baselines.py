#!/usr/bin/env python3
"""PyTorch baselines for bench_cuda_ops, on the same shapes, in the same line format.

Each case prints one line of key=value fields, e.g.

  impl=torch_sdpa_flash case=prefill_attention:dtype=f16,head_dim=128,seq=4096,batch=4,heads=32,kv_heads=8
  kernel=prefill_attention dtype=f16 ... runs=200 median_us=... p95_us=... p99_us=... min_us=...
  peak_mib=... bytes=... flops=... gbps=... tflops=... frac_bw=... frac_tflops=... check=ok status=ok

`case` is the join key with bench_cuda_ops (compare.py matches on it). impl is one of
  torch_eager       plain PyTorch ops, one kernel per op
  torch_compile     the same function through torch.compile (Inductor), dynamic=False
  torch_functional  torch.nn.functional.rms_norm (where it exists)
  torch_sdpa_flash  F.scaled_dot_product_attention with only the flash backend enabled
  torch             the device ceilings (copy, bf16 GEMM) measured through PyTorch

bytes / flops are the same minimal counts bench_cuda_ops uses, so gbps / tflops compare directly;
frac_bw / frac_tflops divide by the ceilings measured here through PyTorch.

Differences from our ops, by design of the comparison:
  * attention: SDPA reads contiguous q/k/v in fp16/bf16 ([batch, seq, heads, dim] viewed as
    [batch, heads, seq, dim]); our kernels read K/V from a paged cache through shuffled block tables
    and take f32 q / write f32 out. GQA (32 query heads over 8 KV heads) uses enable_gqa when the
    flash backend accepts it (gqa=native), else K/V are expanded once, untimed (gqa=expanded).
  * norms / rope / swiglu: f32 like ours; torch writes fresh outputs (rope out of place), ours
    writes in place where the contract says so -- the same bytes either way.
  * MoE: softmax, topk, renormalize, then a stable argsort by expert and per-expert counts.

Timing as in bench_cuda_ops: warm-up runs, then timed runs each between two torch.cuda.Events,
with a read of a 256 MiB buffer before each run (untimed) to evict L2. Needs only torch.

  python3 torch_baselines.py [--quick] [--filter SUBSTR] [--runs N] [--warmup N]
                             [--max-seconds S] [--no-flush] [--no-compile] [--list]
Exit codes: 0 all ran, 1 some case failed (status=error), 2 no CUDA device / no torch.
"""
import argparse
import math
import statistics
import sys

EPS = 1e-5
HEADS = 32
KV_HEADS = 8


def case_id(kernel, shape):
    return kernel + ":" + ",".join(f"{k}={v}" for k, v in shape)


def fmt(v, d):
    return f"{v:.{d}f}"


class Line:
    def __init__(self):
        self.fields = []

    def add(self, k, v):
        self.fields.append((k, str(v).replace(" ", "_")))
        return self

    def print(self):
        print(" ".join(f"{k}={v}" for k, v in self.fields), flush=True)


def summarize(us):
    us = sorted(us)
    n = len(us)

    def pct(p):
        idx = min(max(math.ceil(p * n), 1), n) - 1
        return us[idx]

    return {
        "runs": n,
        "median_us": statistics.median(us),
        "p95_us": pct(0.95),
        "p99_us": pct(0.99),
        "min_us": us[0],
    }


# --------------------------------------------------------------------------------------------
# The cases, in the order and with the shape keys bench_cuda_ops uses. Each entry:
# (kernel, [(key, value), ...], [impl, ...], builder name, params).


def case_list(with_compile):
    eager_compile = ["torch_eager"] + (["torch_compile"] if with_compile else [])
    cases = []

    def add(kernel, shape, impls, builder, **params):
        cases.append((kernel, shape, impls, builder, params))

    for rows in (16384, 64):
        add("rmsnorm", [("dtype", "f32"), ("rows", rows), ("dim", 4096)],
            eager_compile + ["torch_functional"], "rmsnorm", rows=rows, dim=4096)
    for rows in (16384, 64):
        add("add_rmsnorm", [("dtype", "f32"), ("rows", rows), ("dim", 4096)], eager_compile,
            "add_rmsnorm", rows=rows, dim=4096)
    for tokens in (16384, 64):
        add("rope", [("dtype", "f32"), ("tokens", tokens), ("heads", 32), ("head_dim", 128)],
            eager_compile, "rope", tokens=tokens, heads=32, head_dim=128)
    for rows in (16384, 64):
        add("swiglu", [("dtype", "f32"), ("rows", rows), ("dim", 11008)], eager_compile, "swiglu",
            rows=rows, dim=11008)
    add("get_rows", [("wtype", "f16"), ("vocab", 32000), ("k", 4096), ("n", 4096)], ["torch_eager"],
        "get_rows", vocab=32000, k=4096, n=4096)
    for tokens in (1, 8):
        for n_out, k in ((4096, 4096), (11008, 4096), (4096, 11008)):
            add("matmul", [("wtype", "f16"), ("tokens", tokens), ("n_out", n_out), ("k", k)],
                ["torch_eager"], "matmul", tokens=tokens, n_out=n_out, k=k)
    for tokens in (512, 4096):
        for n_out, k in ((4096, 4096), (11008, 4096)):
            add("matmul", [("wtype", "f16"), ("tokens", tokens), ("n_out", n_out), ("k", k)],
                ["torch_eager"], "matmul", tokens=tokens, n_out=n_out, k=k)
    for dt in ("f16", "bf16"):
        add("kv_write", [("dtype", dt), ("tokens", 16384), ("kv_heads", KV_HEADS), ("head_dim", 128)],
            ["torch_eager"], "kv_write", dtype=dt, tokens=16384, head_dim=128)
    for dt in ("f16", "bf16"):
        for hd in (64, 128):
            for seq in (512, 2048, 4096, 8192):
                batch = 16384 // seq
                add("prefill_attention",
                    [("dtype", dt), ("head_dim", hd), ("seq", seq), ("batch", batch), ("heads", HEADS),
                     ("kv_heads", KV_HEADS)],
                    ["torch_sdpa_flash"], "prefill", dtype=dt, head_dim=hd, seq=seq, batch=batch)
    for dt, hd, batch, ctx in (("f16", 128, 64, 4096), ("bf16", 128, 64, 4096), ("f16", 64, 64, 4096),
                               ("f16", 128, 16, 16384), ("f16", 128, 256, 1024), ("f16", 128, 1, 4096)):
        add("decode_attention",
            [("dtype", dt), ("head_dim", hd), ("batch", batch), ("context", ctx), ("heads", HEADS),
             ("kv_heads", KV_HEADS)],
            ["torch_sdpa_flash"], "decode", dtype=dt, head_dim=hd, batch=batch, context=ctx)
    for tokens, experts, top_k in ((32768, 64, 2), (32768, 8, 2), (32768, 256, 8), (64, 64, 2)):
        add("moe_route", [("dtype", "f32"), ("tokens", tokens), ("experts", experts), ("top_k", top_k)],
            eager_compile, "moe", tokens=tokens, experts=experts, top_k=top_k)
    for mode, vocab in (("greedy", 49152), ("top_p", 49152), ("top_p", 128256)):
        add("sample_rows", [("mode", mode), ("rows", 64), ("vocab", vocab)], ["torch_eager"], "sample",
            mode=mode, rows=64, vocab=vocab)
    return cases


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 warm-up runs, at most 30 timed runs (0.5 s) per case")
    ap.add_argument("--filter", default="", help="only cases whose id contains this")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=2.0)
    ap.add_argument("--no-flush", action="store_true", help="do not evict L2 before each run")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit (needs no GPU)")
    args = ap.parse_args()
    min_runs = 20
    if args.quick:
        args.warmup, args.runs, args.max_seconds, min_runs = 3, 30, 0.5, 10

    cases = [c for c in case_list(not args.no_compile) if args.filter in case_id(c[0], c[1])]
    if args.list:
        for kernel, shape, impls, _, _ in cases:
            print(case_id(kernel, shape), " ".join(impls))
        return 0

    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_baselines: cannot import torch ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_baselines: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)

    flush_buf = None if args.no_flush else torch.zeros((256 << 20) // 4, dtype=torch.int32, device=dev)

    def prep(before):
        if before is not None:
            before()
        if flush_buf is not None:
            flush_buf.sum()  # reads 256 MiB: evicts L2, leaves no dirty lines

    def timed(n, fn, before):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        stops = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            prep(before)
            starts[i].record()
            fn()
            stops[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, stops)]

    def run(fn, before=None):
        for _ in range(args.warmup):
            prep(before)
            fn()
        torch.cuda.synchronize()
        est = summarize(timed(min(3, args.runs), fn, before))["median_us"]
        n = int(args.max_seconds * 1e6 / max(1.0, est))
        n = max(min(min_runs, args.runs), min(args.runs, n))
        return summarize(timed(n, fn, before))

    peaks = {"copy_gbps": 0.0, "gemm_tflops": 0.0}

    def emit(impl, kernel, shape, st, peak_mib, nbytes, flops, extra=(), check="ok"):
        secs = st["median_us"] * 1e-6
        gbps = nbytes / secs / 1e9 if secs > 0 else 0.0
        tflops = flops / secs / 1e12 if secs > 0 else 0.0
        l = Line().add("impl", impl).add("case", case_id(kernel, shape)).add("kernel", kernel)
        for k, v in shape:
            l.add(k, v)
        l.add("runs", st["runs"]).add("median_us", fmt(st["median_us"], 2)).add("p95_us", fmt(st["p95_us"], 2))
        l.add("p99_us", fmt(st["p99_us"], 2)).add("min_us", fmt(st["min_us"], 2)).add("peak_mib", fmt(peak_mib, 1))
        l.add("bytes", int(nbytes)).add("flops", int(flops)).add("gbps", fmt(gbps, 1)).add("tflops", fmt(tflops, 2))
        l.add("frac_bw", fmt(gbps / peaks["copy_gbps"], 3) if peaks["copy_gbps"] else "0.000")
        l.add("frac_tflops", fmt(tflops / peaks["gemm_tflops"], 3) if peaks["gemm_tflops"] else "0.000")
        for k, v in extra:
            l.add(k, v)
        l.add("check", check).add("status", "ok")
        l.print()
        return gbps, tflops

    def finite(*ts):
        bad = sum(int((~torch.isfinite(t.float())).sum().item()) for t in ts)
        return "ok" if bad == 0 else f"nonfinite:{bad}"

    class Mem:
        """Peak bytes the caching allocator handed out during the case (tensors, workspaces)."""

        def __init__(self):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()

        def peak_mib(self):
            return (torch.cuda.max_memory_allocated() - self.base) / (1 << 20)

    # ---- device and ceilings
    p = torch.cuda.get_device_properties(dev)
    Line().add("impl", "torch").add("case", "device").add("kernel", "device").add("name", p.name) \
        .add("sms", p.multi_processor_count).add("mem_gib", fmt(p.total_memory / (1 << 30), 1)) \
        .add("torch", torch.__version__).add("cuda", torch.version.cuda) \
        .add("sdpa_flash_available", int(getattr(torch.backends.cuda, "is_flash_attention_available", lambda: -1)())) \
        .print()
    print(f"# torch_baselines: warmup={args.warmup} runs<={args.runs} min_runs={min_runs} "
          f"max_seconds={args.max_seconds} flush_l2={0 if args.no_flush else 1} compile={0 if args.no_compile else 1} "
          f"filter={args.filter or '-'}", flush=True)

    m = Mem()
    src = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    st = run(lambda: dst.copy_(src))
    peaks["copy_gbps"] = 2.0 * (1 << 30) / (st["median_us"] * 1e-6) / 1e9
    emit("torch", "copy_bandwidth", [("mib", 1024)], st, m.peak_mib(), 2.0 * (1 << 30), 0,
         [("note", "bytes=read+write")])
    del src, dst

    m = Mem()
    n = 8192
    a = torch.empty(n, n, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)
    b = torch.empty(n, n, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)
    st = run(lambda: torch.matmul(a, b))
    peaks["gemm_tflops"] = 2.0 * n ** 3 / (st["median_us"] * 1e-6) / 1e12
    emit("torch", "gemm_peak", [("dtype", "bf16"), ("m", n), ("n", n), ("k", n)], st, m.peak_mib(),
         3.0 * n * n * 2, 2.0 * n ** 3, [("note", "torch.matmul_bf16")])
    del a, b

    # ---- the op implementations
    def rmsnorm_fn(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w

    def add_rmsnorm_fn(x, r, w):
        h = x + r
        return h, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * w

    def rope_fn(x, pos, inv_freq):
        # GGML "normal" layout: rotate adjacent pairs (x[2i], x[2i+1]) by pos * theta_i.
        ang = pos.float()[:, None] * inv_freq[None, :]          # [T, D/2]
        c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]                    # [T, H, D/2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)

    def swiglu_fn(g, u):
        return F.silu(g) * u

    def moe_fn(logits, top_k, experts):
        probs = torch.softmax(logits, dim=-1)
        w, ids = torch.topk(probs, top_k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)                 # assignments grouped by expert
        counts = torch.zeros(experts, dtype=torch.int64, device=logits.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat))
        offsets = torch.cat((counts.new_zeros(1), torch.cumsum(counts, 0)))
        return ids, w, offsets, order

    compiled = {}

    def variant(impl, fn):
        if impl == "torch_compile":
            if fn not in compiled:
                compiled[fn] = torch.compile(fn, dynamic=False)
            return compiled[fn]
        return fn

    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}

    def attention_call(q, k, v, causal):
        """SDPA, flash backend only; GQA natively when accepted, else K/V expanded once (untimed)."""
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            try:
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                torch.cuda.synchronize()

                def call():
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                return call, "native"
            except (RuntimeError, TypeError):
                pass
        group = q.shape[1] // k.shape[1]
        ke, ve = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)

        def call():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)
        return call, "expanded"

    def build(builder, impl, P):
        """Returns (fn, before, bytes, flops, extra, check_fn)."""
        if builder == "rmsnorm":
            rows, dim = P["rows"], P["dim"]
            x = torch.empty(rows, dim, device=dev).uniform_(-1, 1)
            w = torch.empty(dim, device=dev).uniform_(0.5, 1.5)
            if impl == "torch_functional":
                if not hasattr(F, "rms_norm"):
                    raise RuntimeError("torch.nn.functional.rms_norm not in this torch")
                fn = lambda: F.rms_norm(x, (dim,), w, EPS)
            else:
                f = variant(impl, rmsnorm_fn)
                fn = lambda: f(x, w)
            return fn, None, (2 * rows * dim + dim) * 4, 0, [], lambda: finite(fn())
        if builder == "add_rmsnorm":
            rows, dim = P["rows"], P["dim"]
            x = torch.empty(rows, dim, device=dev).uniform_(-1, 1)
            r = torch.empty(rows, dim, device=dev).uniform_(-0.01, 0.01)
            w = torch.empty(dim, device=dev).uniform_(0.5, 1.5)
            f = variant(impl, add_rmsnorm_fn)
            fn = lambda: f(x, r, w)
            return fn, None, (4 * rows * dim + dim) * 4, 0, [], lambda: finite(*fn())
        if builder == "rope":
            T, H, D = P["tokens"], P["heads"], P["head_dim"]
            x = torch.empty(T, H, D, device=dev).uniform_(-1, 1)
            pos = (torch.arange(T, device=dev, dtype=torch.int32) % 8192)
            inv_freq = 10000.0 ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)
            f = variant(impl, rope_fn)
            fn = lambda: f(x, pos, inv_freq)
            return fn, None, 2 * T * H * D * 4 + T * 4, 0, [("note", "out_of_place")], lambda: finite(fn())
        if builder == "swiglu":
            nel = P["rows"] * P["dim"]
            g = torch.empty(nel, device=dev).uniform_(-4, 4)
            u = torch.empty(nel, device=dev).uniform_(-1, 1)
            f = variant(impl, swiglu_fn)
            fn = lambda: f(g, u)
            return fn, None, 3 * nel * 4, 0, [], lambda: finite(fn())
        if builder == "get_rows":
            vocab, k, n = P["vocab"], P["k"], P["n"]
            w = torch.empty(vocab, k, dtype=torch.float16, device=dev).uniform_(-0.1, 0.1)
            ids = torch.randint(0, vocab, (n,), device=dev)
            fn = lambda: F.embedding(ids, w).float()
            return fn, None, n * k * 2 + n * k * 4 + n * 4, 0, [("note", "embedding_then_float")], lambda: finite(fn())
        if builder == "matmul":
            t, n_out, k = P["tokens"], P["n_out"], P["k"]
            w = torch.empty(n_out, k, dtype=torch.float16, device=dev).uniform_(-0.1, 0.1)
            x = torch.empty(t, k, dtype=torch.float16, device=dev).uniform_(-1, 1)
            fn = lambda: torch.matmul(x, w.t())
            nbytes = n_out * k * 2 + t * (k + n_out) * 4  # as ours counts (f32 x / y)
            return (fn, None, nbytes, 2 * t * n_out * k, [("note", "f16_x_and_y;ours_f32_x_and_y")],
                    lambda: finite(fn()))
        if builder == "kv_write":
            T, D = P["tokens"], P["head_dim"]
            dt = torch_dtype[P["dtype"]]
            blocks = T // 16
            kc = torch.empty(blocks * 16, KV_HEADS, D, dtype=dt, device=dev)
            vc = torch.empty_like(kc)
            k = torch.empty(T, KV_HEADS, D, device=dev).uniform_(-1, 1)
            v = torch.empty_like(k).uniform_(-1, 1)
            perm = torch.randperm(blocks, device=dev)
            t = torch.arange(T, device=dev)
            slots = perm[t // 16] * 16 + t % 16

            def fn():
                kc.index_copy_(0, slots, k.to(dt))
                vc.index_copy_(0, slots, v.to(dt))
            return (fn, None, T * KV_HEADS * D * 2 * (4 + 2) + T * 4, 0, [("note", "cast_then_index_copy")],
                    lambda: finite(kc, vc))
        if builder == "prefill":
            dt, D, S, B = torch_dtype[P["dtype"]], P["head_dim"], P["seq"], P["batch"]
            # [batch, seq, heads, dim] storage (token-major like ours), viewed as [batch, heads, seq, dim].
            q = torch.empty(B, S, HEADS, D, dtype=dt, device=dev).uniform_(-1, 1).transpose(1, 2)
            k = torch.empty(B, S, KV_HEADS, D, dtype=dt, device=dev).uniform_(-1, 1).transpose(1, 2)
            v = torch.empty(B, S, KV_HEADS, D, dtype=dt, device=dev).uniform_(-1, 1).transpose(1, 2)
            fn, gqa = attention_call(q, k, v, True)
            T = B * S
            flops = B * 4.0 * S * S * D * HEADS / 2
            nbytes = T * HEADS * D * 4 * 2 + T * KV_HEADS * D * 2 * 2  # as ours counts
            return (fn, None, nbytes, flops, [("gqa", gqa), ("note", "contiguous_qkv_out_in_dtype;ours_paged_f32_q_out")],
                    lambda: finite(fn()))
        if builder == "decode":
            dt, D, B, C = torch_dtype[P["dtype"]], P["head_dim"], P["batch"], P["context"]
            q = torch.empty(B, 1, HEADS, D, dtype=dt, device=dev).uniform_(-1, 1).transpose(1, 2)
            k = torch.empty(B, C, KV_HEADS, D, dtype=dt, device=dev).uniform_(-1, 1).transpose(1, 2)
            v = torch.empty(B, C, KV_HEADS, D, dtype=dt, device=dev).uniform_(-1, 1).transpose(1, 2)
            fn, gqa = attention_call(q, k, v, False)
            kv_bytes = B * C * KV_HEADS * D * 2 * 2
            floor_us = kv_bytes / (peaks["copy_gbps"] * 1e3) if peaks["copy_gbps"] else 0.0
            return (fn, None, kv_bytes, 4.0 * B * C * D * HEADS,
                    [("gqa", gqa), ("floor_us", fmt(floor_us, 2)), ("note", "contiguous_kv")],
                    lambda: finite(fn()))
        if builder == "moe":
            T, E, K = P["tokens"], P["experts"], P["top_k"]
            logits = torch.empty(T, E, device=dev).uniform_(-3, 3)
            f = variant(impl, moe_fn)
            fn = lambda: f(logits, K, E)
            nbytes = T * E * 4 + T * K * (4 + 4 + 4) + (E + 1) * 4

            def check():
                ids, w, offsets, order = fn()
                ok = int(offsets[-1].item()) == T * K and finite(w) == "ok"
                return "ok" if ok else "bad_offsets_or_weights"
            return fn, None, nbytes, 0, [("renormalize", 1)], check
        if builder == "sample":
            R, V, mode = P["rows"], P["vocab"], P["mode"]
            logits = torch.empty(R, V, device=dev).uniform_(-10, 10)
            if mode == "greedy":
                fn = lambda: torch.argmax(logits, dim=-1)
            else:
                def fn():
                    probs = torch.softmax(logits / 0.8, dim=-1)
                    sp, si = torch.sort(probs, dim=-1, descending=True)
                    cum = torch.cumsum(sp, dim=-1)
                    sp = sp.masked_fill(cum - sp > 0.9, 0.0)
                    pick = torch.multinomial(sp, 1)
                    return si.gather(-1, pick)
            return fn, None, R * V * 4, 0, [], lambda: "ok"
        raise ValueError(builder)

    failures = 0
    for kernel, shape, impls, builder, P in cases:
        for impl in impls:
            try:
                m = Mem()
                fn, before, nbytes, flops, extra, check = build(builder, impl, P)
                st = run(fn, before)
                peak = m.peak_mib()
                emit(impl, kernel, shape, st, peak, nbytes, flops, extra, check())
            except Exception as e:  # one failing baseline must not stop the others
                failures += 1
                l = Line().add("impl", impl).add("case", case_id(kernel, shape)).add("kernel", kernel)
                for k, v in shape:
                    l.add(k, v)
                msg = (type(e).__name__ + ":" + str(e).splitlines()[0] if str(e) else type(e).__name__)[:300]
                l.add("status", "error").add("error", msg).print()
            finally:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
    print(f"# done: {sum(len(c[2]) for c in cases)} runs, {failures} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
