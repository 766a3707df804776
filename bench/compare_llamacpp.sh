#!/usr/bin/env bash
# flashserve against llama.cpp on the same GGUFs and machine, alternating, printing ratios (issues 14, 30).
#
#   bench/compare_llamacpp.sh                 # SmolLM2 Q4_1, 2 threads, 2 rounds
#   bench/compare_llamacpp.sh a.gguf b.gguf   # each file in turn, then one table over all of them
#   MODEL=path.gguf THREADS=4 ROUNDS=3 QUICK=1 bench/compare_llamacpp.sh
#   ISA=avx2 bench/compare_llamacpp.sh         # both engines held to AVX2 (an AVX2-only machine's case)
#
# Builds the anchor first (bench/llamacpp/build.sh: the llama-cpp-python sdist, cached in .cache/),
# and flashserve's build/ must exist (scripts/test.sh or cmake --build build). The machine's read
# bandwidth is measured once (bench_kernels' BM_ReadBandwidth). Then for each file, each round runs,
# in this order: bench_forward (prefill 512; decode at 128 and 1024 cached, f32 and q8 activations)
# and llama-bench (pp512, tg128 at depth 0 and 1024); then llama-server -np 16 and flashserve serve
# under the same flashserve-bench loads: closed loop c16 (128 in / 128 out), and open loop Poisson
# at half of llama-server's c16 request rate, with prompts of its own (a seed the c16 run did not
# use, so no prompt is already in either server's cache). QUICK=1 skips the serving part,
# SERVING_ONLY=1 the kernels. Raw outputs go to a folder under bench/results/ named for the date and
# commit (one subfolder per file), with the CPU model and flags; each file's ratios are printed,
# then one line per file: medians over the rounds, and decode as a fraction of the bandwidth bound
# (the bytes one decode step reads: every weight but the embedding table, unless it is the head).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("${MODEL:-$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}")
for m in "${models[@]}"; do [ -f "$m" ] || { echo "compare: no file $m" >&2; exit 1; }; done
threads="${THREADS:-2}"
rounds="${ROUNDS:-2}"
isa="${ISA:-native}"
case "$isa" in
  native) bin="$root/.cache/llamacpp/build/bin"; kernels=auto ;;
  avx2) bin="$root/.cache/llamacpp/build-avx2/bin"; kernels=avx2 ;;
  *) echo "compare: ISA must be native or avx2, not '$isa'" >&2; exit 2 ;;
esac
py="$root/.cache/venv/bin/python"
for f in build/bench/bench_forward build/server/flashserve build/client/flashserve-bench; do
  [ -x "$f" ] || { echo "compare: $f missing: build flashserve first (cmake --build build)" >&2; exit 1; }
done
ISA="$isa" bench/llamacpp/build.sh > /dev/null
out="bench/results/compare-llamacpp-$(date -u +%F)-$(git rev-parse --short HEAD)$([ "$isa" = native ] || echo "-$isa")"
mkdir -p "$out"
{
  for m in "${models[@]}"; do echo "model: $m ($(sha256sum "$m" | cut -c1-16))"; done
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) logical cpus; threads $threads"
  echo "flags: $(grep -m1 flags /proc/cpuinfo | grep -o 'avx2\|avx512f\|avx512_vnni\|avx_vnni' | sort -u | xargs)"
  echo "date: $(date -u +%FT%TZ); commit $(git rev-parse HEAD)"
  echo "isa: $isa (llama.cpp from $bin; flashserve --cpu-kernels $kernels)"
} > "$out/machine.txt"
build/bench/bench_kernels --benchmark_filter=BM_ReadBandwidth --benchmark_min_time=1 --benchmark_format=json \
  > "$out/read_bandwidth.json" 2> /dev/null

