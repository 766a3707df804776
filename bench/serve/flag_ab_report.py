"""One line per flashserve-bench JSON of bench/serve/flag_ab.sh (<model>.c<C>.<value>.<round>.json):
output throughput, P99 ITL over median TPOT (issue 30's target: <= 2x), P99 and median TTFT."""
import json
import pathlib
import re
import sys

NAME = re.compile(r"(?P<model>.+)\.c(?P<c>\d+)\.(?P<value>[^.]+(?:\.\d+)?)\.(?P<round>\d+)$")


def main(folder):
    rows = []
    for path in pathlib.Path(folder).glob("*.json"):
        m = NAME.match(path.stem)
        if m:
            rows.append((m["model"], int(m["c"]), m["value"], int(m["round"]), json.loads(path.read_text())))
    for model, c, value, rnd, d in sorted(rows, key=lambda r: r[:4]):
        itl, tpot, ttft = d["itl"]["p99_ms"], d["tpot"]["median_ms"], d["ttft"]
        print(f"{model} c{c} {value} r{rnd}: {d['output_throughput']:.1f} tok/s, P99 ITL {itl:.1f} / median TPOT "
              f"{tpot:.1f} ms = {itl / tpot:.2f}x, P99 TTFT {ttft['p99_ms']:.0f} ms, median TTFT {ttft['median_ms']:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
