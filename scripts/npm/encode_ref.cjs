// Differential-test server: node encode_ref.cjs IN.json OUT.json [tokenizer.json]
// IN: {"texts": [...], "decode": [[ids...], ...]} -> OUT: {"ids": [[...]], "decoded": [...],
// "decoded_skip": [...]} computed by Hugging Face tokenizers in this run.
'use strict';
const fs = require('fs');
const ref = require('./reference.cjs');

async function main() {
  const [inFile, outFile, tokFile] = process.argv.slice(2);
  if (!inFile || !outFile) {
    console.error('usage: node encode_ref.cjs IN.json OUT.json [tokenizer.json]');
    process.exit(2);
  }
  const input = JSON.parse(fs.readFileSync(inFile, 'utf8'));
  const tok = ref.loadTokenizer(tokFile);
  const ids = await ref.encodeAll(tok, input.texts || []);
  const decodeIds = input.decode || [];
  const decoded = await ref.decodeAll(tok, decodeIds, false);
  const decodedSkip = await ref.decodeAll(tok, decodeIds, true);
  fs.writeFileSync(outFile, JSON.stringify({ ids, decoded, decoded_skip: decodedSkip }));
}
main().catch((e) => { console.error(e); process.exit(1); });
