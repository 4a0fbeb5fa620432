#!/usr/bin/env bash
# The GPU check: axjax's suite and its GPU benchmarks on a machine whose Python already has
# JAX with CUDA (no network needed). Stages, each under its own `timeout`, each run whatever
# the ones before gave, all inside one time budget (the first ones first):
#
#   env          date, cores, nvidia-smi -L, Python, jax/jaxlib/equinox/optax versions, devices
#   install      pip install --no-deps --no-build-isolation -e . when the build backend is
#                there (hatchling, and editables for -e; without it a plain install); else
#                axjax runs from the checkout (PYTHONPATH points there in every case)
#   tests        tests/core tests/nn tests/graph tests/train tests/models, pytest-xdist -n 14
#                when it is installed (else serial), --durations=15, a JUnit file  (240 s)
#   transformer  python -m benchmarks.transformer --dtypes bf16 --experts cudnn,einsum
#                --no-memory --rounds 3 --window 0.5: 7 programs, each row printed as it
#                completes  (150 s)
#   large        python -m benchmarks.large --blocks mlp,attention, bf16  (90 s)
#   mnist        python -m benchmarks --models mlp, frameworks jax, expert, axjax, fit, 3
#                rounds, no memory/dispatch/op-count sections  (60 s)
#   figures      python tools/gpu_figures.py: the rows of BENCHMARKS.md's GPU section
#
# --stage gpt2-124m runs env and install, then instead of the stages above (budget 480 s):
#   gpt2-124m         python -m benchmarks.gpt2 --preset gpt2-124m: the JAX expert (cuDNN),
#                     TrainStep, fit's step and compiled PyTorch at GPT-2's vocabulary, each
#                     row printed as its rounds complete  (220 s)
#   gpt2-124m-padded  the same at the vocabulary padded to 50,304  (220 s)
#
# The end lists each stage's exit status (124: its timeout; "skipped": no time left); the
# script exits 0 only when every stage passed. On an H100 with 16 cores the default stages
# took about 170 + 90 + 80 + 50 s before tests/models joined (sizes since: by program count).
#
#   bash tools/gpu_check.sh [--smoke] [--stage default|gpt2-124m] [--dry-run] [--data DIR]
#                           [--budget SECONDS] [--workers N]
#
#   --smoke        the same stages at CPU size (a few tests, the benchmarks' quick presets,
#                  three times the timeouts): checks the script itself, JAX on a CPU included
#   --data DIR     the folder holding mnist/ (default: $AXJAX_TEST_DATA, else shared/data in
#                  the checkout, else ../shared/data beside it); without it the MNIST tests
#                  skip and the MNIST benchmark trains on seeded noise (and says so)
#   --stage S      default (the stages above) or gpt2-124m (its own, opt-in)
#   --dry-run      print each stage's command and cap without running any (checks the plan)
#   --budget S     seconds for the stages together (default 500, gpt2-124m 480; the figures
#                  come after)
#   --workers N    pytest-xdist workers (default: 14, at most the cores less 2)
#   OUT=DIR        where everything is written (default: a new temporary folder): 7 files,
#                  flat: summary.txt pytest.log junit.xml bench.log transformer.json
#                  large.json mnist.json (gpt2-124m: gpt2.json gpt2-padded.json)
#   PYTHON=...     the interpreter (default: python3 or python, the first that has JAX)
#   GPU_CHECK_TESTS="..."  the tests stage's pytest arguments, whitespace-separated
#
# Memory: 14 processes on one GPU must not each preallocate 75 % of it, so the tests run
# with XLA_PYTHON_CLIENT_PREALLOCATE=false and XLA_PYTHON_CLIENT_MEM_FRACTION=0.85/workers
# (the most each may grow to); the benchmarks run alone with JAX's defaults. The tests also
# run with XLA_FLAGS=--xla_gpu_deterministic_ops=true (no atomics: a step run twice gives the
# same bits, which the suite's resume and replay tests compare). Float32 matrix products run
# at full precision in the tests (tests/conftest.py); the benchmarks keep JAX's default.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${OUT:-}" ]; then  # relative to where the script was called from
  mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)" || exit 2
fi
cd "$ROOT"

smoke=0
dry=0
stage=default
budget=""
workers=""
data="${AXJAX_TEST_DATA:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --dry-run) dry=1 ;;
    --stage) stage="$2"; shift ;;
    --data) data="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --workers) workers="$2"; shift ;;
    -h|--help) sed -n '2,54p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$stage" in
  default|gpt2-124m) ;;
  *) echo "gpu_check: unknown stage $stage (default or gpt2-124m)" >&2; exit 2 ;;
esac
[ -n "$budget" ] || budget=$([ "$smoke" = 1 ] && echo 900 || { [ "$stage" = default ] && echo 500 || echo 480; })
if [ -z "${PYTHON:-}" ]; then  # the first Python on PATH that has JAX
  for c in python3 python; do
    command -v "$c" >/dev/null && "$c" -c 'import jax' 2>/dev/null && { PYTHON=$c; break; }
  done
