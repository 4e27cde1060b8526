// The fixture's input strings, by category. Deterministic: the same list on every run, so the
// committed fixture can be re-made and reviewed. Used by make_fixtures.cjs and the bench.
'use strict';

// Small deterministic PRNG (mulberry32) so "random" pieces are reproducible.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const english = [
  'Hello world', 'hello, world!', 'The quick brown fox jumps over the lazy dog.',
  'It was the best of times, it was the worst of times.', 'e-mail: someone@example.com',
  'https://github.com/huggingface/tokenizers?tab=readme#usage', '$12.50 + 7% tax = $13.375',
  'Mr. O\'Neil said: "Don\'t panic!"', 'UPPERCASE lowercase MiXeD CaSe', 'a', ' ', '',
  'one\ttwo\tthree', 'end with space ', '  leading spaces', '...ellipsis...', '--flag=value',
  '(parenthesized) [bracketed] {braced}', 'semi;colon:colon', 'C++ and C# and F#',
  'naïve café résumé', 'Ångström 5°C ±0.1', '½ ¼ ¾ ² ³', '©®™ §¶ †‡', 'x^2 + y^2 = z^2',
];
const chinese = [
  '你好，世界', '我爱自然语言处理。', '今天天气很好，我们去公园散步吧！', '机器学习是人工智能的一个分支',
  '《红楼梦》是中国古典小说', '北京市海淀区中关村大街1号', '这是一个测试：１２３４５６',
  '中文English混合Mixed文本', '“引号”和‘单引号’', '繁體中文與簡體中文',
];
const japanese = [
  'こんにちは世界', '東京タワーは高いです。', 'カタカナとひらがなと漢字', 'ｶﾀｶﾅ半角', '日本語の文章を書きます',
  '吾輩は猫である。名前はまだ無い。', 'ラーメン🍜が好き',
];
const korean = [
  '안녕하세요 세계', '한국어 자연어 처리', '대한민국의 수도는 서울입니다.', '감사합니다!!!', '한글 ㄱㄴㄷ 자모',
];
const arabic = [
  'مرحبا بالعالم', 'اللغة العربية جميلة', 'السلام عليكم ورحمة الله', 'عدد ١٢٣٤٥ أرقام عربية', 'שלום עולם',
  'Привет, мир!', 'Ελληνικά γράμματα', 'नमस्ते दुनिया', 'สวัสดีชาวโลก', 'Tiếng Việt có dấu',
];
const emoji = [
  '👍', '👍🏽', '👨‍👩‍👧‍👦 family', '🏳️‍🌈 flag', '👩🏾‍💻 coder', '🇯🇵🇺🇸🇩🇪', '❤️‍🔥', '🧑‍🤝‍🧑',
  'emoji🙂inside😀words', '1️⃣ 2️⃣ #️⃣', '🐕‍🦺🐈‍⬛', '😀😃😄😁😆😅😂🤣',
];
const code = [
  'def add(a, b):\n    return a + b\n',
  'for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}',
  'fn main() {\n    println!("Hello, {}!", name);\n}',
  'const x = arr.map((v) => v * 2).filter(Boolean);',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name;',
  '#include <vector>\nstd::vector<int32_t> ids{1, 2, 3};',
  'if [[ -f "$file" ]]; then\n  echo "exists"\nfi',
  '<div class="a">\n  <span>text</span>\n</div>',
  '{"key": [1, 2.5, null, true], "nested": {"x": "y"}}',
  'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hi") }',
  'public static void main(String[] args) { System.out.println(args.length); }',
  'x = [i**2 for i in range(10) if i % 2 == 0]',
  '    # indented comment\n        deeper = True\n',
  'a != b && c <= d || e >= f',
  'let mut v: Vec<u8> = Vec::with_capacity(1 << 20);',
  '%define MAX 100\n\tmov eax, [ebx+4]',
];
const whitespace = [
  '   ', '\n', '\n\n\n', 'a   b', 'a\n\n\nb', 'a \n b', 'tabs\t\t\there', 'x' + ' '.repeat(40) + 'y',
  ' '.repeat(100), '\t \t \n \n', 'trailing\n   ', '   \n   leading', 'a\u00a0b nbsp', 'ideographic\u3000space',
  'line\u2028separator', 'x\u0085nel', 'en\u2002em\u2003thin\u2009space', ' \u200b zero width',
  'mongolian\u180evowel', ' '.repeat(7) + '\n' + ' '.repeat(3),
];
const crlf = [
  'line1\r\nline2\r\n', 'mixed\r\nunix\nmac\rend', '\r\n\r\n\r\n', 'a\r\n  b\r\n\tc', ' \r\n ',
  'text.\r\n\r\nNext paragraph.', 'x\r\r\ny', '\n\r', 'code {\r\n    body;\r\n}\r\n',
];
const digits = [
  '0', '1234567890', '3.14159265358979323846', '1,000,000', '2026-11-21T13:43:36Z',
  '9'.repeat(50), '0x1F2E3D4C', '１２３', '٣٤٥', '१२३', '①②③', 'Ⅻ roman', '12abc34def',
  '+1 (555) 123-4567',
];
const contractions = [
  "don't", "DON'T", "Don'T", "I'm", "I'M", "we're", "WE'RE", "You'Re", "they've", "THEY'VE",
  "I'll", "I'LL", "she'd", "SHE'D", "it's", "IT'S", "It'S", "'s'", "''s", "'sup", "O'Reilly's",
  "rock'n'roll", "ma'am", "y'all'd've", "'re 're 're", "don’t curly",
];
const special = [
  '<|im_start|>user\nHello<|im_end|>\n', '<|endoftext|>', 'before<|endoftext|>after',
  '<think>\nreasoning\n</think>\n\nanswer', '<|im_start|><|im_end|>', '<|im_start', '<|im_end|',
  '<tool_call>{"a":1}</tool_call>', 'x<|vision_start|><|image_pad|><|vision_end|>y',
  '<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>', ' <|im_end|> spaced ', '<|im_end|><|im_end|>',
  '<<|im_end|>>', '<|box_start|>(1,2)<|box_end|>', 'text <|endoftext|>\n\n<|im_start|>system',
];
// Combining sequences that NFC composes (or reorders).
const combining = [
  'e\u0301', 'cafe\u0301', 'A\u030a', 'n\u0303o', 'o\u0308\u0304', 'q\u0307\u0323', 'a\u0323\u0302',
  '\u1100\u1161\u11a8', '\u0915\u093c', 'Z\u0335\u0321\u0317a\u0334l\u0336g\u0337o\u0338',
  'e\u0301e\u0301e\u0301', '\u212b angstrom sign', '\u2126 ohm', 'か\u3099', 'ﬁ ligature',
];

