# Sourced by the runtime GPU checks (scripts/tp_peer_check.sh, tp_failure_check.sh,
# dp_check.sh, python_api_check.sh), from the repository root on the GPU machine: unpacks the
# bundle (scripts/build_bundle.sh) when only its archive travelled, puts its libraries and the
# pip package's NCCL on the loader path, keeps NVLink multicast off, and defines
#   bundle out work gpus   the bundle folder, where logs go ($OUT or /tmp), the models' folder,
#                          how many GPUs are visible
#   make_model PRESET      writes the random-weight preset (seed 1) under $work once
bundle=bundle out=${OUT:-/tmp} work=/tmp/nanovllm_gpu
[ -d "$bundle" ] || tar -xJf build-bundle/bundle.tar.xz
nccl_lib=$(python3 -c 'import importlib.util as u; print(list(u.find_spec("nvidia.nccl").submodule_search_locations)[0] + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH="$PWD/$bundle/lib${nccl_lib:+:$nccl_lib}" NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L | grep -c '^GPU')
mkdir -p "$work"
make_model() {
  [ -f "$work/$1/config.json" ] || "$bundle/bin/nanovllm-mkmodel" --preset "$1" --seed 1 \
    --threads "$(nproc)" --tokenizer-dir "$bundle/tokenizer" "$work/$1" >/dev/null
}
