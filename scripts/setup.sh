#!/usr/bin/env bash
# Installs every Debian package the build and the tests need. Non-interactive and idempotent:
# packages already present are skipped, so a second run does nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libboost-serialization-dev
  libxxhash-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libpcre2-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format-14 clang-tidy-14  # the style gates (scripts/check_style.sh), pinned
  slurm-wlm munge  # a one-node Slurm cluster for tests/scripts/slurm_shard_test.sh
  # The Python API: its tests (tests/python) and its offline install (scripts/install_python.sh)
  python3-pytest python3-venv python3-setuptools python3-wheel
)
# node/npm run the reference tokenizer packages; the machine image may already ship its own
# Node.js build (with npm inside), so ask Debian for them only when the commands are missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [[ -x $d/nvcc ]] && export PATH=$d:$PATH && break
  done
fi
command -v nvcc >/dev/null || { echo "setup: nvcc not found: the CUDA 13 toolkit is required to build" >&2; exit 1; }

# Reference tokenizer packages (npm) for the tokenizer tests, fixtures and demo.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -f $here/setup_npm_refs.sh ]]; then bash "$here/setup_npm_refs.sh"; fi
echo "setup: ok" >&2
