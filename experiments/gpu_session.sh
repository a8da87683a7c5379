#!/usr/bin/env bash
# One GPU session in one device call: the GPU benchmark, then as much of the faithful fast-path run as the
# time allows; everything worth keeping goes to $OUT (at most 8 files, each named below).
#
#   bash experiments/gpu_session.sh prepare     # here, once, in the repository root of the checkout that travels
#   bash experiments/gpu_session.sh              # on the GPU machine, with .gpu/ beside it, in at most 10 minutes
#   bash experiments/gpu_session.sh commands [bench_reproduce]   # the Python commands it would run (the tests parse them)
#   bash experiments/gpu_session.sh reproduce    # a second GPU run: below
#   bash experiments/gpu_session.sh recite_lm    # another: below
#
# `prepare` copies the data (DATA_SRC, default ../shared/data, which does not travel) and downloads the wheels the
# device machine lacks (WHEELS: datasets, evaluate and their needs dill and multiprocess, the versions tested here)
# into .gpu/, which it adds to .git/info/exclude. On the device the script installs those wheels, then runs:
#   1. experiments/benchmarks/bench_gpu.py: today's loop, the fast path, compiled with fused AdamW and compiled packing, the same
#      for seeds 0,1,2 stacked and one after another in one process, + TF32 (BENCH_STEPS steps each; variants whose
#      flags train_pretrain.py does not take yet are skipped and named)  -> bench_gpu.json; then
#      experiments/benchmarks/choose_fast_flags.py picks from it the fastest faithful flags for one seed (FULL_PRETRAIN) and for
#      three (REPRO_PRETRAIN, REPRO_ARGS), where not given (its reasons go to session.log); BENCH_SKIP=1 skips the
#      benchmark (the flags: given, or chosen from CHOOSE_FROM)
#   1b. (SEEDS_BENCH=1, off by default: the benchmark's seeds rows decide) experiments/benchmarks/bench_seeds.py: seeds 0,1,2
#      for BENCH_STEPS steps in a row, in one --seeds process, as three processes at once, and stacked (eager, then
#      with STACKED_COMPILE's flags)  -> bench_seeds.json
#   2. if the time left fits the chosen flags' projected pretraining: chargpt/recipes/reproduce.py as `make reproduce`
#      runs it, for FULL_VARIANT (rope; or learned), seed 0, on the fast path with FULL_PRETRAIN: the 650-epoch
#      pretraining timed end to end, the reference finetuning, dev and test predictions  -> faithful_rope_results.json
#      (faithful_VARIANT_*); its predictions (with their records: each answer's confidence) and logs go into
#      faithful_rope_outputs.tar.gz
#   3. if about CONF_NEED seconds are left: the faithful model's confidence: finetuned at each rate of
#      CONF_RATES (the reference 6e-4, then 2e-4, the faithful models' held-out choice) on the training questions
#      outside 400 held out, kept; each answers the 400 and dev, and chargpt/evaluation/abstention.py chooses the threshold for
#      80% precision on the 400  -> faithful_rope_outputs.tar.gz (abstention.json and plots per rate)
#   4. if about RECITE_NEED seconds are left: chargpt/recipes/select_finetune_lr.py on that pretrained model with
#      `--recite True` (recite, then answer), the rate chosen among RECITE_RATES on 400 held-out training
#      questions, then the final finetuning and dev and test evaluations  -> faithful_rope_recite_selection.json, its
#      predictions in faithful_rope_outputs.tar.gz
#   and session.log (this script's output). It starts no stage that would end more than BUDGET seconds (default
#   530) after it began.
# `reproduce` (a second call, once the fast path is known to fit): `make reproduce SEEDS=0,1,2 SYNTH=1` on the fast
# path (London, no pretraining, rope, learned, synthesizer; each variant's seeds pretrain and finetune in one
# --seeds process), stopped at BUDGET; results.json is rewritten after every row, so what finished comes back;
# then, while CONF_NEED seconds are left, seed 0's confidence stage (as 3. above) for rope, then learned
#   -> reproduce_results.json, reproduce_results.md, reproduce_outputs.tar.gz (predictions, their records with each
#      answer's confidence, logs, the confidence stage's abstention.json and plots), session.log
#   With what the benchmark found fastest: copy the first call's bench_gpu.json to CHOOSE_FROM (.gpu/bench_gpu.json)
#   and choose_fast_flags.py sets REPRO_PRETRAIN from it and adds --stack_seeds to REPRO_ARGS if stacking won, or
#   give them yourself, e.g. REPRO_ARGS=--stack_seeds REPRO_PRETRAIN='--torch_compile True --optim adamw_torch_fused'.
# A CPU dry run of a mode (minutes, tiny model, 1 epoch) checks the plumbing before device time is spent, e.g.
#   DATA=../shared/data OUT=/tmp/s/out WORK=/tmp/s/work BUDGET=3000 REPRO_ARGS='--pretrain_epochs 1 --seeds 0,1
#   --variants rope --skip_baselines' FULL_EXTRA='--checkpointing_steps 0 --max_steps 2' bash experiments/gpu_session.sh reproduce
# `bench_reproduce` (one call where the device time allows one: a 15-minute loan holds its start and one 10-minute
# call): a shorter benchmark (today, fast, fast_compiled_all, fast_compiled_all_stacked3; BENCH_TIMEOUT 150), its
# flags chosen, then `reproduce` with them for the time left  -> bench_gpu.json and what `reproduce` returns
# `recite_lm` (another call; the mixed-training study's lead recipe at the reference size, as `make recite DATA=d EPOCHS=50
# N_EMBD=256 SPAN=1 CONTINUE=1` ran it on 2 CPU cores: results/cpu_fp32_reference_size.json): the held-out split of
# the training questions; LM_VARIANT (rope or learned) pretraining on the fast path, LM_EPOCHS epochs of uncorrupted
# documents with the other 1,600 questions as recitation rows, for each seed of LM_SEEDS (several, e.g.
# LM_SEEDS=0,1,2: one --seeds process trains them together); then for each seed the --recite rate chosen on the 400
# held-out (answering with spans of the recitation, LM_EVAL_EXTRA), the final finetuning, dev and test, and the
# held-out model's abstention threshold. LM_HPARAMS are both stages' hyperparameters: chargpt/recipes/best.yaml's
# (`--preset best`, as `make best` runs it; its run_experiments column finetunes plainly, `--recite False`, as
# make best's does); LM_HPARAMS= LM_EPOCHS=300 takes the reference's
#   -> recite_lm_results.json, recite_lm_selection.json (every seed's choice), recite_lm_outputs.tar.gz (each seed's
#      selection, abstention, predictions and logs; with LM_EVAL_EXTRA= the held-out and final models answer
#      again, in span/ with --answer_from_recitation True, in span-cont/ with --continue_recitation True too),
#      recite_lm_pretrain.log, recite_lm_coverage_accuracy.png (the first seed's)
#   Its pretraining takes the speed flags chosen from CHOOSE_FROM as `reproduce` does (compile, and stacked seeds)
# `faithful_recite` (another call; the README's faithful-then-recite row, more seeds): `make recite RECIPE=faithful-recite`
# (chargpt/recipes/recite.py --recipe faithful-recite) for FR_VARIANT (rope) and FR_SEEDS (1: about 400 s a seed on an
# H100), the --recite rate chosen among FR_RATES (3e-4,6e-4: the held-out choice of seed 0 and the runner-up), the
# pretraining with FULL_PRETRAIN's flags (chosen from CHOOSE_FROM, or given: FULL_PRETRAIN='--torch_compile True
# --torch_compile_mode reduce-overhead --optim adamw_torch_fused --torch_compile_batches True', the H100's fastest,
# results/bench_gpu_h100.json)  -> faithful_recite_results.json, faithful_recite_outputs.tar.gz, session.log
set -uo pipefail

