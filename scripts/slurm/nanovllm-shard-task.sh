#!/usr/bin/env bash
# One shard of a sharded nanovllm-launch run, the part nanovllm-array.sbatch and
# nanovllm-srun.sh share:
#   nanovllm-shard-task.sh K N MODEL PROMPTS OUTDIR [launcher flags...]
# answers the requests whose index (among the non-blank lines of PROMPTS) is K mod N into
# OUTDIR/results.K.jsonl, with --resume so that a rerun (a requeued task) only does what is
# missing. Every GPU the task sees is used: --data-parallel-size (GPUs / --tp) replicas; with
# no GPU (or --device cpu among the flags) it runs on the CPU. The launcher is
# ${NANOVLLM_LAUNCH:-nanovllm-launch}; the exit status is the launcher's.
set -euo pipefail
me=nanovllm-shard-task
die() { echo "$me: $*" >&2; exit 2; }
(($# >= 5)) || die "usage: $me K N MODEL PROMPTS OUTDIR [launcher flags...]"
shard=$1 shards=$2 model=$3 prompts=$4 outdir=$5
shift 5
if [[ ! $shard =~ ^[0-9]+$ || ! $shards =~ ^[1-9][0-9]*$ ]] || ((shard >= shards)); then
  die "shard '$shard' of '$shards': need 0 <= K < N"
fi

# GPUs this task may use. Slurm's GPU binding (gres) sets CUDA_VISIBLE_DEVICES, which
# nvidia-smi ignores, so it comes first; nvidia-smi -L only where nothing narrows the set.
count_gpus() {
  if [[ -v CUDA_VISIBLE_DEVICES ]]; then
    case $CUDA_VISIBLE_DEVICES in
      "" | -1 | NoDevFiles) echo 0 ;;
      *) local ids; IFS=, read -ra ids <<<"$CUDA_VISIBLE_DEVICES"; echo "${#ids[@]}" ;;
    esac
  elif [[ ${SLURM_GPUS_ON_NODE:-0} =~ ^[1-9][0-9]*$ ]]; then
    echo "$SLURM_GPUS_ON_NODE"
  elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi -L | grep -c '^GPU ' || true  # MIG instances are indented under their GPU
  else
    echo 0
  fi
}

# The flags the caller gave that decide what is added here.
tp=1 device="" has_dp=0 has_resume=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  a=${args[i]} next=${args[i + 1]:-}
  case $a in
    --tp | --tensor-parallel-size) tp=$next ;;
    --tp=* | --tensor-parallel-size=*) tp=${a#*=} ;;
    --device) device=$next ;;
    --device=*) device=${a#*=} ;;
    --dp | --data-parallel-size | --dp=* | --data-parallel-size=*) has_dp=1 ;;
    --resume) has_resume=1 ;;
    --shard | --shard=* | -o | --output | --output=* | -o?*)
      die "$a: the shard and its output file are set here (OUTDIR/results.K.jsonl)" ;;
  esac
done
[[ $tp =~ ^[1-9][0-9]*$ ]] || die "--tp '$tp' is not a positive integer"

extra=()
((has_resume)) || extra+=(--resume)
gpus=$(count_gpus)
if [[ $device == cpu ]] || { [[ -z $device ]] && ((gpus == 0)); }; then
  [[ -n $device ]] || extra+=(--device cpu)
  placement="CPU"
elif ((has_dp)); then
  placement="$gpus GPUs, --data-parallel-size as given"
else
  ((gpus >= tp)) || die "$(hostname -s): $gpus GPUs visible, --tp $tp needs $tp"
  dp=$((gpus / tp))
  ((gpus % tp == 0)) || echo "$me: warning: $((gpus % tp)) of $gpus GPUs idle (--tp $tp)" >&2
  extra+=(--data-parallel-size "$dp")
  placement="$gpus GPUs: $dp replicas x --tp $tp"
fi

mkdir -p "$outdir"
launch=${NANOVLLM_LAUNCH:-nanovllm-launch}
cmd=("$launch" "$model" "$prompts" --shard "$shard/$shards" -o "$outdir/results.$shard.jsonl"
     "${extra[@]}" "$@")
echo "$me: $(hostname -s) shard $shard/$shards on $placement: ${cmd[*]}" >&2
exec "${cmd[@]}"
