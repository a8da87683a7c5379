#!/usr/bin/env bash
# `make best` on one GPU call: each seed of SEEDS runs chargpt/recipes/recite.py --recipe best
# in its own process, all at once (a 4 x 256 model at batch 32 keeps a GPU far from busy), its pretraining compiled
# (SPEED); each goes on to choose its rate on the 400 held-out questions, the final model, dev and test, as make best
# does, until BUDGET seconds. Every pretrained model comes back as soon as it is saved, one tar each (13 MB), so
#   tar xf pretrained-seedS.tar -C out/DIR/pretrain && make best DATA=d SEEDS=S VARIANT=rope RECITE_OUT=out/DIR \
#       RESUME=1     (with VARIANT and EPOCHS as the call had them)
# finishes a seed here whatever the call did not. At BUDGET each process group gets SIGINT: a pretraining still
# running saves a checkpoint, which comes back in parts of 15 MB (pretrain-checkpoint-seedS.tar.gz.part-*; `cat` them
# into `tar xz` under DIR/pretrain/VARIANT-causal-seedS-pretrain/checkpoints, and RESUME=1 continues from it).
# Ctrl-C (SIGINT) or SIGTERM ends the call early the same way, where a terminal runs it.
# Before a first call the speed is not known: SPEED's flags made the faithful pretraining (batch 128) about 100 steps
# a second on an H100 and an H200 (results/bench_gpu_h*.json); best's 50 epochs with rope are 7,100 steps of batch
# 32, its 100 with learned positions 14,200. Rope is the default: the learned seeds are measured on CPUs
# (results/best_cpu.json), rope's three have no GPU figure yet.
#   bash experiments/gpu_session.sh prepare     # here, once: the data and wheels in .gpu/
#   bash experiments/gpu_best.sh                 # on the GPU machine, with .gpu/ beside it, in at most 10 minutes
# -> pretrained-seedS.tar (each seed), gpu_best_outputs.tar.gz (logs, selection.json, predictions, abstention; no
#    model), session.log
set -uo pipefail

DATA=${DATA:-.gpu/data}
OUT=${OUT:-out/gpu-best}
WORK=${WORK:-out/gpu-best-work}
SEEDS=${SEEDS:-0,1,2}
VARIANT=${VARIANT:-rope}
EPOCHS=${EPOCHS:-}  # empty: the recipe's own (chargpt/recipes/best.yaml: rope 50, learned positions 100)
BUDGET=${BUDGET:-520}  # seconds from the start after which every process is stopped
THREADS=${THREADS:-4}  # CPU threads per process (16 cores on the H200 machine)
SPEED=${SPEED---torch_compile True --torch_compile_mode reduce-overhead --optim adamw_torch_fused --torch_compile_batches True}
RECIPE_EXTRA=${RECIPE_EXTRA:-}  # more chargpt/recipes/recite.py flags (split on spaces; the tests' tiny model)
PY=${PYTHON:-python3}

. experiments/gpu_common.sh  # environment, stage, archive

pretrained() { echo "$WORK/seed$1/pretrain/$VARIANT-causal-seed$1-pretrain"; }

send_model() {  # seed $1's pretrained model, once, as soon as it is saved (the save renames a finished folder)
  local dir; dir=$(pretrained "$1")
  [ -f "$OUT/pretrained-seed$1.tar" ] && return 0
  [ -f "$dir/model.safetensors" ] && [ -f "$dir/train_results.json" ] || return 0
  # the model, not the checkpoints and TensorBoard events the run keeps in the same folder; written under another
  # name first, so that a tar cut short by a stop is never taken for a sent model
  tar cf "$OUT/.pretrained-seed$1.tar" -C "$(dirname "$dir")" --exclude="$(basename "$dir")/checkpoints" \
    --exclude="$(basename "$dir")/runs" "$(basename "$dir")" \
    && mv "$OUT/.pretrained-seed$1.tar" "$OUT/pretrained-seed$1.tar" \
    && stage "seed $1 pretrained: $("$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))
