"""Write a sparse stand-in of Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf: the real file's llama.* metadata and
tensor table (types per llama.cpp's Q4_K_M rule: attn_v/ffn_down in Q6_K on use_more_bits layers, output
Q6_K, the rest Q4_K, norms F32), tensor data left as a hole (truncate), so kvplan reads the header as
it would the 4.9 GB download. Usage: python tools/gguf_stand_in.py OUT.gguf"""
import os
import sys

import gguf
import numpy as np

Q = gguf.GGMLQuantizationType
n_layer, d, ff, vocab = 32, 4096, 14336, 128256
out = sys.argv[1]
w = gguf.GGUFWriter(out, "llama")
w.add_name("Meta Llama 3.1 8B Instruct")
w.add_block_count(n_layer)
w.add_context_length(131072)
w.add_embedding_length(d)
w.add_feed_forward_length(ff)
w.add_head_count(32)
w.add_head_count_kv(8)
w.add_rope_dimension_count(128)
w.add_rope_freq_base(500000.0)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
w.add_vocab_size(vocab)


def more_bits(i: int) -> bool:  # llama.cpp llama-quant.cpp use_more_bits
    return i < n_layer // 8 or i >= 7 * n_layer // 8 or (i - n_layer // 8) % 3 == 2


def info(name: str, shape: tuple[int, ...], qtype: Q) -> None:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = 1
    for s in shape:
        n *= s
    byte_shape = [*reversed(shape[1:]), shape[0] // block * size]  # numpy order, rows of bytes
    w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), n // block * size, raw_dtype=qtype)


info("token_embd.weight", (d, vocab), Q.Q4_K)
for i in range(n_layer):
    hi = Q.Q6_K if more_bits(i) else Q.Q4_K
    info(f"blk.{i}.attn_norm.weight", (d,), Q.F32)
    info(f"blk.{i}.attn_q.weight", (d, d), Q.Q4_K)
    info(f"blk.{i}.attn_k.weight", (d, 1024), Q.Q4_K)
    info(f"blk.{i}.attn_v.weight", (d, 1024), hi)
    info(f"blk.{i}.attn_output.weight", (d, d), Q.Q4_K)
    info(f"blk.{i}.ffn_norm.weight", (d,), Q.F32)
    info(f"blk.{i}.ffn_gate.weight", (d, ff), Q.Q4_K)
    info(f"blk.{i}.ffn_up.weight", (d, ff), Q.Q4_K)
    info(f"blk.{i}.ffn_down.weight", (ff, d), hi)
info("output_norm.weight", (d,), Q.F32)
info("output.weight", (d, vocab), Q.Q6_K)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
w.close()
size = os.path.getsize(out)
align = 32
data_start = (size + align - 1) // align * align
total = 0
for t in w.tensors[0].values():
    total = (total + align - 1) // align * align + t.nbytes
os.truncate(out, data_start + total)
print(out, data_start + total)
