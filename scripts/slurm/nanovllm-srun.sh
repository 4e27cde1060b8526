#!/usr/bin/env bash
# One prompts file over a multi-node allocation, one launcher a node:
#   salloc -N 4 --ntasks-per-node=1 [--gpus-per-node=8] \
#     srun scripts/slurm/nanovllm-srun.sh MODEL PROMPTS OUTDIR [flags...]
# Task P of the step's N runs `nanovllm-launch MODEL PROMPTS --shard P/N
# -o OUTDIR/results.P.jsonl --resume` with the flags given, on every GPU it sees
# (see nanovllm-shard-task.sh); `cat OUTDIR/results.*.jsonl` is the whole answer. Running the
# same srun again finishes an interrupted run (--resume), given the same task count.
set -euo pipefail
: "${SLURM_PROCID:?run under srun}" "${SLURM_NTASKS:?run under srun}"
# Two tasks on one node would each take all of its GPUs.
if [[ ! ${SLURM_STEP_TASKS_PER_NODE:-1} =~ ^1(\(x[0-9]+\))?$ ]]; then
  echo "nanovllm-srun: warning: $SLURM_STEP_TASKS_PER_NODE tasks a node; use --ntasks-per-node=1" >&2
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/nanovllm-shard-task.sh" "$SLURM_PROCID" "$SLURM_NTASKS" "$@"
