#!/usr/bin/env python3
"""Joins bench_cuda_ops and torch_baselines.py output into a side-by-side markdown table.

  python3 compare.py RESULTS [RESULTS ...] > compare.md

Each argument is a file holding `impl=... case=...` lines (raw outputs, or the combined results
file run_gpu.sh writes); other lines are ignored. Rows are matched on `case`. For every PyTorch
implementation of a case the table shows its median and `speed` = torch_us / ours_us, so above 1
means ours is faster. Targets (from the issue) are judged here:

  prefill attention, seq >= 2048   speed vs torch_sdpa_flash >= 0.90
  decode attention, f16, batch 64 x context 4096, head_dim 128   frac_bw >= 0.80 (measured copy)
  rmsnorm / add_rmsnorm, 16384 rows   frac_bw >= 0.80
  moe_route 32768 tokens x 64 experts, top-2   median < 150 us
"""
import sys

TORCH_IMPLS = ["torch_eager", "torch_compile", "torch_functional", "torch_sdpa_flash"]


def parse(paths):
    recs = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("impl="):
                    continue
                rec = {}
                for tok in line.split():
                    if "=" in tok:
                        k, v = tok.split("=", 1)
                        rec.setdefault(k, v)
                recs.append(rec)
    return recs


def num(rec, key, default=0.0):
    try:
        return float(rec.get(key, default))
    except ValueError:
        return default


def is_compute_bound(rec):
    k = rec.get("kernel", "")
    if k in ("prefill_attention", "gemm_peak"):
        return True
    return k == "matmul" and rec.get("path") == "cublaslt"


def rate(rec):
    if rec.get("status") != "ok":
        return "error", ""
    if is_compute_bound(rec):
        return f"{num(rec, 'tflops'):.1f} TFLOP/s", f"{num(rec, 'frac_tflops'):.2f}"
    return f"{num(rec, 'gbps'):.0f} GB/s", f"{num(rec, 'frac_bw'):.2f}"