fi
PY="$(command -v "${PYTHON:-python3}")" || { echo "gpu_check: no Python (set PYTHON)" >&2; exit 2; }
OUT="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
# axjax and benchmarks/ from this checkout, whether or not the install stage runs
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1  # a stage killed by its timeout still leaves what it printed

say() { echo "$*" | tee -a "$SUMMARY"; }

# --- the data folder: the first of --data/$AXJAX_TEST_DATA, ./shared/data, ../shared/data
if [ -z "$data" ]; then
  for d in "$ROOT/shared/data" "$ROOT/../shared/data"; do
    [ -f "$d/mnist/train-images-idx3-ubyte.gz" ] && { data="$(cd "$d" && pwd)"; break; }
  done
fi
if [ -n "$data" ] && [ -f "$data/mnist/train-images-idx3-ubyte.gz" ]; then
  export AXJAX_TEST_DATA="$data"
  data_note="MNIST from $data/mnist"
else
  data_note="no MNIST files (${data:-none given}): the MNIST tests skip, the benchmark uses noise"
  data=""
fi

# --- stages: each under `timeout`, within what is left of the budget
start=$SECONDS
names=()
results=()
signal=TERM  # what a stage's timeout sends first (the tests: INT, so pytest still reports)
run_stage() {  # run_stage NAME CAP_SECONDS LOG COMMAND...: the command's output goes to LOG
  local name=$1 cap=$2 log=$3 left limit t0 rc size
  shift 3
  [ "$smoke" = 1 ] && cap=$((3 * cap))  # a loaded CPU compiles slowly
  left=$((budget - (SECONDS - start)))
  limit=$((cap < left ? cap : left))
  names+=("$name")
  if [ "$limit" -lt 15 ]; then
    results+=("skipped (${left} s of the ${budget} s budget left)")
    say "== $name: skipped, ${left} s of the budget left"
    return 0
  fi
  if [ "$dry" = 1 ]; then
    results+=("dry run")
    say "== $name (at most ${limit} s):$(printf ' %q' "$@")"
    return 0
  fi
  echo "== $name (at most ${limit} s):$(printf ' %q' "$@")" | tee -a "$log"
  size=$(wc -c <"$log")
  t0=$SECONDS
  timeout --signal="$signal" --kill-after=20 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  [ "$log" = "$SUMMARY" ] && tail -c +"$((size + 1))" "$log"
  results+=("exit $rc after $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (its ${limit} s timeout)")")
  say "== $name: exit $rc after $((SECONDS - t0)) s"
}
# the stages that are shell functions run as `bash -c NAME` under timeout
export PY ROOT data_note

