// Continues a prompt in llama.cpp (docs/export.md): the text a tapeformer GGUF export writes there.
// Greedy by default, to set beside `tapeformer sample --temperature 0`; with a temperature, sampled
// (from llama.cpp's own random stream: not the tokens tapeformer would draw).
//
//   node complete.mjs [--timing] MODEL.gguf "The jury said" [TOKENS [TEMPERATURE [SEED [THREADS]]]]
//
// --timing prints the decoding speed to stderr as `tapeformer sample --timing` does: the tokens after
// the first (each one decode step) and their time (bench/decode_llama_cpp.py reads it).
// One thread by default: on 2 cores, llama.cpp 3.21.1's CPU build with 2 threads took 95 s for what 1
// thread does in 1.3 s (200 tokens of a 0.8M-parameter model; its threads wait for each other on every
// tiny op). bench/decode_llama_cpp.py measures both.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = process.argv.slice(2);
const timing = args.includes("--timing");
const [model_path, prompt, count = "200", temperature = "0", seed = "1", threads = "1"] =
    args.filter((a) => a !== "--timing");
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: model_path});
const context = await model.createContext({contextSize: model.trainContextSize, sequences: 1, threads: Number(threads)});
const sequence = context.getSequence();
const generated = [];
let first = 0, last = 0;  // when the first and the last new token were known (ms)
for await (const token of sequence.evaluate(model.tokenize(prompt, false), {temperature: Number(temperature), seed: Number(seed), topK: 0, topP: 1, minP: 0})) {
  last = performance.now();
  if (generated.length === 0) first = last;
  generated.push(token);
  if (generated.length >= Number(count) || sequence.nextTokenIndex >= model.trainContextSize) break;
}
console.log(prompt + model.detokenize(generated));
if (timing && generated.length > 1) {
  const seconds = (last - first) / 1000;
  console.error(`timing: ${generated.length - 1} tokens after the first in ${seconds.toFixed(6)} s: ` +
                `${((generated.length - 1) / seconds).toFixed(1)} tokens/s`);
}
await context.dispose();
await model.dispose();