def required_targets():
    """(case id, target) for every target the issue sets, in bench_cuda_ops' case-id format."""
    t = []
    for dt in ("f16", "bf16"):
        for hd in (64, 128):
            for seq in (2048, 4096, 8192):
                t.append((f"prefill_attention:dtype={dt},head_dim={hd},seq={seq},batch={16384 // seq},heads=32,kv_heads=8",
                          "speed_vs_torch_sdpa_flash>=0.90"))
    t.append(("decode_attention:dtype=f16,head_dim=128,batch=64,context=4096,heads=32,kv_heads=8", "frac_bw>=0.80"))
    t.append(("rmsnorm:dtype=f32,rows=16384,dim=4096", "frac_bw>=0.80"))
    t.append(("add_rmsnorm:dtype=f32,rows=16384,dim=4096", "frac_bw>=0.80"))
    t.append(("moe_route:dtype=f32,tokens=32768,experts=64,top_k=2", "median_us<150"))
    return t


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    recs = parse(argv[1:])
    ours, torch = {}, {}
    order = []
    for r in recs:
        case = r.get("case", "")
        if r.get("impl") == "flashserve":
            if case not in ours:
                order.append(case)
            ours[case] = r
        else:
            torch.setdefault(case, {})[r.get("impl", "?")] = r

    out = []
    out.append("# GPU kernel benchmarks: flashserve CUDA ops vs PyTorch\n")
    dev = ours.get("device") or {}
    tdev = (torch.get("device") or {}).get("torch") or {}
    if dev:
        out.append(f"Device: {dev.get('name', '?').replace('_', ' ')}, cc {dev.get('cc', '?')}, {dev.get('sms', '?')} SMs, "
                   f"SM clock {dev.get('sm_clock_mhz', '?')} MHz, L2 {dev.get('l2_mib', '?')} MiB, "
                   f"{dev.get('mem_gib', '?')} GiB, theoretical {dev.get('theoretical_gbps', '?')} GB/s.  ")
    if tdev:
        out.append(f"PyTorch {tdev.get('torch', '?')} (CUDA {tdev.get('cuda', '?')}).  ")
    copy = ours.get("copy_bandwidth:mib=1024")
    gemm = ours.get("gemm_peak:dtype=bf16,m=8192,n=8192,k=8192")
    tcopy = torch.get("copy_bandwidth:mib=1024", {}).get("torch")
    tgemm = torch.get("gemm_peak:dtype=bf16,m=8192,n=8192,k=8192", {}).get("torch")
    if copy:
        s = f"Measured copy bandwidth (read + write): {num(copy, 'gbps'):.0f} GB/s"
        if tcopy:
            s += f" (through PyTorch: {num(tcopy, 'gbps'):.0f})"
        out.append(s + "; every frac_bw divides by it.  ")
    rd = ours.get("read_bandwidth:mib=1024")
    if rd:
        out.append(f"Read-only streaming (reference): {num(rd, 'gbps'):.0f} GB/s.  ")
    if gemm:
        s = f"Measured bf16 GEMM 8192^3 (cuBLASLt): {num(gemm, 'tflops'):.0f} TFLOP/s"
        if tgemm:
            s += f" (torch.matmul: {num(tgemm, 'tflops'):.0f})"
        out.append(s + "; every frac_tflops divides by it.\n")

    # ---- targets: the issue's, judged on the values (a missing or failed case is missed)
    copy_gbps = num(copy, "gbps") if copy else 0.0
    out.append("## Targets\n")
    out.append("| case | target | value | result |")
    out.append("| --- | --- | --- | --- |")
    for case, tgt in required_targets():
        r = ours.get(case)
        if r is None:
            out.append(f"| {case} | {tgt} | no flashserve line | not run |")
            continue
        if r.get("status") != "ok":
            out.append(f"| {case} | {tgt} | error: {r.get('error', '')[:60]} | missed |")
            continue
        if tgt.startswith("speed_vs_torch_sdpa_flash"):
            base = torch.get(case, {}).get("torch_sdpa_flash")
            if not base or base.get("status") != "ok":
                out.append(f"| {case} | {tgt} | no torch_sdpa_flash line | unknown |")
                continue
            speed = num(base, "median_us") / max(num(r, "median_us"), 1e-9)
            met = speed >= 0.90
            value = f"{speed:.2f}x ({num(r, 'median_us'):.1f} vs {num(base, 'median_us'):.1f} us)"
        elif tgt.startswith("frac_bw"):
            frac = num(r, "gbps") / copy_gbps if copy_gbps else 0.0
            met = frac >= 0.80
            value = f"{frac:.2f} ({num(r, 'gbps'):.0f} of {copy_gbps:.0f} GB/s)"
        else:  # median_us<150
            met = num(r, "median_us") < 150.0
            value = f"{num(r, 'median_us'):.1f} us"
        out.append(f"| {case} | {tgt} | {value} | {'met' if met else 'missed'} |")
    out.append("")

    # ---- every case
    impls = [i for i in TORCH_IMPLS if any(i in t for t in torch.values())]
    out.append("## All cases\n")
    out.append("speed = torch median / ours median (above 1: ours faster). rate: TFLOP/s for compute-bound cases, "
               "else GB/s of the minimal bytes; frac: of the measured ceiling above.\n")
    head = ["case", "ours median us", "p95 us", "p99 us", "peak MiB", "rate", "frac"]
    head += [f"{i} us (speed)" for i in impls]
    head += ["check"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + " --- |" * len(head))
    for case in order:
        r = ours[case]
        if case == "device":
            continue
        if r.get("status") != "ok":
            row = [case, "error: " + r.get("error", "")[:80], "", "", "", "", ""] + [""] * len(impls) + [""]
            out.append("| " + " | ".join(row) + " |")
            continue
        rt, fr = rate(r)
        row = [case, f"{num(r, 'median_us'):.2f}", f"{num(r, 'p95_us'):.2f}", f"{num(r, 'p99_us'):.2f}",
               f"{num(r, 'peak_mib'):.0f}", rt, fr]
        for i in impls:
            t = torch.get(case, {}).get(i)
            if not t:
                row.append("")
            elif t.get("status") != "ok":
                row.append("error")
            else:
                sp = num(t, "median_us") / max(num(r, "median_us"), 1e-9)
                row.append(f"{num(t, 'median_us'):.2f} ({sp:.2f}x)")
        row.append(r.get("check", ""))
        out.append("| " + " | ".join(row) + " |")
    missing = [c for c in torch if c not in ours and c != "device"]
    if missing:
        out.append("")
        out.append("PyTorch cases with no flashserve line: " + ", ".join(sorted(missing)))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