# 1. environment
env_report() {
  date -u
  echo "cores: $(nproc)"
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L; else echo "nvidia-smi: absent"; fi
  echo "checkout: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  echo "data: $data_note"
  echo "XLA_FLAGS: ${XLA_FLAGS:-(unset)}"
  "$PY" - <<'PYEOF'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("jax", "jaxlib", "equinox", "optax", "jaxtyping", "numpy", "xdist", "hypothesis"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except ImportError:
        print(name, "not installed")
import jax
print("backend", jax.default_backend(), "devices", jax.devices())
PYEOF
}
export -f env_report
run_stage env 60 "$SUMMARY" bash -c env_report
backend=$("$PY" -c 'import jax; print(jax.default_backend())' 2>/dev/null || echo none)
if [ "$smoke" = 0 ] && [ "$dry" = 0 ] && [ "$backend" != gpu ]; then
  say "gpu_check: JAX's backend here is '$backend', not gpu: run with --smoke to check the script"
  exit 2
fi

# 2. install over the image's JAX, without resolving dependencies (no network there)
install_axjax() {  # fails if pip fails, or if axjax does not import from this checkout
  local rc=0
  local pip=("$PY" -m pip install --no-deps --no-build-isolation --no-input -q)
  if "$PY" -c 'import hatchling, editables' 2>/dev/null; then  # hatchling's editable needs both
    "${pip[@]}" -e "$ROOT" || rc=$?
  elif "$PY" -c 'import hatchling' 2>/dev/null; then  # a copy of this same checkout
    "${pip[@]}" "$ROOT" || rc=$?
  else
    echo "hatchling (the build backend) is not installed: axjax runs from $ROOT (PYTHONPATH)"
  fi
  "$PY" -c 'import axjax; print("axjax", axjax.__version__, "from", axjax.__file__)' || rc=$?
  return "$rc"
}
export -f install_axjax
run_stage install 120 "$SUMMARY" bash -c install_axjax

# 3-6 (gpt2-124m): GPT-2 124M at its real vocabulary, against the JAX expert and PyTorch
if [ "$stage" = gpt2-124m ]; then
  if [ "$smoke" = 1 ]; then
    gpt2=(--preset quick --rounds 1 --window 0.01 --torch off)
    padded=(--preset quick --rounds 1 --window 0.01 --torch off)
  else
    gpt2=(--preset gpt2-124m --rounds 3 --window 0.5)
    padded=(--preset gpt2-124m-padded --rounds 3 --window 0.5)
  fi
  : >"$OUT/bench.log"
  run_stage gpt2-124m 220 "$OUT/bench.log" "$PY" -m benchmarks.gpt2 "${gpt2[@]}" \
    --json "$OUT/gpt2.json"
  run_stage gpt2-124m-padded 220 "$OUT/bench.log" "$PY" -m benchmarks.gpt2 "${padded[@]}" \
    --json "$OUT/gpt2-padded.json"
  [ "$dry" = 1 ] || tail -n 40 "$OUT/bench.log"
else
# 3. the tests
cores=$(nproc)
if [ -z "$workers" ]; then
  workers=$((cores - 2 < 14 ? cores - 2 : 14))
  [ "$smoke" = 1 ] && workers=$((workers < 2 ? workers : 2))
fi
xdist=()
if [ "$workers" -ge 2 ] && "$PY" -c 'import xdist' 2>/dev/null; then
  xdist=(-n "$workers")
  fraction=$(awk -v n="$workers" 'BEGIN { printf "%.3f", 0.85 / n }')
else
  workers=1
  fraction=0.75
fi
if [ -n "${GPU_CHECK_TESTS:-}" ]; then
  read -r -a tests <<<"$GPU_CHECK_TESTS"
elif [ "$smoke" = 1 ]; then
  tests=(tests/test_conftest.py tests/train/test_fit.py
    -k "runs_own_step or non_finite_under_finite or precision or tool")
else
  tests=(tests/core tests/nn tests/graph tests/train tests/models)
fi
# deterministic GPU kernels, if this XLA still knows the flag (an unknown flag is fatal)
flags="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_deterministic_ops=true"
if ! XLA_FLAGS="$flags" timeout 60 "$PY" -c 'import jax.numpy as jnp; jnp.zeros(2).sum().block_until_ready()' >/dev/null 2>&1; then
  say "tests: XLA refuses --xla_gpu_deterministic_ops=true here; running without it"
  flags="${XLA_FLAGS:-}"
fi
say "tests: ${workers} process(es) ${xdist[*]}, each at most ${fraction} of the GPU's memory; XLA_FLAGS=${flags}"
: >"$OUT/pytest.log"
signal=INT  # pytest interrupted still prints its summary and the slowest tests
run_stage tests 240 "$OUT/pytest.log" env XLA_PYTHON_CLIENT_PREALLOCATE=false \
  XLA_PYTHON_CLIENT_MEM_FRACTION="$fraction" \
  XLA_FLAGS="$flags" \
  "$PY" -m pytest -q -p no:cacheprovider "${xdist[@]}" --durations=15 \
  --junitxml="$OUT/junit.xml" "${tests[@]}"
signal=TERM
[ "$dry" = 1 ] || tail -n 25 "$OUT/pytest.log"

# 4-6. the benchmarks, one at a time (the GPU to itself), their tables into bench.log
if [ "$smoke" = 1 ]; then
  large=(--preset quick --rounds 2 --window 0.01)
  transformer=(--preset quick --rounds 1 --window 0.01 --dtypes bf16 --experts einsum --no-memory)
  mnist=(--quick --rounds 2 --compile-rounds 1 --frameworks jax,expert,axjax,fit)
else
  large=()
  transformer=(--rounds 3 --window 0.5 --dtypes bf16 --experts cudnn,einsum --no-memory)
  mnist=(--rounds 3 --compile-rounds 2 --frameworks jax,expert,axjax,fit)
fi
[ -n "$data" ] && mnist+=(--data "$data/mnist")
: >"$OUT/bench.log"
run_stage transformer 150 "$OUT/bench.log" "$PY" -m benchmarks.transformer \
  "${transformer[@]}" --json "$OUT/transformer.json"
run_stage large 90 "$OUT/bench.log" "$PY" -m benchmarks.large \
  --blocks mlp,attention "${large[@]}" --json "$OUT/large.json"
run_stage mnist 60 "$OUT/bench.log" "$PY" -m benchmarks --models mlp --no-memory --no-dispatch \
  --no-structure "${mnist[@]}" --json "$OUT/mnist.json"
[ "$dry" = 1 ] || tail -n 40 "$OUT/bench.log"

fi

# 7. the summary: every stage's status, then the figures
{
  echo
  echo "== stages ($((SECONDS - start)) s in all, budget ${budget} s)"
  for i in "${!names[@]}"; do printf '%-12s %s\n' "${names[$i]}" "${results[$i]}"; done
  echo
  echo "== figures"
  [ "$dry" = 1 ] || timeout 60 "$PY" "$ROOT/tools/gpu_figures.py" "$OUT" || echo "gpu_figures.py: exit $?"
  echo
  echo "written to $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
} | tee -a "$SUMMARY"
# exit 0 only when every stage ran and passed
for r in "${results[@]}"; do [ "$r" = "${r#exit 0 }" ] && [ "$r" != "dry run" ] && exit 1; done
exit 0
