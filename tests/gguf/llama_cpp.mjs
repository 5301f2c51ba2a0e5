// llama_cpp.mjs - checks a `titan-ckpt convert --to gguf` file with tools that
// are not titan's: llama.cpp itself (node-llama-cpp's prebuilt CPU binary)
// and Hugging Face's GGUF parser (@huggingface/gguf). tests/gguf/prepare.sh
// installs both, pinned, into NPMDIR.
//
//   node llama_cpp.mjs NPMDIR version
//       prints the llama.cpp release the binary was built from
//   node llama_cpp.mjs NPMDIR meta MODEL.gguf INFO.json DTYPE
//       header and tensor table (parsed by @huggingface/gguf) against the
//       checkpoint (`titan-ckpt info --json`): llama.* keys, names, shapes, types
//   node llama_cpp.mjs NPMDIR logits MODEL.gguf 1,2,3 TITAN_LOGITS TOL
//       llama.cpp's next-token distribution at every position against titan's
//       (`titan-ckpt eval`, one row of logits per position); fails when the
//       largest probability difference exceeds TOL
//   node llama_cpp.mjs NPMDIR tokenize MODEL.gguf TEXT IDS
//       llama.cpp's tokenization of the file TEXT against IDS (u32 little-endian)
//   node llama_cpp.mjs NPMDIR batch CHECKS
//       one process for many checks (loading llama.cpp takes seconds): each
//       line of CHECKS is "WANT<TAB>DESCRIPTION<TAB>COMMAND<TAB>ARG...", WANT
//       "pass" or "fail"; prints "PASS DESCRIPTION" or "FAIL DESCRIPTION" and
//       the check's message for each.
//
// Exit 0 pass, 1 fail, 77 when the packages cannot be loaded (test skipped).
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [npm, cmd, ...args] = process.argv.slice(2);
const die = (msg, code = 1) => { console.log(msg); process.exit(code); };
class CheckFailed extends Error {}
const fail = (msg) => { throw new CheckFailed(msg); };

async function load(pkg, file) {
    try {
        return await import(join(npm, "node_modules", pkg, file));
    } catch (e) {
        die(`skip: cannot load ${pkg} from ${npm}: ${e.message.split("\n")[0]}`, 77);
    }
}

let llamaInstance = null;
async function llamaCpp() {
    if (llamaInstance) return llamaInstance;
    const { getLlama, LlamaLogLevel } = await load("node-llama-cpp", "dist/index.js");
    try {
        // build: never - a missing prebuilt binary is a skip, not a compile
        llamaInstance = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false });
        return llamaInstance;
    } catch (e) {
        die(`skip: llama.cpp binary unavailable: ${e.message.split("\n")[0]}`, 77);
    }
}

function softmax(row) {
    let m = -Infinity;
    for (const v of row) m = Math.max(m, v);
    let s = 0;
    const p = row.map((v) => { const e = Math.exp(v - m); s += e; return e; });
    return p.map((v) => v / s);
}

async function version() {
    const llama = await llamaCpp();
    const r = llama.llamaCppRelease;
    return `llama.cpp ${r.release} (${r.repo}, ${llama.buildType} CPU binary of node-llama-cpp)`;
}