DATA=${DATA:-.gpu/data}
OUT=${OUT:-out/gpu-session}
WORK=${WORK:-out/gpu-session-work}
BUDGET=${BUDGET:-530}
BENCH_STEPS=${BENCH_STEPS:-300}
BENCH_WARMUP=${BENCH_WARMUP:-50}  # steps before the timed window
BENCH_TIMEOUT=${BENCH_TIMEOUT:-300}  # seconds at most for the benchmark
# in the order they matter (BENCH_TIMEOUT may cut the last); fast_compiled and fast_tf32 were measured on the H200
if [ "${1:-run}" = bench_reproduce ] || [ "${1:-} ${2:-}" = "commands bench_reproduce" ]; then
  # the yardstick, the loss reference (choose_fast_flags.py needs it), the likely choices for one seed and three
  BENCH_VARIANTS=${BENCH_VARIANTS:-today,fast,fast_compiled_all,fast_compiled_all_stacked3}
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-150}
fi
BENCH_VARIANTS=${BENCH_VARIANTS:-today,fast,fast_compiled_all,fast_compiled_all_stacked3,fast_compiled_all_seeds3,fast_compiled_all_tf32}
BENCH_EXTRA=${BENCH_EXTRA:-}  # flags for every benchmark variant
FULL_EXTRA=${FULL_EXTRA:---checkpointing_steps 0}  # flags for the full run's training stages
RECITE_NEED=${RECITE_NEED:-150}  # seconds the recite-then-answer selection is given at least
CONF_NEED=${CONF_NEED:-90}  # seconds a confidence stage is given at least
CONF_RATES=${CONF_RATES:-6e-4,2e-4}  # its finetuning rates: the reference's, then the faithful models' held-out choice
# FULL_PRETRAIN or REPRO_PRETRAIN given here (even empty) win over what choose_fast_flags.py finds in bench_gpu.json
# (this call's, or CHOOSE_FROM's); otherwise the choice sets them and adds its --stack_seeds to REPRO_ARGS
GIVEN_FULL=${FULL_PRETRAIN+given} GIVEN_REPRO=${REPRO_PRETRAIN+given}
REPRO_ARGS=${REPRO_ARGS:-}  # more chargpt/recipes/reproduce.py flags for `reproduce` (split on spaces; a dry run's)
REPRO_PRETRAIN=${REPRO_PRETRAIN:-}  # its --pretrain_extra: train_pretrain.py flags, kept whole (e.g. compile flags)
FULL_PRETRAIN=${FULL_PRETRAIN:-}  # the same for stage 2's one-seed faithful run
FULL_PROJECTED_S=  # stage 2's projected pretraining seconds, from the benchmark
CHOOSE_FROM=${CHOOSE_FROM:-.gpu/bench_gpu.json}  # an earlier call's benchmark, for `reproduce` (and `commands`)
PY=${PYTHON:-python3}
. experiments/gpu_common.sh  # environment, stage, archive
WHEELS=(datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 multiprocess==0.70.19)

