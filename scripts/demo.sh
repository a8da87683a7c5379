#!/usr/bin/env bash
# The whole assignment in miniature on the embedded synthetic corpus: set-up included, CPU-friendly.
# Generates the corpus, then London baseline, finetune-from-scratch, and pretrain -> finetune -> evaluate
# for learned and rope positions, and prints a results table.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/demo}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -c "import torch" 2>/dev/null || python -m pip install -q torch==2.13.0
# -I: what is installed, not this folder (an install older than the installed scripts is redone)
python -I -c "import modeling_chargpt, data_scripts, training, train_pretrain, accelerate" 2>/dev/null \
  || python -m pip install -q -e .
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
python -m data_scripts.synthetic --out_dir "$OUT/data" ${SYNTHETIC_ARGS:-}
python experiments/run_experiments.py --data_dir "$OUT/data" --out_dir "$OUT" --recipe demo --variants "${VARIANTS:-rope}" "$@"
echo "demo wall time: $(( $(date +%s) - start ))s"
# Ask the pretrained-then-finetuned model three dev questions as a person would (the birthplace-qa pipeline)
model="$OUT/${VARIANTS:-rope}-causal-seed0-finetune"
if [ -d "$model" ]; then
  echo
  echo "chargpt-ask $model (three dev questions, with the person's wiki.txt line):"
  head -n 3 "$OUT/data/birth_dev.tsv" | cut -f1 | python -m evaluation.ask "$model" --wiki "$OUT/data/wiki.txt"
fi
