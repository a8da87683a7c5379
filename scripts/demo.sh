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
python -I -c "import modeling_chargpt, data_scripts, chargpt.training, train_pretrain, accelerate" 2>/dev/null \
  || python -m pip install -q -e .
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
python -m data_scripts.synthetic --out_dir "$OUT/data" ${SYNTHETIC_ARGS:-}
python -m chargpt.recipes.reproduce --data_dir "$OUT/data" --out_dir "$OUT" --recipe demo --variants "${VARIANTS:-rope}" "$@"
echo "demo wall time: $(( $(date +%s) - start ))s"
model="$OUT/${VARIANTS:-rope}-causal-seed0-finetune"
if [ -d "$model" ]; then
  # Knowing whom it read about (docs/confidence.md): the same pretrained model finetuned without the last third of
  # the training questions answers them and people of another world; that fits the confidence it shows and when it
  # says "I don't know", saved into the model folder. Then it is scored on dev against people of a third world.
  cal="$OUT/calibration"
  mkdir -p "$cal"
  n=$(wc -l < "$OUT/data/birth_places_train.tsv")
  head -n $(( n - n / 3 )) "$OUT/data/birth_places_train.tsv" > "$cal/train.tsv"
  tail -n $(( n / 3 )) "$OUT/data/birth_places_train.tsv" > "$cal/holdout.tsv"
  for set in fit eval; do
    python -m data_scripts.unknown_people --wiki "$OUT/data/wiki.txt" --train "$OUT/data/birth_places_train.tsv" \
      --kinds other_world --world_seed $([ $set = fit ] && echo 1001 || echo 1002) --n 150 --out "$cal/unknown-$set.tsv" \
      $([ $set = eval ] && echo --avoid "$cal/unknown-fit.tsv") > /dev/null
  done
  python train_finetune.py --preset demo --pretrain_corpus_path "$OUT/data/wiki.txt" \
    --finetune_corpus_path "$cal/train.tsv" --model_name_or_path "$OUT/${VARIANTS:-rope}-causal-seed0-pretrain" \
    --output_dir "$cal/holdout-finetune" --overwrite_output_dir True > "$cal/holdout-finetune.log" 2>&1
  python -m chargpt.evaluation.calibrate --model_name_or_path "$cal/holdout-finetune" --holdout "$cal/holdout.tsv" \
    --unknown "$cal/unknown-fit.tsv" --save_to "$model" --results_path "$cal/calibration.json"
  echo
  echo "known against unknown people ($model on dev, and on 150 people of another world):"
  python -m chargpt.evaluation.known_unknown --model_name_or_path "$model" --known "$OUT/data/birth_dev.tsv" \
    --unknown "$cal/unknown-eval.tsv" --results_path "$OUT/known_unknown.json"
  # Ask the model three dev questions and one about a person of another world, as a person would (the pipeline)
  echo
  echo "chargpt-ask $model (three dev people and one it never read, with the person's wiki.txt line):"
  { head -n 3 "$OUT/data/birth_dev.tsv" | cut -f1; head -n 1 "$cal/unknown-eval.tsv"; } \
    | python -m chargpt.evaluation.ask "$model" --wiki "$OUT/data/wiki.txt"
fi