BENCH=(experiments/benchmarks/bench_gpu.py --data_dir "$DATA" --steps "$BENCH_STEPS" --warmup_steps "$BENCH_WARMUP" --variants "$BENCH_VARIANTS"
       --extra "$BENCH_EXTRA" --out "$OUT/bench_gpu.json")
SEEDS_BENCH=${SEEDS_BENCH:-0}  # 1: stage 1b, three seeds in a row, in one --seeds process, concurrent, stacked
STACKED_COMPILE=${STACKED_COMPILE:---torch_compile True --torch_compile_mode reduce-overhead --optim adamw_torch_fused}
SEEDS=(experiments/benchmarks/bench_seeds.py --data_dir "$DATA" --seeds 0,1,2 --steps "$BENCH_STEPS" --flags "$BENCH_EXTRA"
       --concurrent --stacked "" --stacked "$STACKED_COMPILE" --json "$OUT/bench_seeds.json")
FULL_VARIANT=${FULL_VARIANT:-rope}  # stages 2-4's position embeddings: rope or learned
FULL_MODEL=$WORK/faithful/$FULL_VARIANT-causal-seed0-pretrain  # stage 2's pretrained model
RECITE_RATES=${RECITE_RATES:-7.5e-5,1.5e-4,3e-4,6e-4}  # stage 4's rates (rope seed 0 chose 3e-4; the four and the
# final finetuning took 4.5 minutes on an H100)
BENCH_SKIP=${BENCH_SKIP:-0}  # 1: no stage 1 (give FULL_PRETRAIN, or CHOOSE_FROM an earlier call's bench_gpu.json)
full_cmd() {
  FULL=(chargpt/recipes/reproduce.py --data_dir "$DATA" --out_dir "$WORK/faithful" --recipe reference --variants
        "$FULL_VARIANT" --seeds 0 --skip_baselines --fast_path on --extra "$FULL_EXTRA" --pretrain_extra "$FULL_PRETRAIN")
}
full_cmd

RECITE=(chargpt/recipes/select_finetune_lr.py --model_name_or_path "$FULL_MODEL" --data_dir "$DATA" --out_dir "$WORK/recite"
        --learning_rates "$RECITE_RATES" --final --extra "--recite True $FULL_EXTRA")

