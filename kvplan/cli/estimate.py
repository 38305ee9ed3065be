"""`kvplan estimate`: the KV cache of one model, layer group by layer group (exit 1 past --max-kv-bytes)."""

from typing import Any

import typer

import kvplan
from kvplan.cli.options import (
    AllowDefaultsOpt,
    BatchOpt,
    BeamsOpt,
    BlockSizeOpt,
    CacheTypeKOpt,
    CacheTypeVOpt,
    CmdOpt,
    CtxSizeOpt,
    DpAttentionOpt,
    DpOpt,
    EncoderLenOpt,
    EngineAutoOpt,
    FlashAttnOpt,
    Format,
    FormatOpt,
    GgufFileOpt,
    KvDtypeKOpt,
    KvUnifiedOpt,
    MaxCacheLenOpt,
    MaxKvBytesOpt,
    MaxKvBytesPerGpuOpt,
    MaxModelLenOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelArg,
    ModelOpt,
    NglOpt,
    NkvoOpt,
    NoMlaOpt,
    NoWindowOpt,
    OffloadOpt,
    OutputOpt,
    ParallelOpt,
    PpOpt,
    PrefixCachingOpt,
    PromptLenOpt,
    QuantGroupSizeOpt,
    ResidualLengthOpt,
    RevisionOpt,
    SeqLenOpt,
    SetOpt,
    SharedPrefixTokensOpt,
    SharePrefixOpt,
    StrictOpt,
    SwaRatioOpt,
    TokenOpt,
    TpOpt,
    UbatchSizeOpt,
    VerboseOpt,
    emit,
    given_flags,
    lazy_table,
    one_model,
)
from kvplan.errors import EXIT_NOT_FIT
from kvplan.units import parse_size

EPILOG = (
    "Examples:\n\n"
    "  kvplan estimate --model meta-llama/Llama-3.1-8B --seq-len 32k --batch 4\n\n"
    "  kvplan estimate Qwen/Qwen3-8B -s 32k\n\n"
    "  kvplan estimate -m llama-2-7b-hf -s 4096 --kv-dtype fp8 --format yaml\n\n"
    "  kvplan estimate -m ./config.json --set num_key_value_heads=4 --format json\n\n"
    "  kvplan estimate -m meta-llama/Llama-3.1-70B -s 32k --engine vllm --tp 16\n\n"
    "  kvplan estimate -m llama-2-7b-hf -s 4096 --engine llama.cpp --kv-dtype q8_0\n\n"
    "  kvplan estimate --cmd 'llama-server -m model-Q4_K_M.gguf -c 16384 -np 2 -fa on -ctk q8_0 -ctv q8_0'"
)


