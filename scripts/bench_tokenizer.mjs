// bench_tokenizer.mjs - the reference side of scripts/bench_tokenizer.sh:
// js-tiktoken's cl100k_base encoding speed on the same text, same run.
//   node bench_tokenizer.mjs NPM_DIR TEXT  ->  "MB_PER_S TOKENS"
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [npmDir, textPath] = process.argv.slice(2);
const pkg = path.resolve(npmDir, 'node_modules/js-tiktoken/dist');
const { Tiktoken } = await import(pathToFileURL(path.join(pkg, 'index.js')).href);
const cl100k = (await import(pathToFileURL(path.join(pkg, 'ranks/cl100k_base.js')).href)).default;
const enc = new Tiktoken(cl100k);
const text = fs.readFileSync(textPath, 'utf8');
const bytes = fs.statSync(textPath).size;
enc.encode(text.slice(0, 100000)); // warm the JIT
const t0 = process.hrtime.bigint();
const n = enc.encode(text).length;
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${(bytes / 1e6 / s).toFixed(2)} ${n}`);