LM_EPOCHS=${LM_EPOCHS:-50}  # the CPU run's; with the reference's hyperparameters 300 is about 650 epochs' time
LM_HPARAMS=${LM_HPARAMS---preset best}  # both stages' (train_*.py flags; empty: the reference's)
LM_EVAL_EXTRA=${LM_EVAL_EXTRA---answer_from_recitation True --continue_recitation True}  # the rate choice's answers
LM_VARIANT=${LM_VARIANT:-rope}  # rope or learned
LM_SEEDS=${LM_SEEDS:-0}  # comma-separated; several pretrain together in one --seeds process (the fast path)
LM_PRETRAIN_EXTRA=${LM_PRETRAIN_EXTRA:-}  # more pretraining flags, e.g. a shape (--n_embd 128: the CPU frontier's)
SPLIT=(chargpt/recipes/select_finetune_lr.py --data_dir "$DATA" --out_dir "$WORK/recite-lm-sel" --split_only)
recite_lm_cmd() {  # RECITE_LM, with the speed flags chosen for one seed (FULL_PRETRAIN) or several (REPRO_*)
  local speed=$FULL_PRETRAIN stack=()
  if [[ $LM_SEEDS == *,* ]]; then
    speed=$REPRO_PRETRAIN
    if [[ " $REPRO_ARGS " == *" --stack_seeds "* ]]; then stack=(--stack_seeds); fi
  fi
  RECITE_LM=(chargpt/recipes/reproduce.py --data_dir "$DATA" --out_dir "$WORK/recite-lm" --recipe reference
             --variants "$LM_VARIANT" --seeds "$LM_SEEDS" --skip_baselines --fast_path on --pretrain_epochs "$LM_EPOCHS"
             --extra "${LM_HPARAMS:+$LM_HPARAMS }$FULL_EXTRA" --finetune_extra "--recite False" "${stack[@]}"
             --pretrain_extra "--objective language_modeling --mixed_qa_format recite --mixed_qa_corpus_path $WORK/recite-lm-sel/split/train.tsv $LM_PRETRAIN_EXTRA${speed:+ $speed}")
}
recite_lm_cmd

lm_pretraining() {  # seed $1's pretraining run, as chargpt/recipes/reproduce.py names it alone or among --seeds
  if [[ $LM_SEEDS == *,* ]]; then echo "$WORK/recite-lm/$LM_VARIANT-causal-seeds-pretrain"
  else echo "$WORK/recite-lm/$LM_VARIANT-causal-seed$1-pretrain"; fi
}
lm_pretrained() {  # seed $1's pretrained model: the run's folder, or its member's within it
  if [[ $LM_SEEDS == *,* ]]; then echo "$(lm_pretraining "$1")/seed-$1"; else lm_pretraining "$1"; fi
}
lm_select() {  # RECITE_LM_SELECT: seed $1's rate chosen on the split's 400 held-out questions (the same split_seed)
  RECITE_LM_SELECT=(chargpt/recipes/select_finetune_lr.py --model_name_or_path "$(lm_pretrained "$1")" --data_dir "$DATA"
                    --out_dir "$WORK/recite-lm-sel/$LM_VARIANT-seed$1" --seed "$1" --learning_rates 7.5e-5,1.5e-4,3e-4
                    --final --keep_models --extra "${LM_HPARAMS:+$LM_HPARAMS }--recite True $FULL_EXTRA"
                    ${LM_EVAL_EXTRA:+--eval_extra "$LM_EVAL_EXTRA"})
}
lm_select "${LM_SEEDS%%,*}"

FR_VARIANT=${FR_VARIANT:-rope}  # faithful_recite's position embeddings
FR_SEEDS=${FR_SEEDS:-1}  # its seeds (seed 0 of rope: results/faithful_h100_fast_path.json)
FR_RATES=${FR_RATES:-3e-4,6e-4}  # its --recite rates: seed 0's held-out choice and the runner-up
faithful_recite_cmd() {  # FAITHFUL_RECITE: the faithful pretraining, then recite (chargpt/recipes/recite.py)
  FAITHFUL_RECITE=(chargpt/recipes/recite.py --data_dir "$DATA" --out_dir "$WORK/faithful-recite" --recipe faithful-recite
                   --variant "$FR_VARIANT" --seeds "$FR_SEEDS" --learning_rates "$FR_RATES" --extra "$FULL_EXTRA"
                   --pretrain_extra "$FULL_PRETRAIN")
}
faithful_recite_cmd

