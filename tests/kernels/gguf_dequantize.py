"""Dequantizes raw GGML blocks with the gguf package (pinned in tests/requirements.txt): the
independent reference that tests/kernels/test_quant_formats.cpp checks our block decoders against.

usage: gguf_dequantize.py TYPE IN OUT [TYPE IN OUT ...]
TYPE is a GGMLQuantizationType name (Q4_K, IQ4_XS, ...); IN holds whole blocks of that type; OUT
receives the values as little-endian float32.
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize


def main(args: list[str]) -> int:
    if not args or len(args) % 3:
        print(__doc__, file=sys.stderr)
        return 2
    for name, src, dst in zip(args[0::3], args[1::3], args[2::3]):
        data = np.fromfile(src, dtype=np.uint8)
        values = dequantize(data, GGMLQuantizationType[name])
        values.astype("<f4").tofile(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
