// gen_reference.mjs - reference token ids for test_bpe from an independent
// implementation: js-tiktoken (pure JavaScript) and its cl100k_base ranks.
// cl100k_base uses Llama 3's byte-level scheme and pre-tokenizer pattern (the
// pattern check below makes sure), so its ids test titan's BPE exactly.
//
//   node gen_reference.mjs NPM_DIR tiktoken OUT      cl100k_base as a tiktoken file
//   node gen_reference.mjs NPM_DIR hf OUT            the same as a Llama-3-style tokenizer.json
//   node gen_reference.mjs NPM_DIR cases IN OUT      IN: JSON array of strings; OUT: [{text, ids}]
//   node gen_reference.mjs NPM_DIR corpus TGZDIR OUT.txt OUT.ids MB
//                                                    English sentences of the unpacked
//                                                    nlp-corpus as text, and their ids
//                                                    (little-endian uint32)
// NPM_DIR holds node_modules/js-tiktoken (npm install --prefix NPM_DIR js-tiktoken).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [npmDir, cmd, ...args] = process.argv.slice(2);
if (!npmDir || !cmd) {
  console.error('usage: gen_reference.mjs NPM_DIR tiktoken|hf|cases|corpus ...');
  process.exit(2);
}
const pkg = path.resolve(npmDir, 'node_modules/js-tiktoken/dist');
const { Tiktoken } = await import(pathToFileURL(path.join(pkg, 'index.js')).href);
const cl100k = (await import(pathToFileURL(path.join(pkg, 'ranks/cl100k_base.js')).href)).default;

// Llama 3's pattern. JavaScript has no (?i:...) group, so js-tiktoken spells
// the contractions out in both cases; the rest must be identical.
const LLAMA3 = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const CONTRACTIONS = String.raw`('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)`;
if (cl100k.pat_str !== CONTRACTIONS + LLAMA3.slice(LLAMA3.indexOf('|[^'))) {
  console.error('gen_reference: js-tiktoken cl100k_base pattern differs from Llama 3\'s:\n' + cl100k.pat_str);
  process.exit(1);
}

// bpe_ranks lines: "<tag> <first rank> <base64 token> <base64 token> ...".
function ranks() {
  const out = [];
  for (const line of cl100k.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, first, ...toks] = line.split(' ');
    toks.forEach((t, i) => out.push([t, Number.parseInt(first, 10) + i]));
  }
  out.sort((a, b) => a[1] - b[1]);
  out.forEach(([, r], i) => { if (r !== i) throw new Error(`rank ${r} at position ${i}: not dense`); });
  return out;
}

const enc = new Tiktoken(cl100k);
// No special tokens recognised: text that spells one is plain text.
const encode = (s) => enc.encode(s, [], []);

function writeTiktoken(out) {
  fs.writeFileSync(out, ranks().map(([t, r]) => `${t} ${r}\n`).join(''));
}

// GPT-2's byte-to-unicode alphabet, as Hugging Face writes byte-level vocabularies.
function byteAlphabet() {
  const map = new Array(256);
  let next = 256;
  for (let c = 0; c < 256; c++) {
    const printable = (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
    map[c] = String.fromCodePoint(printable ? c : next++);
  }
  return map;
}

// Merges the way tokenizers' tiktoken converter makes them: every split of a
// token into two tokens, ordered by the merged token's rank, then the parts'.
function writeHf(out) {
  const alpha = byteAlphabet();
  const rs = ranks();
  const byBytes = new Map();
  const bytesOf = rs.map(([t, r]) => { const b = Buffer.from(t, 'base64'); byBytes.set(b.toString('latin1'), r); return b; });
  const str = (b) => Array.from(b, (c) => alpha[c]).join('');
  const vocab = {};
  const merges = [];
  bytesOf.forEach((b, r) => {
    vocab[str(b)] = r;
    const local = [];
    for (let k = 1; k < b.length; k++) {
      const l = byBytes.get(b.subarray(0, k).toString('latin1'));
      const rr = byBytes.get(b.subarray(k).toString('latin1'));
      if (l !== undefined && rr !== undefined) local.push([l, rr]);
    }
    local.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    for (const [l, rr] of local) merges.push([str(bytesOf[l]), str(bytesOf[rr])]);
  });
  const added = Object.entries(cl100k.special_tokens).map(([content, id]) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  const json = {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3 }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: null, decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
  };
  fs.writeFileSync(out, JSON.stringify(json));
}

function writeCases(input, out) {
  const texts = JSON.parse(fs.readFileSync(input, 'utf8'));
  texts.push(texts.join(''), texts.join('\n')); // the cases side by side: context across them
  const lines = texts.map((text) => JSON.stringify({ text, ids: encode(text) }));
  fs.writeFileSync(out, '[\n' + lines.join(',\n') + '\n]\n');
}

// nlp-corpus: builds/doc-N.json, each an array of English sentences.
function writeCorpus(dir, outText, outIds, mb) {
  const files = fs.readdirSync(path.join(dir, 'builds')).filter((f) => /^doc-\d+\.json$/.test(f))
    .sort((a, b) => Number.parseInt(a.slice(4), 10) - Number.parseInt(b.slice(4), 10));
  let text = '';
  for (const f of files) {
    const doc = JSON.parse(fs.readFileSync(path.join(dir, 'builds', f), 'utf8'));
    text += doc.filter((s) => typeof s === 'string').join('\n') + '\n\n';
    if (Buffer.byteLength(text) >= mb * 1e6) break;
  }
  fs.writeFileSync(outText, text);
  fs.writeFileSync(outIds, Buffer.from(Uint32Array.from(encode(text)).buffer));
}

if (cmd === 'tiktoken') writeTiktoken(args[0]);
else if (cmd === 'hf') writeHf(args[0]);
else if (cmd === 'cases') writeCases(args[0], args[1]);
else if (cmd === 'corpus') writeCorpus(args[0], args[1], args[2], Number(args[3] || 2));
else { console.error(`gen_reference: unknown command ${cmd}`); process.exit(2); }