reproduce_cmd() {  # rope first: a call cut by its budget keeps the handout's headline variant
  REPRODUCE=(chargpt/recipes/reproduce.py --data_dir "$DATA" --out_dir "$WORK/reproduce" --recipe reference
             --variants rope,learned --synthesizer --seeds 0,1,2 --fast_path on --extra "$FULL_EXTRA"
             --pretrain_extra "$REPRO_PRETRAIN" $REPRO_ARGS)
}
reproduce_cmd

choose_flags() {  # the flags experiments/benchmarks/choose_fast_flags.py finds fastest in bench_gpu.json $1, where not given
  [ -f "$1" ] || return 0
  local chosen CHOSEN_FULL_PRETRAIN CHOSEN_FULL_PROJECTED_S CHOSEN_REPRO_PRETRAIN CHOSEN_REPRO_ARGS
  chosen=$("$PY" experiments/benchmarks/choose_fast_flags.py "$1" --shell) || { echo "no flags chosen from $1"; return 0; }
  eval "$(sed 's/^/CHOSEN_/' <<< "$chosen")"
  if [ -z "$GIVEN_FULL" ] && [ -n "${CHOSEN_FULL_PRETRAIN+x}" ]; then
    FULL_PRETRAIN=$CHOSEN_FULL_PRETRAIN FULL_PROJECTED_S=$CHOSEN_FULL_PROJECTED_S
  fi
  if [ -z "$GIVEN_REPRO" ] && [ -n "${CHOSEN_REPRO_PRETRAIN+x}" ]; then
    REPRO_PRETRAIN=$CHOSEN_REPRO_PRETRAIN REPRO_ARGS="$REPRO_ARGS $CHOSEN_REPRO_ARGS"
  fi
  full_cmd
  reproduce_cmd
  recite_lm_cmd
  faithful_recite_cmd
}

conf_select() {  # CONF_SELECT: the faithful model $1 finetuned at each of CONF_RATES without the held-out 400, kept
  CONF_SELECT=(chargpt/recipes/select_finetune_lr.py --model_name_or_path "$1" --data_dir "$DATA" --out_dir "$2" --seed "$3"
               --learning_rates "$CONF_RATES" --keep_models --extra "$FULL_EXTRA")
}
conf_select "$FULL_MODEL" "$WORK/confidence/$FULL_VARIANT-seed0" 0

left() { echo $((BUDGET - SECONDS)); }

