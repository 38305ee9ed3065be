"""The static model_type -> family module index (written by tools/models_index.py: do not edit by hand)."""

#: Family module -> the model types whose cache layout its ``PARSERS`` read.
CACHE_INDEX: dict[str, str] = {
    "bamba": "bamba",
    "bart": ("bart bigbird_pegasus blenderbot blenderbot-small fsmt kosmos_2_5_text_model kosmos_2_text_model led "
             "m2m_100 marian mbart mvp nllb-moe nllb_moe pegasus pegasus_x plbart prophetnet seamless_m4t "
             "seamless_m4t_v2 trocr xglm"),
    "bert": ("bert bert-generation big_bird camembert data2vec-text electra ernie git megatron-bert modernbert-decoder "
             "rembert roberta roberta-prelayernorm roc_bert roformer xlm-roberta xlm-roberta-xl"),
    "cohere": "cohere2",
    "composite": "encoder-decoder speech-encoder-decoder t5gemma t5gemma2 vision-encoder-decoder",
    "cpmant": "cpmant",
    "dbrx": "dbrx",
    "deepseek": ("axk2 deepseek_v2 deepseek_v3 deepseek_v32 deepseek_vl_v2 dots3_note dots3_note_text glm_moe_dsa hy_v4 "
             "hy_v4_vl hy_v4_vl_text kimi_k2 kimi_k25 kimi_vl longcat_flash mistral_large4 mistral_large4_text"),
    "deepseek_v4": "deepseek_v4",
    "deltanet": "lara_mini olmo_hybrid",
    "exaone": "exaone4",
    "falcon": "RefinedWeb RefinedWebModel falcon falcon_h1",
    "gemma": ("gemma gemma2 gemma3 gemma3_text gemma3n gemma3n_text gemma4 gemma4_assistant gemma4_text gemma4_unified "
             "gemma4_unified_text t5_gemma_module vaultgemma"),
    "glm": "chatglm glm4_moe glm5_next glm5_next_text",
    "gpt2": ("biogpt bloom codegen ctrl gpt2 gpt_bigcode gpt_neo gpt_neox gpt_neox_japanese gptj openai-gpt opt "
             "starcoder2"),
    "gpt_oss": "gpt_oss",
    "granite": "granite_swa granitemoe_swa granitemoehybrid granitemoeshared",
    "inkling": "inkling2_loop_text inkling2_text inkling_text",
    "jamba": "jamba",
    "jetmoe": "jetmoe",
    "kimi": "bailing_hybrid kimi_linear",
    "lfm2": "lfm2 lfm2_moe lfm3",
    "llama": ("apertus apertus1p5_text aquila arcee arctic baichuan beam bitnet cohere cwm dbrx_text deepseek diffllama "
             "doge ernie4_5 ernie4_5_moe exaone flint glm glm4 glm4_moe_lite granite granite_moe granitemoe helium "
             "hunyuan hunyuan_v1_dense hunyuan_v1_moe hyperclovax internlm2 internlm3 iquestcoder jais2 kolibri1 llama "
             "llama4 llama4_text mellum minimax_m2 ministral3 mistral_nemo mllama mllama_text_model nanochat nemotron "
             "olmo olmo2 olmo3 olmoe orion persimmon phi3small qwen seed_oss smollm3 stablelm xverse yi"),
    "mamba": "falcon_mamba mamba mamba2",
    "mimo": "mimo_v2_flash",
    "minimax": "minimax minimax_m1 minimax_text_01",
    "mistral": "ministral mistral mixtral",
    "moshi": "moshi",
    "mpt": "mpt",
    "nemotron": "nemotron-nas nemotron_h",
    "phi": "phi phi3 phi4 phimoe",
    "qwen": ("qwen2 qwen2_5_vl qwen2_5_vl_text qwen2_moe qwen2_vl qwen2_vl_text qwen3 qwen3_5 qwen3_5_moe "
             "qwen3_5_moe_text qwen3_5_text qwen3_moe qwen3_next qwen3_vl qwen3_vl_moe qwen3_vl_moe_text qwen3_vl_text"),
    "recurrent_gemma": "recurrent_gemma",
    "rwkv": "rwkv",
    "step": "step3p7 step3p7_text",
    "t5": "longt5 mt5 switch_transformers t5 umt5",
    "whisper": "whisper",
    "xlstm": "xlstm",
    "zamba": "zamba zamba2",
    "zaya": "zaya",
}
#: Family module -> the model types whose weights its ``PARSERS`` count.
WEIGHT_INDEX: dict[str, str] = {
    "afmoe": "afmoe laguna",
    "bamba": "bamba",
    "bart": ("bart bigbird_pegasus blenderbot blenderbot-small fsmt led m2m_100 marian mbart mvp nllb-moe nllb_moe "
             "pegasus pegasus_x plbart prophetnet seamless_m4t seamless_m4t_v2"),
    "bert": ("bert bert-generation big_bird camembert data2vec-text electra ernie git megatron-bert modernbert-decoder "
             "rembert roberta roberta-prelayernorm roc_bert roformer xlm-roberta xlm-roberta-xl"),
    "cohere": "cohere2 cohere2_moe",
    "composite": "encoder-decoder speech-encoder-decoder t5gemma t5gemma2 vision-encoder-decoder",
    "cpmant": "cpmant",
    "dbrx": "dbrx",
    "deepseek": ("axk1 axk2 deepseek deepseek_v2 deepseek_v3 deepseek_v32 dots3_note_text hy_v4 hy_v4_vl_text kimi_k2 "
             "longcat_flash mistral_large4_text"),
    "deepseek_v4": "deepseek_v4",
    "deltanet": "lara_mini olmo_hybrid",
    "exaone": "exaone4 exaone_moe",
    "falcon": "RefinedWeb falcon falcon_h1",
    "gemma": ("gemma gemma2 gemma3_text gemma3n_text gemma4 gemma4_assistant gemma4_text gemma4_unified "
             "gemma4_unified_text t5_gemma_module vaultgemma"),
    "glm": "chatglm glm4_moe glm5_next_text glm_moe_dsa sarvam_moe solar_open",
    "gpt2": ("biogpt bloom codegen ctrl gpt2 gpt_bigcode gpt_neo gpt_neox gpt_neox_japanese gptj openai-gpt opt "
             "starcoder2"),
    "gpt_oss": "gpt_oss",
    "granite": "granite_swa granitemoe_swa granitemoehybrid granitemoeshared",
    "hunyuan": "hunyuan_v1_moe hy_v3",
    "inkling": "inkling2_loop_text inkling2_text inkling_text",
    "jamba": "jamba",
    "jetmoe": "jetmoe",
    "kimi": "bailing_hybrid kimi_linear",
    "lfm2": "lfm2 lfm2_moe lfm3",
    "llama": ("apertus apertus1p5_text arcee aria_text baichuan beam bitnet cohere cosmos3_edge_text cwm diffllama doge "
             "ernie4_5 ernie4_5_moe ernie4_5_vl_moe_text exaone flex_olmo flint glm glm4 glm_ocr_text granite "
             "granite_docling_text granitemoe helium hunyuan_v1_dense hyperclovax internlm2 internlm3 iquestcoder jais2 "
             "kolibri1 llama llama4_text mellum mistral_nemo mllama_text_model nanochat olmo olmo2 olmo3 olmoe "
             "paddleocr_vl_text seed_oss smollm3 stablelm yi"),
    "mamba": "falcon_mamba mamba mamba2",
    "mimo": "mimo_v2_flash",
    "minimax": "minimax minimax_m1 minimax_m2 minimax_m3_vl_text minimax_text_01",
    "mistral": "ministral ministral3 mistral mixtral",
    "mla": "glm4_moe_lite minicpm3 mistral4 sarvam_mla youtu",
    "molmo": "molmo2_text",
    "moshi": "moshi",
    "mpt": "mpt",
    "nemotron": "nemotron nemotron_h",
    "persimmon": "persimmon",
    "phi": "phi phi3 phimoe",
    "qwen": ("qwen2 qwen2_5_vl_text qwen2_moe qwen2_vl_text qwen3 qwen3_5_moe_text qwen3_5_text qwen3_moe qwen3_next "
             "qwen3_vl_moe_text qwen3_vl_text"),
    "recurrent_gemma": "recurrent_gemma",
    "rwkv": "rwkv",
    "step": "step3p7",
    "t5": "longt5 mt5 switch_transformers t5 umt5",
    "unlimited_ocr": "unlimited_ocr_text",
    "vit": "vit",
    "whisper": "whisper",
    "xglm": "kosmos_2_5_text_model kosmos_2_text_model trocr xglm",
    "xlstm": "xlstm",
    "zamba": "zamba zamba2",
    "zaya": "zaya",
}
