"""Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2): one latent row per token per layer."""

from __future__ import annotations

import dataclasses

from kvplan.arch.base import ArchParser, ConfigReader
from kvplan.specs import IndexerSpec, LayerSpec, MLASpec


class DeepseekParser(ArchParser):
    family = "deepseek_mla"
    model_types = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25", "kimi_vl", "deepseek_vl_v2",
                   "glm_moe_dsa")
    defaults = {"kv_lora_rank": 512, "qk_rope_head_dim": 64}

    def attention_dims(self, r: ConfigReader) -> dict[str, int]:
        if not r.has("kv_lora_rank"):
            r.note("kv_lora_rank is null: this checkpoint uses plain multi-head attention, not MLA")
            return super().attention_dims(r)
        heads = r.first_of("num_attention_heads", self.HEADS)
        rank = r.first_of("kv_lora_rank", ["kv_lora_rank"])
        rope = r.first_of("qk_rope_head_dim", ["qk_rope_head_dim"])
        # NOTE: recorded for `kvplan compare`: the MHA a latent replaces has K heads of
        # qk_nope_head_dim + qk_rope_head_dim and V heads of v_head_dim.
        r.optional("qk_nope_head_dim", ["qk_nope_head_dim"])
        r.optional("v_head_dim", ["v_head_dim"])
        r.note(
            f"MLA caches one latent per token per layer: kv_lora_rank + qk_rope_head_dim = {rank} + {rope} "
            f"= {rank + rope} values, no separate K and V (vLLM MLAAttentionSpec; transformers >= 5.15)"
        )
        return {"mla": 1, "kv_lora_rank": rank, "qk_rope_head_dim": rope, "num_attention_heads": heads}

    # ---- DSA (DeepSeek-V3.2, GLM-5): the indexer key cache, issue 12 ---------------------------------
    # Port note (models/ move): this block is the whole DSA change; it appends one IndexerSpec per MLA
    # layer after the decoder layers (as encoder-decoder models append cross layers) and marks the MLA
    # specs so engines price an fp8 cache in the fp8_ds_mla layout.
    def build_layers(self, r: ConfigReader) -> list[LayerSpec]:
        specs = super().build_layers(r)
        if not r.has("index_head_dim"):
            return specs
        index_dim = r.first_of("index_head_dim", ["index_head_dim"])
        heads = r.optional("index_n_heads", ["index_n_heads"])
        topk = r.optional("index_topk", ["index_topk"])
        mla = [i for i, s in enumerate(specs) if isinstance(s, MLASpec)]
        r.note(
            f"sparse attention (DSA): each of the {len(mla)} MLA layers also caches an indexer key of index_head_dim "
            f"{index_dim} (vLLM/SGLang/TensorRT-LLM: fp8 + a fp32 scale per 128 = {index_dim + 4 * -(-index_dim // 128)} "
            f"B; transformers: the model dtype), reported as its own 'indexer' layer group"
        )
        specs = [dataclasses.replace(s, fp8_ds_mla=True) if isinstance(s, MLASpec) else s for s in specs]
        indexer = IndexerSpec(kv_lora_rank=index_dim, qk_rope_head_dim=0, index_n_heads=heads, index_topk=topk)
        return [*specs, *(indexer for _ in mla)]