confidence() {  # the confidence of the pretrained model $1 (seed $3) into folder $2: the held-out models of CONF_SELECT
  # answer dev too; chargpt.evaluation.abstention chooses each one's 80%-precision threshold on the 400 and applies it to dev
  [ -f "$1/config.json" ] || { stage "confidence skipped: no pretrained model $1"; return 0; }
  [ "$(left)" -ge "$CONF_NEED" ] || { stage "confidence of $1 skipped: $(left)s left (CONF_NEED=$CONF_NEED)"; return 0; }
  conf_select "$@"
  stage "confidence of $1 ($(left)s left): $(printf '%q ' "${CONF_SELECT[@]}")"
  timeout "$(left)" "$PY" "${CONF_SELECT[@]}" || echo "the finetuning ended with status $? (its finished rates are kept)"
  local rate tag
  for rate in ${CONF_RATES//,/ }; do
    tag=lr$("$PY" -c 'import sys; print("%g" % float(sys.argv[1]))' "$rate")
    [ -f "$2/$tag-finetune/config.json" ] && [ "$(left)" -ge 30 ] || continue
    timeout "$(left)" "$PY" evaluate_birthplace.py --model_name_or_path "$2/$tag-finetune" \
      --eval_corpus_path "$DATA/birth_dev.tsv" --outputs_path "$2/$tag.dev.predictions" \
      && "$PY" chargpt/evaluation/abstention.py --holdout "$2/$tag.holdout.predictions" --dev "$2/$tag.dev.predictions" \
         --target_precision 0.8 --out_dir "$2/abstention-$tag" || echo "the $tag confidence ended with status $?"
  done
}

span_answers() {  # span answers: the folder $1's final model and held-out model $2 answer again with
  # --answer_from_recitation True (the held-out questions first: where the choice is judged), into $1/span, then
  # with --continue_recitation True as well, into $1/span-cont
  local sel=$1 tag=$2 job model corpus name dir more
  for dir in span span-cont; do
    more=(); [ "$dir" = span-cont ] && more=(--continue_recitation True)
    for job in "$tag-finetune:$sel/split/holdout.tsv:$tag.holdout" "$tag-finetune:$DATA/birth_dev.tsv:$tag.dev" \
               "final-finetune:$DATA/birth_dev.tsv:final.dev" "final-finetune:$DATA/birth_test_inputs.tsv:final.test"; do
      IFS=: read -r model corpus name <<< "$job"
      [ -f "$sel/$model/config.json" ] && [ "$(left)" -ge 20 ] || continue
      stage "span answers ($dir): $sel/$model on $corpus ($(left)s left)"
      timeout "$(left)" "$PY" evaluate_birthplace.py --model_name_or_path "$sel/$model" --eval_corpus_path "$corpus" \
        --wiki_path "$DATA/wiki.txt" --outputs_path "$sel/$dir/$name.predictions" --answer_from_recitation True \
        "${more[@]}" --results_path "$sel/$dir/$name.json" || echo "span answers of $name ($dir) ended with status $?"
    done
  done
}

session() {
  stage "environment"
  environment || return 1

  if [ "$BENCH_SKIP" = 1 ]; then
    stage "1. benchmark skipped (BENCH_SKIP=1): flags from CHOOSE_FROM=$CHOOSE_FROM where not given"
    choose_flags "$CHOOSE_FROM"
  else
    local limit=$(( $(left) - 240 < BENCH_TIMEOUT ? $(left) - 240 : BENCH_TIMEOUT ))
    benchmark "$(( limit > 60 ? limit : 60 ))"
  fi

  if [ "$SEEDS_BENCH" = 1 ] && [ "$(left)" -ge 360 ]; then  # how a reproduce should train its seeds
    stage "1b. seeds: $(printf '%q ' "${SEEDS[@]}")"
    timeout 240 "$PY" "${SEEDS[@]}" || echo "the seeds benchmark ended with status $?"
  fi

  # The full run needs its flags' projected pretraining plus about 120 s of launches, finetuning, evaluation.
  local need=300
  [ -n "$FULL_PROJECTED_S" ] && need=$(( ${FULL_PROJECTED_S%.*} + 120 ))
  if [ "$(left)" -ge "$need" ]; then
    stage "2. faithful $FULL_VARIANT on the fast path, 650 epochs, finetuning, dev and test (about ${need}s needed," \
          "$(left)s left): $(printf '%q ' "${FULL[@]}")"
    timeout "$(left)" "$PY" "${FULL[@]}" || echo "the full run ended with status $? (what finished is copied)"
  else
    stage "2. skipped: the full run needs about ${need}s, $(left)s are left"
  fi

  echo; echo "3. the faithful $FULL_VARIANT model's confidence"
  confidence "$FULL_MODEL" "$WORK/confidence/$FULL_VARIANT-seed0" 0

  if [ -f "$FULL_MODEL/config.json" ] && [ "$(left)" -ge "$RECITE_NEED" ]; then
    stage "4. recite, then answer, on the faithful $FULL_VARIANT model ($(left)s left): $(printf '%q ' "${RECITE[@]}")"
    timeout "$(left)" "$PY" "${RECITE[@]}" || echo "the selection ended with status $? (its finished points are kept)"
  else
    stage "4. skipped: no pretrained model, or fewer than ${RECITE_NEED}s left ($(left)s)"
  fi

  stage "collect"
  local pair
  for pair in "$WORK/faithful/results.json:faithful_${FULL_VARIANT}_results.json" \
              "$WORK/recite/selection.json:faithful_${FULL_VARIANT}_recite_selection.json"; do
    if [ -f "${pair%%:*}" ]; then cp "${pair%%:*}" "$OUT/${pair##*:}"; fi
  done
  mkdir -p "$WORK/faithful" "$WORK/confidence" "$WORK/recite"
  archive "$OUT/faithful_${FULL_VARIANT}_outputs.tar.gz" "$WORK" faithful confidence recite
  ls -l "$OUT"
  echo "done in ${SECONDS}s"
}

benchmark() {  # stage 1 in at most $1 seconds, then the flags chosen from what it measured
  stage "1. benchmark: $(printf '%q ' "${BENCH[@]}")"
  timeout "$1" "$PY" "${BENCH[@]}" || echo "the benchmark ended with status $? (its finished variants are in bench_gpu.json)"
  stage "flags: experiments/benchmarks/choose_fast_flags.py $OUT/bench_gpu.json --shell"
  choose_flags "$OUT/bench_gpu.json"
}

reproduce_session() {  # $1 = bench: the benchmark first, in this call, and its flags
  stage "environment"
  environment || return 1
  if [ "${1:-}" = bench ]; then benchmark "$BENCH_TIMEOUT"; else choose_flags "$CHOOSE_FROM"; fi
  stage "make reproduce SEEDS=0,1,2 SYNTH=1 on the fast path ($(left)s left): $(printf '%q ' "${REPRODUCE[@]}")"
  timeout "$(left)" "$PY" "${REPRODUCE[@]}" || echo "the run ended with status $? (the finished rows are kept)"
  local variant member
  for variant in rope learned; do  # seed 0's confidence, from its folder alone or among --seeds
    member=$WORK/reproduce/$variant-causal-seeds-pretrain/seed-0
    [ -d "$member" ] || member=$WORK/reproduce/$variant-causal-seed0-pretrain
    confidence "$member" "$WORK/confidence/$variant-seed0" 0
  done
  stage "collect"
  local dir=$WORK/reproduce
  [ -f "$dir/results.json" ] && cp "$dir/results.json" "$OUT/reproduce_results.json"
  [ -f "$dir/results.md" ] && cp "$dir/results.md" "$OUT/reproduce_results.md"
  mkdir -p "$dir" "$WORK/confidence"
  archive "$OUT/reproduce_outputs.tar.gz" "$WORK" reproduce confidence
  ls -l "$OUT"
  echo "done in ${SECONDS}s"
}

faithful_recite_session() {
  stage "environment"
  environment || return 1
  choose_flags "$CHOOSE_FROM"
  stage "the faithful pretraining, then recite: $(printf '%q ' "${FAITHFUL_RECITE[@]}")"
  timeout "$(left)" "$PY" "${FAITHFUL_RECITE[@]}" || echo "the recipe ended with status $? (what finished is copied)"
  stage "collect"
  [ -f "$WORK/faithful-recite/results.json" ] && cp "$WORK/faithful-recite/results.json" "$OUT/faithful_recite_results.json"
  mkdir -p "$WORK/faithful-recite"
  archive "$OUT/faithful_recite_outputs.tar.gz" "$WORK" faithful-recite
  ls -l "$OUT"
  echo "done in ${SECONDS}s"
}

recite_lm_session() {
  stage "environment"
  environment || return 1
  choose_flags "$CHOOSE_FROM"
  stage "split: $(printf '%q ' "${SPLIT[@]}")"
  "$PY" "${SPLIT[@]}" || return 1
  stage "pretraining, $LM_VARIANT, seeds $LM_SEEDS, $LM_EPOCHS epochs ($(left)s left): $(printf '%q ' "${RECITE_LM[@]}")"
  timeout "$(left)" "$PY" "${RECITE_LM[@]}" || echo "the run ended with status $? (what finished is copied)"
  local seed sel tag first=${LM_SEEDS%%,*}
  for seed in ${LM_SEEDS//,/ }; do
    lm_select "$seed"
    [ -f "$(lm_pretrained "$seed")/config.json" ] || continue
    stage "recite, then answer, seed $seed ($(left)s left): $(printf '%q ' "${RECITE_LM_SELECT[@]}")"
    timeout "$(left)" "$PY" "${RECITE_LM_SELECT[@]}" || echo "the selection ended with status $?"
    # the model that never saw the 400 held-out questions (chosen rate) answers dev too; the abstention
    # threshold for 80% precision is chosen on the 400 and applied to dev (docs/confidence.md)
    sel=$WORK/recite-lm-sel/$LM_VARIANT-seed$seed
    tag=$("$PY" -c 'import json, sys; print("lr%g" % float(json.load(open(sys.argv[1]))["chosen_learning_rate"]))' \
          "$sel/selection.json" 2>/dev/null)
    if [ -n "$tag" ] && [ -f "$sel/$tag-finetune/config.json" ]; then
      stage "confidence of seed $seed's held-out model $tag ($(left)s left)"
      timeout "$(left)" "$PY" evaluate_birthplace.py --model_name_or_path "$sel/$tag-finetune" \
        --eval_corpus_path "$DATA/birth_dev.tsv" --outputs_path "$sel/$tag.dev.predictions" $LM_EVAL_EXTRA \
        && "$PY" chargpt/evaluation/abstention.py --holdout "$sel/$tag.holdout.predictions" --dev "$sel/$tag.dev.predictions" \
           --target_precision 0.8 --out_dir "$sel/abstention" || echo "the confidence stage ended with status $?"
      # answered freely (LM_EVAL_EXTRA=), the models answer again with spans of their recitation
      [ -n "$LM_EVAL_EXTRA" ] || span_answers "$sel" "$tag"
    fi
  done
  stage "collect"
  "$PY" -c '
import json, pathlib, sys
found = {p.parent.name: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*-seed*/selection.json"))}
pathlib.Path(sys.argv[2]).write_text(json.dumps(found, indent=1) + "\n")
' "$WORK/recite-lm-sel" "$OUT/recite_lm_selection.json" || echo "no selection to collect"
  local pair
  for pair in "$WORK/recite-lm/results.json:recite_lm_results.json" \
              "$WORK/recite-lm-sel/$LM_VARIANT-seed$first/abstention/coverage_accuracy.png:recite_lm_coverage_accuracy.png" \
              "$(lm_pretraining "$first").log:recite_lm_pretrain.log"; do
    if [ -f "${pair%%:*}" ]; then cp "${pair%%:*}" "$OUT/${pair##*:}"; fi
  done
  archive "$OUT/recite_lm_outputs.tar.gz" "$WORK" recite-lm recite-lm-sel
  ls -l "$OUT"
  echo "done in ${SECONDS}s"
}

case "${1:-run}" in
  commands)
    choose_flags "$CHOOSE_FROM" >&2
    printf '%q ' "$PY" "${BENCH[@]}"; echo
    printf '%q ' "$PY" "${SEEDS[@]}"; echo
    printf '%q ' "$PY" "${FULL[@]}"; echo
    printf '%q ' "$PY" "${REPRODUCE[@]}"; echo
    printf '%q ' "$PY" "${RECITE[@]}"; echo
    printf '%q ' "$PY" "${SPLIT[@]}"; echo
    printf '%q ' "$PY" "${RECITE_LM[@]}"; echo
    printf '%q ' "$PY" "${RECITE_LM_SELECT[@]}"; echo
    printf '%q ' "$PY" "${CONF_SELECT[@]}"; echo
    printf '%q ' "$PY" "${FAITHFUL_RECITE[@]}"; echo ;;
  faithful_recite)
    mkdir -p "$OUT" "$WORK"
    faithful_recite_session 2>&1 | tee -a "$OUT/session.log" ;;
  recite_lm)
    mkdir -p "$OUT" "$WORK"
    recite_lm_session 2>&1 | tee -a "$OUT/session.log" ;;
  reproduce)
    mkdir -p "$OUT" "$WORK"
    reproduce_session 2>&1 | tee -a "$OUT/session.log" ;;
  bench_reproduce)
    mkdir -p "$OUT" "$WORK"
    reproduce_session bench 2>&1 | tee -a "$OUT/session.log" ;;
  prepare)
    set -e
    SRC=${DATA_SRC:-../shared/data}
    mkdir -p .gpu/data .gpu/whl
    install -m 644 "$SRC"/wiki.txt "$SRC"/birth_places_train.tsv "$SRC"/birth_dev.tsv "$SRC"/birth_test_inputs.tsv \
        .gpu/data/
    exclude=$(git rev-parse --git-path info/exclude)
    grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .gpu/whl "${WHEELS[@]}"
    ls -l .gpu/data .gpu/whl
    echo 'ready: on the GPU machine, with .gpu/ beside it: bash experiments/gpu_session.sh MODE; MODE: run, or'
    echo 'bench_reproduce where the loan holds one call, then reproduce and recite_lm (bench_gpu.json in .gpu/)' ;;
  run)
    mkdir -p "$OUT" "$WORK"
    session 2>&1 | tee -a "$OUT/session.log" ;;
  *)
    echo "usage: bash experiments/gpu_session.sh [run|reproduce|bench_reproduce|recite_lm|faithful_recite|prepare|commands]" >&2
    exit 2 ;;
esac