function longDocuments() {
  const r = rng(20261121);
  const pools = [english, chinese, japanese, korean, arabic, emoji, code, whitespace, crlf, digits,
    contractions, combining];
  const docs = [];
  for (let d = 0; d < 6; ++d) {
    let s = '';
    while (s.length < 3000 + d * 1500) {
      const pool = pools[Math.floor(r() * pools.length)];
      s += pool[Math.floor(r() * pool.length)];
      s += [' ', '\n', '', '. ', '\r\n'][Math.floor(r() * 5)];
    }
    docs.push(s);
  }
  return docs;
}

// Systematic variations: each base string prefixed/suffixed with spaces and newlines, which is
// where the regex's whitespace alternatives differ.
function variations(list, count, seed) {
  const r = rng(seed);
  const decor = [' ', '  ', '\n', ' \n', '\t', '!', '123', ' x'];
  const out = [];
  for (let i = 0; i < count; ++i) {
    const s = list[Math.floor(r() * list.length)];
    const pre = decor[Math.floor(r() * decor.length)];
    const post = decor[Math.floor(r() * decor.length)];
    out.push(pre + s + post);
  }
  return out;
}

function fixtureStrings() {
  const base = [].concat(english, chinese, japanese, korean, arabic, emoji, code, whitespace, crlf,
    digits, contractions, special, combining);
  const all = base.concat(variations(base, 160, 7), longDocuments());
  return Array.from(new Set(all));
}

module.exports = { rng, fixtureStrings, categories: { english, chinese, japanese, korean, arabic,
  emoji, code, whitespace, crlf, digits, contractions, special, combining } };
