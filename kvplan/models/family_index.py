"""The static model_type -> family module index (written by tools/models_index.py: do not edit by hand)."""

#: Family module -> the model types it answers for (their cache layout, their weights, or both).
FAMILY_INDEX: dict[str, str] = {
    "afmoe": "afmoe laguna",
    "bamba": "bamba",
    "bart": ("bart bigbird_pegasus blenderbot blenderbot-small fsmt led m2m_100 marian mbart mvp nllb-moe nllb_moe "
             "pegasus pegasus_x plbart prophetnet seamless_m4t seamless_m4t_v2"),
    "bert": ("bert bert-generation big_bird camembert data2vec-text electra ernie git megatron-bert "
             "modernbert-decoder rembert roberta roberta-prelayernorm roc_bert roformer xlm-roberta xlm-roberta-xl "
             "xmod"),
    "blip": "blip_text_model",
    "cohere": "cohere cohere2 cohere2_moe",
    "composite": "encoder-decoder speech-encoder-decoder t5gemma t5gemma2 vision-encoder-decoder",
    "cpmant": "cpmant",
    "dbrx": "dbrx dbrx_text",
    "deepseek": ("axk1 axk2 deepseek deepseek_v2 deepseek_v3 deepseek_v32 deepseek_vl_v2 dots3_note dots3_note_text "
                 "hy_v4 hy_v4_vl hy_v4_vl_text kimi_k2 kimi_k25 kimi_vl longcat_flash minicpm3 mistral_large4 "
                 "mistral_large4_text sarvam_mla youtu"),
    "deepseek_v4": "deepseek_v4",
    "deltanet": "lara_mini olmo_hybrid",
    "ergo": "ergo",
    "ernie4_5": "ernie4_5 ernie4_5_moe ernie4_5_vl_moe_text",
    "exaone": "exaone exaone4 exaone4_5_text exaone_moe",
    "falcon": "RefinedWeb RefinedWebModel falcon falcon_h1",
    "gemma": ("gemma gemma2 gemma3 gemma3_text gemma3n gemma3n_text gemma4 gemma4_assistant gemma4_text "
              "gemma4_unified gemma4_unified_text t5_gemma_module vaultgemma"),
    "glm": ("chatglm glm glm4 glm4_moe glm4_moe_lite glm4v_moe_text glm4v_text glm5_next glm5_next_text glm_moe_dsa "
            "glm_ocr_text sarvam_moe solar_open"),
    "gpt2": ("biogpt bloom codegen ctrl gpt2 gpt_bigcode gpt_neo gpt_neox gpt_neox_japanese gptj openai-gpt opt "
             "starcoder2"),
    "gpt_oss": "gpt_oss",
    "granite": ("granite granite_docling_text granite_moe granite_swa granitemoe granitemoe_swa granitemoehybrid "
                "granitemoeshared"),
    "hrm": "hrm_text",
    "hunyuan": "hunyuan hunyuan_v1_dense hunyuan_v1_moe hy_v3",
    "inkling": "inkling2_loop_text inkling2_text inkling_text",
    "jamba": "jamba",
    "jetmoe": "jetmoe",
    "kimi": "bailing_hybrid kimi_linear",
    "kolibri": "kolibri1_1",
    "lfm2": "lfm2 lfm2_moe lfm3",
    "llama": ("apertus apertus1p5_text aquila arcee arctic aria_text baichuan beam bitnet cosmos3_edge_text cwm "
              "diffllama doge emu3_text_model flint helium hyperclovax internlm2 internlm3 iquestcoder jais2 kolibri1 "
              "llama llama4 llama4_text mellum mllama mllama_text_model muse_glimmer_text nanochat orion "
              "paddleocr_vl_text seed_oss smollm3 stablelm xverse yi"),
    "mamba": "falcon_mamba mamba mamba2",
    "mimo": "mimo mimo_v2_flash",
    "minicpm5": "minicpm5_moe",
    "minimax": "minimax minimax_m1 minimax_m2 minimax_m3 minimax_m3_vl_text minimax_text_01",
    "mistral": "ministral ministral3 mistral mistral4 mistral_nemo mixtral voxtral_realtime_text",
    "molmo": "molmo2_text",
    "moshi": "moshi",
    "mpt": "mpt",
    "nemotron": "nemotron nemotron-nas nemotron_h",
    "olmo": "flex_olmo olmo olmo2 olmo3 olmoe",
    "param2": "param2moe",
    "persimmon": "persimmon",
    "phi": "phi phi3 phi3small phi4 phimoe",
    "pi05": "pi05",
    "pix2struct": "pix2struct_text_model",
    "pp_formulanet": "pp_formulanet_text",
    "qwen": ("qwen qwen2 qwen2_5_omni_text qwen2_5_vl qwen2_5_vl_text qwen2_moe qwen2_vl qwen2_vl_text qwen3 qwen3_5 "
             "qwen3_5_moe qwen3_5_moe_text qwen3_5_text qwen3_moe qwen3_next qwen3_omni_moe_text qwen3_vl "
             "qwen3_vl_moe qwen3_vl_moe_text qwen3_vl_text"),
    "recurrent_gemma": "recurrent_gemma",
    "rwkv": "rwkv",
    "step": "step3p5 step3p7 step3p7_text",
    "t5": "longt5 mt5 switch_transformers t5 umt5",
    "unlimited_ocr": "unlimited_ocr_text",
    "vit": "deit vit",
    "whisper": "whisper",
    "xglm": "kosmos_2_5_text_model kosmos_2_text_model trocr xglm",
    "xlm": "xlm",
    "xlnet": "xlnet",
    "xlstm": "xlstm",
    "zamba": "zamba zamba2",
    "zaya": "zaya",
}