async function meta(model, infoPath, dtype) {
    const { gguf } = await load("@huggingface/gguf", "dist/index.mjs");
    const info = JSON.parse(readFileSync(infoPath, "utf8"));
    const { metadata: md, typedMetadata: tm, tensorInfos, tensorDataOffset } =
        await gguf(model, { allowLocalFile: true, typedMetadata: true });
    const bad = [];
    const want = (key, v, type) => {
        if (md[key] === undefined) return bad.push(`${key}: missing`);
        const got = typeof md[key] === "bigint" ? Number(md[key]) : md[key];
        if (typeof v === "number" && !Number.isInteger(v) ? Math.abs(got - v) > 1e-6 * Math.abs(v) : got !== v)
            bad.push(`${key}: ${got}, want ${v}`);
        if (type !== undefined && tm[key].type !== type) bad.push(`${key}: value type ${tm[key].type}, want ${type}`);
    };
    const m = info.model, mt = info.meta, U32 = 4, F32 = 6, STR = 8;
    const scaled = mt["model.rope_scaling_factor"] > 0;
    want("version", 3);
    want("general.architecture", "llama", STR);
    want("llama.embedding_length", m.dim, U32);
    want("llama.block_count", m.n_layers, U32);
    want("llama.feed_forward_length", m.ffn_dim, U32);
    want("llama.attention.head_count", m.n_heads, U32);
    want("llama.attention.head_count_kv", m.n_kv_heads, U32);
    want("llama.rope.dimension_count", m.dim / m.n_heads, U32);
    want("llama.rope.freq_base", mt["model.rope_theta"], F32);
    want("llama.attention.layer_norm_rms_epsilon", mt["model.norm_eps"], F32);
    want("llama.vocab_size", m.vocab_size, U32);
    want("llama.context_length", mt["model.rope_original_context"] * (scaled ? mt["model.rope_scaling_factor"] : 1), U32);
    want("tokenizer.ggml.model", "gpt2", STR);
    if ((md["tokenizer.ggml.tokens"] || []).length !== m.vocab_size) bad.push("tokenizer.ggml.tokens: wrong count");
    // Tensors: every parameter under its llama.cpp name, ggml dims reversed.
    const ggmlType = { f32: 0, f16: 1, bf16: 30 }[dtype];
    const map = { "attention.wq": "attn_q", "attention.wk": "attn_k", "attention.wv": "attn_v",
        "attention.wo": "attn_output", "feed_forward.w1": "ffn_gate", "feed_forward.w2": "ffn_down",
        "feed_forward.w3": "ffn_up", attention_norm: "attn_norm", ffn_norm: "ffn_norm" };
    const byName = new Map(tensorInfos.map((t) => [t.name, t]));
    const params = info.tensors.filter((t) => !t.name.includes(":"));
    for (const t of params) {
        let g = { "tok_embeddings.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
            "output.weight": "output.weight" }[t.name];
        const l = /^layers\.(\d+)\.(.*)\.weight$/.exec(t.name);
        if (l) g = `blk.${l[1]}.${map[l[2]]}.weight`;
        const e = byName.get(g);
        if (!e) { bad.push(`${g}: missing (from ${t.name})`); continue; }
        const dims = e.shape.map(Number);
        if (dims.join() !== [...t.shape].reverse().join()) bad.push(`${g}: ggml dims ${dims}, shape ${t.shape}`);
        const wantType = t.shape.length === 1 ? 0 : ggmlType;
        if (e.dtype !== wantType) bad.push(`${g}: ggml type ${e.dtype}, want ${wantType}`);
        if (Number(e.offset) % 32) bad.push(`${g}: offset ${e.offset} not 32-aligned`);
    }
    if (scaled && !byName.has("rope_freqs.weight")) bad.push("rope_freqs.weight: missing for a scaled RoPE");
    if (tensorInfos.length !== params.length + (scaled ? 1 : 0)) bad.push(`${tensorInfos.length} tensors`);
    if (Number(tensorDataOffset) % 32) bad.push(`data section at ${tensorDataOffset}: not 32-aligned`);
    if (bad.length) fail(`GGUF metadata: ${bad.join("; ")}`);
    return (`GGUF metadata ok: ${Object.keys(md).length - 3} keys, ${tensorInfos.length} tensors, data at ${tensorDataOffset}`);
}

