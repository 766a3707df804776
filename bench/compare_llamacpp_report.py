#!/usr/bin/env python3
"""The ratios bench/compare_llamacpp.sh prints, from the raw outputs it writes.

  compare_llamacpp_report.py rounds DIR ROUNDS            one file's folder: every round side by side
  compare_llamacpp_report.py summary OUT ROUNDS FILE...  one line per file: medians over the rounds, and
                                                         decode as a fraction of the read-bandwidth bound
"""
import json
import os
import statistics
import sys

# q8: 8-bit activations, the server's default; f32: the exact reference path (--cpu-activations f32).
ROWS = [("prefill 512 tok/s, q8", "BM_Prefill/tokens:512/q8:1", (512, 0), 0),
        ("prefill 512 tok/s, f32", "BM_Prefill/tokens:512/q8:0", (512, 0), 0),
        ("decode, 128 cached, q8", "BM_Decode/batch:1/context:128/q8:1", (0, 128), 0),
        ("decode, 128 cached, f32", "BM_Decode/batch:1/context:128/q8:0", (0, 128), 0),
        ("decode, 1024 cached, q8", "BM_Decode/batch:1/context:1024/q8:1", (0, 128), 1024),
        ("decode, 1024 cached, f32", "BM_Decode/batch:1/context:1024/q8:0", (0, 128), 1024)]


def ours(d, r, name):
    path = f"{d}/bench_forward.{r}.json"
    if os.path.exists(path):
        for b in json.load(open(path))["benchmarks"]:
            if b["name"].startswith(name):
                return b["items_per_second"]


def theirs(d, r, test, depth):
    path = f"{d}/llama-bench.{r}.json"
    if os.path.exists(path):
        for b in json.load(open(path)):
            if (b["n_prompt"], b["n_gen"], b.get("n_depth", 0)) == test + (depth,):
                return b["avg_ts"]


def ik(d, r, test, depth):
    """ik_llama.cpp's llama-bench: its tg128 at a depth is a "gp" test, n_prompt = the depth."""
    path = f"{d}/ik-llama-bench.{r}.json"
    if os.path.exists(path):
        want = (depth, test[1]) if depth else test
        for b in json.load(open(path)):
            if (b["n_prompt"], b["n_gen"]) == want:
                return b["avg_ts"]


def serving(d, r, who, kind):
    path = f"{d}/{who}.{kind}.{r}.json"
    return json.load(open(path)) if os.path.exists(path) else None


def median(values):
    values = [v for v in values if v]
    return statistics.median(values) if values else None


def print_rounds(d, rounds):
    print(f"{'':28s}" + "".join(f"  round {r}: ours / llama.cpp = ratio" for r in range(1, rounds + 1)))
    for label, name, test, depth in ROWS:
        cells = []
        for r in range(1, rounds + 1):
            a, b = ours(d, r, name), theirs(d, r, test, depth)
            cells.append(f"  {a:8.1f} / {b:8.1f} = {a / b:5.2f}x" if a and b else "  (missing)")
            c = ik(d, r, test, depth)
            if a and c:
                cells.append(f" (ik_llama.cpp {c:8.1f}: {a / c:5.2f}x)")
        print(f"{label:28s}" + "".join(cells))
    for kind in ("c8", "c16", "open"):
        for r in range(1, rounds + 1):
            f, l = serving(d, r, "flashserve", kind), serving(d, r, "llama-server", kind)
            if not (f and l):
                continue
            print(f"serving {kind} round {r}: output tok/s {f['output_throughput']:.1f} / {l['output_throughput']:.1f} = "
                  f"{f['output_throughput'] / max(l['output_throughput'], 1e-9):.2f}x; P99 ITL {f['itl']['p99_ms']:.0f} / "
                  f"{l['itl']['p99_ms']:.0f} ms (our median TPOT {f['tpot']['median_ms']:.0f} ms); P99 TTFT "
                  f"{f['ttft']['p99_ms']:.0f} / {l['ttft']['p99_ms']:.0f} ms")


def bandwidth(d, r):
    """The read bandwidth measured in round r right after our decode (older results: once per run)."""
    for path in (f"{d}/read_bandwidth.{r}.json", f"{os.path.dirname(d)}/read_bandwidth.json"):
        if os.path.exists(path):
            return json.load(open(path))["benchmarks"][0]["bytes_per_second"]


def step_bytes(path):
    """What one decode step reads: every tensor but the embedding table, unless it is the head."""
    from gguf import GGUFReader
    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    return sum(n for name, n in tensors.items() if name != "token_embd.weight" or "output.weight" not in tensors)


def print_summary(out, rounds, models):
    print(f"medians over {rounds} round(s); ours / llama.cpp, q8 activations (in brackets: ours / ik_llama.cpp -rtr 1, "
          f"where it ran); decode/bound: each round's decode x step bytes / that round's read bandwidth (GB/s)")
    print(f"{'file':44s} {'prefill 512':>19s} {'decode @128':>19s} {'decode @1024':>19s} {'decode/bound':>13s} "
          f"{'c8 output':>10s} {'P99 ITL/TPOT':>13s} {'c16 output':>11s} {'P99 ITL/TPOT':>13s}")
    q8_rows = [row for row in ROWS if row[1].endswith("q8:1")]
    for m in models:
        d = f"{out}/{os.path.basename(m)[:-5]}"
        cells = []
        for _, name, test, depth in q8_rows:
            a = median([ours(d, r, name) for r in range(1, rounds + 1)])
            b = median([theirs(d, r, test, depth) for r in range(1, rounds + 1)])
            c = median([ik(d, r, test, depth) for r in range(1, rounds + 1)])
            cell = f"{a / b:.2f}x" if a and b else "-"
            cell += f" ({a / c:.2f}x)" if a and c else ""
            cells.append(f"{cell:>19s}")
        rates = [(ours(d, r, q8_rows[1][1]), bandwidth(d, r)) for r in range(1, rounds + 1)]
        rates = [(tok, bw) for tok, bw in rates if tok and bw]
        if rates:
            bound = median([tok * step_bytes(m) / bw for tok, bw in rates])
            cell = f"{bound:.0%} ({median([bw for _, bw in rates]) / 1e9:.1f})"
            cells.append(f"{cell:>13s}")
        else:
            cells.append(f"{'-':>13s}")
        for kind, width in (("c8", 10), ("c16", 11)):
            pairs = [(serving(d, r, "flashserve", kind), serving(d, r, "llama-server", kind)) for r in range(1, rounds + 1)]
            pairs = [(a, b) for a, b in pairs if a and b]
            if pairs:
                cells.append(f"{median([a['output_throughput'] / b['output_throughput'] for a, b in pairs]):{width - 1}.2f}x")
                cells.append(f"{median([a['itl']['p99_ms'] / a['tpot']['median_ms'] for a, _ in pairs]):12.2f}x")
            else:
                cells += [f"{'-':>{width}s}", f"{'-':>13s}"]
        print(f"{os.path.basename(m):44s} " + " ".join(cells))


if __name__ == "__main__":
    if sys.argv[1] == "rounds":
        print_rounds(sys.argv[2], int(sys.argv[3]))
    else:
        print_summary(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
