# Sourced by the runtime GPU checks (scripts/tp_peer_check.sh, tp_failure_check.sh,
# dp_check.sh, python_api_check.sh), from the repository root on the GPU machine: unpacks the
# bundle (scripts/build_bundle.sh) when only its archive travelled, puts its libraries and the
# pip package's NCCL on the loader path, keeps NVLink multicast off, and defines
#   bundle out work gpus   the bundle folder, where logs go ($OUT or /tmp), the models' folder,
#                          how many GPUs are visible
#   make_model PRESET      writes the random-weight preset (seed 1) under $work once, then
#                          reads its weights through once so that every start finds them in
#                          the page cache (a cold 32B folder took over 100 s to load)
#   in_background CMD...   runs CMD in the background and waits for it, so that the trap below
#                          runs at once when the script is stopped from outside (an outer
#                          timeout, Ctrl-C) and stops CMD too: bash defers a trap while a
#                          foreground child runs, and an orphaned launcher would keep its GPUs
#                          (a 32B launch left that way filled 4 H200s for every later start)
#   kill_mid_run WHO LOG RESULTS LAUNCHER_PID
#                          once LOG shows "WHO started (pid N)", every replica loaded and a
#                          first line in RESULTS, kill -9 N; prints the seconds until the
#                          launcher exits, the line naming N, the lines kept and the GPU
#                          processes left
bundle=bundle out=${OUT:-/tmp} work=${NANOVLLM_GPU_WORK:-/tmp/nanovllm_gpu}
[ -d "$bundle" ] || tar -xJf build-bundle/bundle.tar.xz
nccl_lib=$(python3 -c 'import importlib.util as u; print(list(u.find_spec("nvidia.nccl").submodule_search_locations)[0] + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH="$PWD/$bundle/lib${nccl_lib:+:$nccl_lib}" NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L | grep -c '^GPU')
mkdir -p "$work"
in_background() { "$@" & wait $!; }
trap 'kill -TERM $(jobs -p) 2>/dev/null; wait; exit 143' TERM INT
echo "GPU memory in use before the checks (MiB): $(nvidia-smi --query-gpu=memory.used \
  --format=csv,noheader,nounits | tr '\n' ' ')"
make_model() {
  [ -f "$work/$1/config.json" ] || "$bundle/bin/nanovllm-mkmodel" --preset "$1" --seed 1 \
    --threads "$(nproc)" --tokenizer-dir "$bundle/tokenizer" "$work/$1" >/dev/null
  cat "$work/$1"/*.safetensors >/dev/null
}
kill_mid_run() {
  local who=$1 log=$2 results=$3 launcher=$4 victim t0 t1 rc left
  # Mid-run: a first result written and, with replicas, every replica loaded.
  for _ in $(seq 900); do
    [ -s "$results" ] && { grep -q 'replicas loaded' "$log" || ! grep -q 'data parallelism:' "$log"; } &&
      break
    sleep 0.1
  done
  victim=$(grep -o "$who started (pid [0-9]*)" "$log" | grep -o '[0-9]*)' | tr -d ')')
  t0=$(date +%s.%N); kill -9 "$victim"; wait "$launcher"; rc=$?; t1=$(date +%s.%N)
  sleep 1
  left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)
  echo "kill -9 $who (pid $victim): launcher exit $rc after $(python3 -c "print(f'{$t1-$t0:.2f}')") s;" \
    "$(grep -o "nanovllm-launch: $who (pid [0-9]*) was killed by signal 9" "$log" | head -1);" \
    "$(wc -l <"$results") finished lines kept; GPU processes left: $left"
}
