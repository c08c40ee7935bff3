// Runs a GGUF file in llama.cpp (node-llama-cpp's prebuilt CPU build, offline) and prints what
// tests/export/llama_cpp_test.cpp compares with tapeformer, one item per line:
//
//   node run_gguf.mjs REQUEST.json
//   REQUEST: {"model": "m.gguf", "vocab_size": 86, "threads": 1, "context": 128, "prompts": ["The "],
//             "greedy_tokens": 64, "eval_text": "...", "window": 32}
//   output, per prompt:   ids <id> ...           the prompt's ids
//                         logprobs <x> ...       ln p(next = id) for every id of the vocabulary
//                         greedy <id> ...        the greedy continuation
//   then, with eval_text: eval <nats> <count>    total -ln p of the predicted ids, and their count
//
// Log-probabilities: the next-token distribution after the prompt, at temperature 1 with no top-k,
// top-p or min-p cut, from an f32 KV cache (llama.cpp's default f16 cache would round keys and values).
// Evaluation: eval_text's ids cut into windows of `window` ids; within each, every id after the first
// is predicted from those before it (tapeformer's side computes the same windows).
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: request.model});
const contextOptions = {
  contextSize: request.context ?? 128, sequences: 1, threads: request.threads ?? 1, flashAttention: false,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
};
const whole = {temperature: 1, topK: 0, topP: 1, minP: 0, yieldEogToken: true};

// The next-token probabilities after each of `ids` (the first needs no prediction): ids.length - 1
// distributions when `all`, else only the one after the last id.
async function distributions(context, ids, all) {
  const sequence = context.getSequence();
  const out = [];
  const first = all ? [ids[0]] : ids;
  const steps = all ? ids.length - 1 : 1;
  const generator = sequence.evaluateWithMetadata(first, {probabilities: true}, whole);
  let result = await generator.next();
  for (let i = 0; i < steps; ++i) {
    out.push(result.value.probabilities);
    if (i + 1 < steps) result = await generator.next(ids[i + 1]);  // feed the text's id, not the drawn one
  }
  await generator.return();
  sequence.dispose();
  return out;
}

const lines = [];
const context = await model.createContext(contextOptions);
for (const prompt of request.prompts ?? []) {
  const ids = model.tokenize(prompt, false);
  const [probabilities] = await distributions(context, ids, false);
  const logprobs = [];
  for (let id = 0; id < request.vocab_size; ++id) logprobs.push(Math.log(probabilities.get(id) ?? 0));
  const sequence = context.getSequence();
  const greedy = [];
  for await (const token of sequence.evaluate(ids, {temperature: 0, yieldEogToken: true})) {
    greedy.push(token);
    if (greedy.length >= (request.greedy_tokens ?? 64)) break;
  }
  sequence.dispose();
  lines.push(`ids ${Array.from(ids).join(" ")}`, `logprobs ${logprobs.join(" ")}`, `greedy ${greedy.join(" ")}`);
}
if (request.eval_text) {
  const ids = model.tokenize(request.eval_text, false);
  let nats = 0, predicted = 0;
  for (let start = 0; start + 1 < ids.length; start += request.window) {
    const window = ids.slice(start, start + request.window);
    const dists = await distributions(context, window, true);
    dists.forEach((p, i) => { nats -= Math.log(p.get(window[i + 1])); ++predicted; });
  }
  lines.push(`eval ${nats} ${predicted}`);
}
console.log(lines.join("\n"));
await context.dispose();
await model.dispose();
