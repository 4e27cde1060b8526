// node bench_encode.cjs DOCS_JSON [repeats] [tokenizer.json]: encode throughput of Hugging Face
// tokenizers on a JSON array of documents, encoded one after the other (one call at a time, so
// one thread works; encodeBatch would fan out over all cores).
// Prints one JSON line: {"mb_per_s", "seconds", "bytes", "tokens"} (best of the repeats).
'use strict';
const fs = require('fs');
const ref = require('./reference.cjs');

async function main() {
  const [file, repeatsArg, tokFile] = process.argv.slice(2);
  const docs = JSON.parse(fs.readFileSync(file, 'utf8'));
  const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
  const tok = ref.loadTokenizer(tokFile);
  const repeats = Number(repeatsArg || 3);
  let tokens = 0;
  const run = async () => {
    let n = 0;
    for (const d of docs) n += (await tok.encode(d, null, { addSpecialTokens: false })).getLength();
    return n;
  };
  await run();  // warm-up (BPE cache, pages)
  let best = Infinity;
  for (let r = 0; r < repeats; ++r) {
    const t0 = process.hrtime.bigint();
    tokens = await run();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  console.log(JSON.stringify({ mb_per_s: bytes / 1e6 / best, seconds: best, bytes, tokens }));
}
main().catch((e) => { console.error(e); process.exit(1); });