def estimate(
    model_arg: ModelArg = None,
    model: ModelOpt = None,
    cmd: CmdOpt = None,
    gguf_file: GgufFileOpt = None,
    batch: BatchOpt = 1,
    seq_len: SeqLenOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_dtype: KvDtypeKOpt = "auto",
    encoder_len: EncoderLenOpt = None,
    set_: SetOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_kv_bytes: MaxKvBytesOpt = None,
    max_kv_bytes_per_gpu: MaxKvBytesPerGpuOpt = None,
    engine: EngineAutoOpt = None,
    tp: TpOpt = 1,
    pp: PpOpt = 1,
    dp: DpOpt = 1,
    enable_dp_attention: DpAttentionOpt = False,
    block_size: BlockSizeOpt = None,
    beams: BeamsOpt = 1,
    prompt_len: PromptLenOpt = None,
    share_prefix: SharePrefixOpt = False,
    shared_prefix_tokens: SharedPrefixTokensOpt = None,
    no_window: NoWindowOpt = False,
    enable_prefix_caching: PrefixCachingOpt = None,
    quant_group_size: QuantGroupSizeOpt = 64,
    residual_length: ResidualLengthOpt = 128,
    offload: OffloadOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    ubatch_size: UbatchSizeOpt = None,
    kv_unified: KvUnifiedOpt = False,
    cache_type_k: CacheTypeKOpt = None,
    cache_type_v: CacheTypeVOpt = None,
    no_mla: NoMlaOpt = False,
    swa_full_tokens_ratio: SwaRatioOpt = None,
    max_cache_len: MaxCacheLenOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
    allow_defaults: AllowDefaultsOpt = False,
    ctx_size: CtxSizeOpt = None,
    parallel: ParallelOpt = None,
    n_gpu_layers: NglOpt = None,
    flash_attn: FlashAttnOpt = None,
    no_kv_offload: NkvoOpt = False,
) -> None:
    """Size the KV cache of a model, layer group by layer group."""
    # NOTE: with --cmd the launch line names the model; a model given beside it must be the same one.
    flags = () if model_arg or model or cmd else given_flags(estimate, locals())  # NOTE: a hint keeps them
    model = one_model(model_arg, model, "estimate", flags) if cmd is None or model_arg or model else None
    budget_bytes = parse_size(max_kv_bytes, what="--max-kv-bytes") if max_kv_bytes is not None else None
    gpu_budget_bytes = (
        parse_size(max_kv_bytes_per_gpu, what="--max-kv-bytes-per-gpu") if max_kv_bytes_per_gpu is not None else None
    )
    result = kvplan.estimate(
        model, gguf_file=gguf_file, batch=batch, seq_len=seq_len, max_model_len=max_model_len, kv_dtype=kv_dtype,
        encoder_len=encoder_len, overrides=set_, revision=revision, token=token, engine=engine, tp=tp, pp=pp,
        block_size=block_size, beams=beams, prompt_len=prompt_len, share_prefix=share_prefix,
        shared_prefix_tokens=shared_prefix_tokens, no_window=no_window, quant_group_size=quant_group_size,
        residual_length=residual_length, offload=offload, max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs, ubatch_size=ubatch_size, kv_unified=kv_unified, cache_type_k=cache_type_k,
        cache_type_v=cache_type_v, no_mla=no_mla, swa_full_tokens_ratio=swa_full_tokens_ratio,
        max_cache_len=max_cache_len, strict=strict, allow_defaults=allow_defaults, ctx_size=ctx_size, parallel=parallel, n_gpu_layers=n_gpu_layers,
        flash_attn=flash_attn, no_kv_offload=no_kv_offload, cmd=cmd, enable_prefix_caching=enable_prefix_caching,
        dp=dp, enable_dp_attention=enable_dp_attention,
    )
    report = result.to_dict()
    emit(report, fmt, output, lazy_table("estimate_table", report) if fmt is Format.table else None,
         inputs=(model,), verbose=verbose)
    _budget_gate(report, budget_bytes, gpu_budget_bytes)


def _budget_gate(report: dict[str, Any], budget_bytes: int | None, gpu_budget_bytes: int | None = None) -> None:
    """--max-kv-bytes / --max-kv-bytes-per-gpu: needed vs budget on stderr, exit 1 when over either."""
    if budget_bytes is None and gpu_budget_bytes is None:
        return
    # NOTE: the check runner's gates, imported only for a budget (its plan model costs `kvplan estimate` 3 ms).
    from kvplan.checks import bytes_gate, kv_bytes_per_gpu

    gates = []
    if budget_bytes is not None:
        gates.append(bytes_gate("--max-kv-bytes", actual_bytes=report["totals"]["kv_cache_bytes"], limit_bytes=budget_bytes))
    if gpu_budget_bytes is not None:
        gates.append(bytes_gate("--max-kv-bytes-per-gpu", actual_bytes=kv_bytes_per_gpu(report),
                                limit_bytes=gpu_budget_bytes, what="KV cache per GPU"))
    failed = [gate for gate in gates if not gate.passed]
    for gate in failed:
        typer.echo(f"Budget exceeded: {gate.message}", err=True)
    if failed:
        raise typer.Exit(EXIT_NOT_FIT)