print({k: r[k] for k in ("global_step", "final_loss", "train_seconds")})' "$dir/train_results.json")"
}

main() {
  stage "environment"
  environment || return 1
  local seed pids=() alive stop=""
  # a stop asked for ends the waiting as the budget does (the runs started below are in process groups of their own,
  # which a Ctrl-C in the terminal does not reach: SIGINT goes to them below, where it saves their checkpoints)
  trap 'stop="stopped by a signal"' INT TERM
  for seed in ${SEEDS//,/ }; do
    mkdir -p "$WORK/seed$seed"
    local recipe=(chargpt/recipes/recite.py --data_dir "$DATA" --out_dir "$WORK/seed$seed" --recipe best
                  --variant "$VARIANT" --seeds "$seed" ${EPOCHS:+--pretrain_epochs "$EPOCHS"} --threads "$THREADS"
                  $RECIPE_EXTRA ${SPEED:+--pretrain_extra "$SPEED"})
    # job control on for the launch: the run gets a process group of its own ($! is its leader), which SIGINT
    # below reaches whole (recipe, run_experiments, the training) and a Ctrl-C in the terminal does not. The run
    # starts with SIGINT at its default through a python that resets it and execs the recipe: a background command
    # of a shell without job control, or anything a shell started in the background runs, has SIGINT ignored, which
    # bash cannot undo, and a run stopped before it set a handler of its own went on
    set -m
    "$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])' "${recipe[@]}" > "$WORK/seed$seed.log" 2>&1 < /dev/null &
    set +m
    pids+=("$!")
    stage "seed $seed: process group $!: python ${recipe[*]}"
  done
  local last=0
  while :; do
    sleep 5  # first: a run is never signalled in the moment before its launcher has put SIGINT back to its default
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    for seed in ${SEEDS//,/ }; do send_model "$seed"; done
    [ "$SECONDS" -lt "$BUDGET" ] || stop=${stop:-"budget of ${BUDGET}s reached"}
    [ "$alive" = 1 ] && [ -z "$stop" ] || break
    if [ $((SECONDS - last)) -ge 60 ]; then
      last=$SECONDS
      for seed in ${SEEDS//,/ }; do
        echo "[${SECONDS}s] seed $seed: last checkpoint $(ls "$(pretrained "$seed")/checkpoints" 2>/dev/null | tail -1)" \
             "| $(tail -c 300 "$WORK/seed$seed.log" | tr '\r\n' '  ' | tail -c 120)"
      done
    fi
  done
  if [ "$alive" = 1 ]; then
    stage "$stop: SIGINT to every process group"
    for pid in "${pids[@]}"; do kill -INT -- "-$pid" 2>/dev/null; done
    for _ in $(seq 30); do
      alive=0; for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [ "$alive" = 1 ] || break; sleep 1
    done
  fi
  stage "collect"
  local ckpt
  for seed in ${SEEDS//,/ }; do
    send_model "$seed"
    [ -f "$OUT/pretrained-seed$seed.tar" ] && continue
    ckpt=$(ls -d "$(pretrained "$seed")"/checkpoints/step-* 2>/dev/null | sort | tail -1)
    if [ -n "$ckpt" ]; then
      tar czf - -C "$(dirname "$ckpt")" "$(basename "$ckpt")" \
        | split -b 15M - "$OUT/pretrain-checkpoint-seed$seed.tar.gz.part-"
      stage "seed $seed: no final model; its $ckpt in parts"
    fi
  done
  archive "$OUT/gpu_best_outputs.tar.gz" "$WORK" .
  cp "$(pretrained "${SEEDS%%,*}").log" "$OUT/pretrain_first_seed.log" 2>/dev/null || true
  nvidia-smi 2>&1 | head -20 || true
  ls -l "$OUT"
  echo "done in ${SECONDS}s"
}

mkdir -p "$OUT" "$WORK"
# A Ctrl-C reaches every process of this pipeline: main() handles it, tee ignores it (so the log goes on to the end),
# and this shell waits for both.
trap : INT TERM
main 2>&1 | (trap '' INT TERM; exec tee -a "$OUT/session.log")