port=18700
wait_http() {  # url
  for _ in $(seq 1 300); do curl -sf "$1" > /dev/null 2>&1 && return 0; sleep 0.2; done
  echo "compare: $1 never answered" >&2
  return 1
}
load() {  # name port extra-args...: one flashserve-bench run, JSON report to $dir/<name>.json
  local name=$1 p=$2
  shift 2
  build/client/flashserve-bench --port "$p" --model bench --input-len 128 --output-len 128 --no-progress \
    --json "$dir/$name.json" "$@" > "$dir/$name.txt" 2>&1
}
serve_llamacpp() {
  "$bin/llama-server" -m "$model" -t "$threads" -np 16 -c $((16 * 512)) --port "$port" --host 127.0.0.1 \
    > "$dir/llama-server.log" 2>&1 &
  echo $!
}
serve_flashserve() {
  build/server/flashserve --cpu-kernels "$kernels" serve --model "$model" --threads "$threads" --port "$port" --grpc-port $((port + 1)) \
    --served-model-name bench > "$dir/flashserve.log" 2>&1 &
  echo $!
}

compare_one() {  # the rounds on $model, into $dir
  for r in $(seq 1 "$rounds"); do
    if [ "${SERVING_ONLY:-0}" != 1 ]; then
      echo "compare: round $r: kernels"
      FLASHSERVE_MODEL="$model" FLASHSERVE_THREADS="$threads" FLASHSERVE_CPU_KERNELS="$kernels" \
        build/bench/bench_forward --benchmark_min_time=2 --benchmark_out="$dir/bench_forward.$r.json" \
        --benchmark_out_format=json --benchmark_filter='BM_Prefill/tokens:512|BM_Decode/batch:1/context:(128|1024)' \
        > "$dir/bench_forward.$r.txt" 2>&1
      "$bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -d 0,1024 -r 3 -o json > "$dir/llama-bench.$r.json" 2> /dev/null
    fi
    [ "${QUICK:-0}" = 1 ] && continue
    echo "compare: round $r: serving"
    pid=$(serve_llamacpp); wait_http "http://127.0.0.1:$port/health"
    load "llama-server.c16.$r" "$port" --concurrency 16 --num-requests 64 --warmup 16 --seed "$r"
    rate=$("$py" -c "import json; print(json.load(open('$dir/llama-server.c16.$r.json'))['request_throughput'] / 2)")
    load "llama-server.open.$r" "$port" --request-rate "$rate" --num-requests 48 --seed $((r + 1000))
    kill "$pid"; wait "$pid" 2> /dev/null || true
    pid=$(serve_flashserve); wait_http "http://127.0.0.1:$port/ready"
    load "flashserve.c16.$r" "$port" --concurrency 16 --num-requests 64 --warmup 16 --seed "$r"
    load "flashserve.open.$r" "$port" --request-rate "$rate" --num-requests 48 --seed $((r + 1000))
    kill "$pid"; wait "$pid" 2> /dev/null || true
  done

  "$py" - "$dir" "$rounds" <<'EOF' | tee "$dir/ratios.txt"
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def ours(r, name):
    if not os.path.exists(f"{out}/bench_forward.{r}.json"):
        return None
    for b in json.load(open(f"{out}/bench_forward.{r}.json"))["benchmarks"]:
        if b["name"].startswith(name):
            return b["items_per_second"]
def theirs(r, test, depth):
    if not os.path.exists(f"{out}/llama-bench.{r}.json"):
        return None
    for b in json.load(open(f"{out}/llama-bench.{r}.json")):
        if (b["n_prompt"], b["n_gen"], b.get("n_depth", 0)) == test + (depth,):
            return b["avg_ts"]
# q8: 8-bit activations, the server's default; f32: the exact reference path (--cpu-activations f32).
rows = [("prefill 512 tok/s, q8", "BM_Prefill/tokens:512/q8:1", (512, 0), 0),
        ("prefill 512 tok/s, f32", "BM_Prefill/tokens:512/q8:0", (512, 0), 0),
        ("decode, 128 cached, q8", "BM_Decode/batch:1/context:128/q8:1", (0, 128), 0),
        ("decode, 128 cached, f32", "BM_Decode/batch:1/context:128/q8:0", (0, 128), 0),
        ("decode, 1024 cached, q8", "BM_Decode/batch:1/context:1024/q8:1", (0, 128), 1024),
        ("decode, 1024 cached, f32", "BM_Decode/batch:1/context:1024/q8:0", (0, 128), 1024)]
print(f"{'':28s}" + "".join(f"  round {r}: ours / llama.cpp = ratio" for r in range(1, rounds + 1)))
for label, name, test, depth in rows:
    cells = []
    for r in range(1, rounds + 1):
        a, b = ours(r, name), theirs(r, test, depth)
        cells.append(f"  {a:8.1f} / {b:8.1f} = {a / b:5.2f}x" if a and b else "  (missing)")
    print(f"{label:28s}" + "".join(cells))
for kind in ("c16", "open"):
    for r in range(1, rounds + 1):
        path = f"{out}/flashserve.{kind}.{r}.json"
        if not os.path.exists(path):
            continue
        f, l = json.load(open(path)), json.load(open(f"{out}/llama-server.{kind}.{r}.json"))
        print(f"serving {kind} round {r}: output tok/s {f['output_throughput']:.1f} / {l['output_throughput']:.1f} = "
              f"{f['output_throughput'] / max(l['output_throughput'], 1e-9):.2f}x; P99 ITL {f['itl']['p99_ms']:.0f} / "
              f"{l['itl']['p99_ms']:.0f} ms (our median TPOT {f['tpot']['median_ms']:.0f} ms); P99 TTFT "
              f"{f['ttft']['p99_ms']:.0f} / {l['ttft']['p99_ms']:.0f} ms")
EOF
}

