# The device calls' shared steps, sourced by experiments/gpu_session.sh and experiments/gpu_best.sh (from the
# repository root; they set PY and DATA). environment(): the wheels of .gpu/whl installed (NO_WHEELS=1: what is
# installed), the project's imports loaded, the versions printed, the data checked. stage(): a timed log line.
# archive(): what a call brings back besides models.
stage() { echo; echo "=== [$(date -u +%H:%M:%S), ${SECONDS}s] $*"; }

archive() {  # tar.gz $1 of what is worth keeping under the folders $3... of $2: results, records, predictions,
  # logs, plots, the held-out splits; never a model
  local out=$1 base=$2; shift 2
  (cd "$base" && find "$@" -path '*-finetune' -prune -o -path '*-pretrain' -prune -o -type f \
     \( -name '*.json' -o -name '*.jsonl' -o -name '*.predictions' -o -name '*.log' -o -name '*.png' -o -name '*.md' \
     -o -name '*.tsv' \) -print0 | tar czf - --null -T -) > "$out"
}

environment() {
  export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  if compgen -G ".gpu/whl/*.whl" > /dev/null && [ -z "${NO_WHEELS:-}" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .gpu/whl/*.whl || { echo "wheel install failed"; return 1; }
    export PYTHONPATH=/tmp/site:$PWD
  else
    echo "no wheels in .gpu/whl (gpu_session.sh prepare makes them), or NO_WHEELS=1: using what is installed"
    export PYTHONPATH=$PWD
  fi
  nvidia-smi -L 2>&1 || true
  # The project's own imports (datasets, evaluate, transformers, accelerate) and the versions found.
  "$PY" -c '
import importlib.metadata as md, sys, torch
import data_scripts.loading, chargpt.evaluation.predict, chargpt.training.loop  # the packages import lazily: load what runs
cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA DEVICE"
found = ", ".join(f"{p} {md.version(p)}" for p in ("transformers", "accelerate", "datasets", "evaluate"))
print("python", sys.version.split()[0], "| torch", torch.__version__, "cuda", torch.version.cuda, "|", cuda, "|", found)
' || { echo "the project does not import here: stopping"; return 1; }
  [ -f "$DATA/wiki.txt" ] || { echo "no $DATA/wiki.txt (bash experiments/gpu_session.sh prepare copies it)"; return 1; }
}
