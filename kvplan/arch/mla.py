"""Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2): one latent row per token per layer."""

from __future__ import annotations

from kvplan.arch.base import ArchParser, ConfigReader


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
        if r.has("index_head_dim"):
            index_dim = r.first_of("index_head_dim", ["index_head_dim"])
            r.note(
                f"not counted: the sparse-attention indexer's key cache (index_head_dim {index_dim} in fp8 plus "
                f"its scales, about {index_dim + 4 * -(-index_dim // 128)} bytes per token per layer in vLLM)"
            )
        r.note(
            f"MLA caches one latent per token per layer: kv_lora_rank + qk_rope_head_dim = {rank} + {rope} "
            f"= {rank + rope} values, no separate K and V (vLLM MLAAttentionSpec; transformers >= 5.15)"
        )
        return {"mla": 1, "kv_lora_rank": rank, "qk_rope_head_dim": rope, "num_attention_heads": heads}
