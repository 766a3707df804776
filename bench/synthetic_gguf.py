#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF of a real model's layer shapes, made of random weights.

For speed measurements at sizes we have no small real file of: the layer shapes (width, FFN width,
layers, heads, KV heads) are the named model's; the vocabulary and tokenizer are copied from a real
GGUF (SmolLM2's by default), so the server tokenizes prompts as usual and the embedding and output
head have that vocabulary's rows. Weights are random but of a realistic scale (a layer keeps its
input's magnitude), written directly in the asked type; for K-quants and IQ4_XS write f16 here and
quantize with llama.cpp's llama-quantize (bench/llamacpp/requantize.sh). One random tensor is made
per distinct shape and shared by every layer: decode speed depends on the bytes read, not on their
values, and it keeps writing an 8B file to seconds.

  python3 bench/synthetic_gguf.py --shape llama-3-8b --type q4_0 --out /tmp/llama3-8b.q4_0.gguf
Shapes: see SHAPES. Types: f16, bf16, q8_0, q4_0. Needs numpy and the `gguf` package (tests/requirements.txt).
"""
import argparse
import pathlib

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_TOKENIZER = ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# name: (width, FFN width, layers, heads, KV heads, rope theta)
SHAPES = {
    "qwen2.5-0.5b": (896, 4864, 24, 14, 2, 1000000.0),
    "llama-3.2-1b": (2048, 8192, 16, 32, 8, 500000.0),
    "llama-3.2-3b": (3072, 8192, 28, 24, 8, 500000.0),
    "llama-3-8b": (4096, 14336, 32, 32, 8, 500000.0),
    "tiny": (256, 512, 2, 4, 2, 10000.0),  # for the generator's own check
}

TYPES = {
    "f16": GGMLQuantizationType.F16,
    "bf16": GGMLQuantizationType.BF16,
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_0": GGMLQuantizationType.Q4_0,
}


def random_weight(rng, rows, cols, kind):
    """A rows x cols weight whose products keep the input's scale (std 1/sqrt(cols)), as raw GGUF bytes
    (quantized types) or an array the writer converts (float types)."""
    std = 1.0 / np.sqrt(cols)
    if kind in ("f16", "bf16"):
        w = (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float32)
        if kind == "f16":
            return w.astype(np.float16), None
        return (w.view(np.uint32) >> 16).astype(np.uint16), TYPES["bf16"]
    blocks = rows * cols // 32
    if kind == "q8_0":  # per block: f16 scale, 32 int8; uniform int8 has std ~74
        scale = np.full((blocks, 1), std / 74.0, np.float16).view(np.uint8)
        quants = rng.integers(-127, 128, (blocks, 32), dtype=np.int8).view(np.uint8)
    else:  # q4_0: f16 scale, 16 bytes of nibbles (value - 8); uniform nibbles have std ~4.6
        scale = np.full((blocks, 1), std / 4.6, np.float16).view(np.uint8)
        quants = rng.integers(0, 256, (blocks, 16), dtype=np.uint8)
    raw = np.concatenate([scale.reshape(blocks, 2), quants], axis=1)
    return raw.reshape(rows, -1), TYPES[kind]


def copy_tokenizer(writer, path):
    """Copies every tokenizer.* key of a real GGUF; returns its vocabulary size."""
    reader = GGUFReader(path)
    vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
        if field.name == "tokenizer.ggml.tokens":
            vocab = len(field.data)
    return vocab


def write(shape, kind, out, tokenizer, seed):
    dim, ffn, layers, heads, kv_heads, theta = SHAPES[shape]
    head_dim = dim // heads
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(out), "llama")
    writer.add_name(f"synthetic {shape} {kind}")
    vocab = copy_tokenizer(writer, tokenizer)
    writer.add_context_length(8192)
    writer.add_embedding_length(dim)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(theta)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)

    shared = {}

    def weight(rows, cols):
        if (rows, cols) not in shared:
            shared[(rows, cols)] = random_weight(rng, rows, cols, kind)
        return shared[(rows, cols)]

    def add(name, rows, cols):
        data, raw_dtype = weight(rows, cols)
        writer.add_tensor(name, data, raw_dtype=raw_dtype)

    norm = np.ones(dim, np.float32)
    add("token_embd.weight", vocab, dim)
    for i in range(layers):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", norm)
        add(p + "attn_q.weight", heads * head_dim, dim)
        add(p + "attn_k.weight", kv_heads * head_dim, dim)
        add(p + "attn_v.weight", kv_heads * head_dim, dim)
        add(p + "attn_output.weight", dim, heads * head_dim)
        writer.add_tensor(p + "ffn_norm.weight", norm)
        add(p + "ffn_gate.weight", ffn, dim)
        add(p + "ffn_up.weight", ffn, dim)
        add(p + "ffn_down.weight", dim, ffn)
    writer.add_tensor("output_norm.weight", norm)
    add("output.weight", vocab, dim)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--type", required=True, choices=sorted(TYPES))
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--tokenizer", type=pathlib.Path, default=DEFAULT_TOKENIZER, help="GGUF whose tokenizer is copied")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    write(args.shape, args.type, args.out, args.tokenizer, args.seed)
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