async function logits(model, tokList, titanPath, tol, kv = "F16") {
    const tokens = tokList.split(",").map(Number);
    const titan = readFileSync(titanPath, "utf8").trim().split("\n").map((l) => l.trim().split(/\s+/).map(Number));
    if (titan.length !== tokens.length) fail(`${titanPath}: ${titan.length} rows for ${tokens.length} tokens`);
    const llama = await llamaCpp();
    const m = await llama.loadModel({ modelPath: model });
    // llama.cpp keeps K and V in f16 unless told: F32 isolates the weights' rounding.
    const ctx = await m.createContext({ contextSize: 256, batchSize: 256, threads: 2, flashAttention: false,
        experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv });
    const seq = ctx.getSequence();
    const out = await seq.controlledEvaluate(tokens.map((t) => [t, { generateNext: { logits: true } }]));
    let maxAbs = 0, maxRel = 0, maxLogit = 0, argmaxSame = 0;
    for (let i = 0; i < tokens.length; i++) {
        const V = titan[i].length, row = new Array(V).fill(-Infinity);
        const lm = out[i] && out[i].next.logits;
        if (!lm || lm.size !== V) fail(`position ${i}: llama.cpp gave ${lm ? lm.size : 0} logits, titan ${V}`);
        for (const [tok, v] of lm) row[tok] = v;
        const p = softmax(row), q = softmax(titan[i]);
        let am = 0, at = 0;
        for (let v = 0; v < V; v++) {
            const d = Math.abs(p[v] - q[v]);
            maxAbs = Math.max(maxAbs, d);
            if (q[v] >= 1e-3) maxRel = Math.max(maxRel, d / q[v]);
            maxLogit = Math.max(maxLogit, Math.abs(row[v] - titan[i][v]));
            if (p[v] > p[am]) am = v;
            if (q[v] > q[at]) at = v;
        }
        if (am === at) argmaxSame++;
    }
    await ctx.dispose();
    await m.dispose();
    const msg = `${tokens.length} positions x ${titan[0].length} tokens: max |p_llama - p_titan| = ${maxAbs.toExponential(2)}, ` +
        `max rel (p >= 1e-3) = ${maxRel.toExponential(2)}, max |logit diff| = ${maxLogit.toExponential(2)}, ` +
        `same argmax at ${argmaxSame}/${tokens.length}`;
    if (!(maxAbs <= tol)) fail(`${msg}; tolerance ${tol} exceeded`);
    return msg;
}

async function tokenize(model, textPath, idsPath) {
    const text = readFileSync(textPath, "utf8");
    const raw = readFileSync(idsPath);
    const want = Array.from({ length: raw.length / 4 }, (_, i) => raw.readUInt32LE(4 * i));
    const llama = await llamaCpp();
    const m = await llama.loadModel({ modelPath: model, vocabOnly: true });
    const got = m.tokenize(text);
    await m.dispose();
    let i = 0;
    while (i < got.length && i < want.length && got[i] === want[i]) i++;
    if (i < got.length || i < want.length)
        fail(`tokenize: first difference at token ${i} of ${want.length}: llama.cpp ${got.slice(i, i + 5)}, ` +
            `titan ${want.slice(i, i + 5)}`);
    return `tokenize: ${text.length} characters -> the same ${got.length} tokens`;
}

const cmds = { version, meta, logits, tokenize };

// Runs one check: [true, message] or [false, message]; anything but a check's
// own failure (a crash of llama.cpp's loader, say) is a failure with its message.
async function run(name, argv) {
    if (!cmds[name]) return [false, `unknown check ${name}`];
    try {
        return [true, await cmds[name](...argv)];
    } catch (e) {
        return [false, e instanceof CheckFailed ? e.message : `error: ${e.message.split("\n")[0]}`];
    }
}

if (cmd === "batch") {
    for (const line of readFileSync(args[0], "utf8").split("\n").filter((l) => l.trim())) {
        const [want, desc, name, ...argv] = line.split("\t");
        const [passed, msg] = await run(name, argv);
        console.log(`${passed === (want === "pass") ? "PASS" : "FAIL"} ${desc}`);
        if (msg) console.log(`  ${msg}`);
    }
} else if (cmds[cmd]) {
    const [passed, msg] = await run(cmd, args);
    console.log(msg);
    process.exit(passed ? 0 : 1);
} else {
    die(`usage: node llama_cpp.mjs NPMDIR version|meta|logits|tokenize|batch ...`, 2);
}