for model in "${models[@]}"; do
  dir="$out/$(basename "$model" .gguf)"
  mkdir -p "$dir"
  echo "compare: $model"
  compare_one
done

"$py" - "$out" "$rounds" "${models[@]}" <<'EOF' | tee "$out/summary.txt"
import json, os, statistics, sys
from gguf import GGUFReader
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bandwidth = json.load(open(f"{out}/read_bandwidth.json"))["benchmarks"][0]["bytes_per_second"]
def step_bytes(path):  # what one decode step reads: every tensor but the embedding table, unless it is the head
    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    return sum(n for name, n in tensors.items() if name != "token_embd.weight" or "output.weight" not in tensors)
def median(values):
    values = [v for v in values if v]
    return statistics.median(values) if values else None
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
def serving(d, r, who):
    path = f"{d}/{who}.c16.{r}.json"
    return json.load(open(path)) if os.path.exists(path) else None
print(f"read bandwidth {bandwidth / 1e9:.1f} GB/s; medians over {rounds} round(s); ours / llama.cpp, q8 activations")
print(f"{'file':44s} {'prefill 512':>12s} {'decode @128':>12s} {'decode @1024':>12s} {'decode/bound':>13s} "
      f"{'c16 output':>11s} {'P99 ITL/TPOT':>13s}")
cases = (("BM_Prefill/tokens:512/q8:1", (512, 0), 0), ("BM_Decode/batch:1/context:128/q8:1", (0, 128), 0),
         ("BM_Decode/batch:1/context:1024/q8:1", (0, 128), 1024))
for m in models:
    d = f"{out}/{os.path.basename(m)[:-5]}"
    cells = []
    for name, test, depth in cases:
        a = median([ours(d, r, name) for r in range(1, rounds + 1)])
        b = median([theirs(d, r, test, depth) for r in range(1, rounds + 1)])
        cells.append(f"{a / b:11.2f}x" if a and b else f"{'-':>12s}")
    decode = median([ours(d, r, cases[1][0]) for r in range(1, rounds + 1)])
    cells.append(f"{decode * step_bytes(m) / bandwidth:13.0%}" if decode else f"{'-':>13s}")
    pairs = [(serving(d, r, "flashserve"), serving(d, r, "llama-server")) for r in range(1, rounds + 1)]
    pairs = [(a, b) for a, b in pairs if a and b]
    if pairs:
        cells.append(f"{median([a['output_throughput'] / b['output_throughput'] for a, b in pairs]):10.2f}x")
        cells.append(f"{median([a['itl']['p99_ms'] / a['tpot']['median_ms'] for a, _ in pairs]):12.2f}x")
    else:
        cells += [f"{'-':>11s}", f"{'-':>13s}"]
    print(f"{os.path.basename(m):44s} " + " ".join(cells))
EOF
echo "compare: raw results in $out"
