// Continues a prompt in llama.cpp (docs/export.md): the text a tapeformer GGUF export writes there.
// Greedy by default, to set beside `tapeformer sample --temperature 0`; with a temperature, sampled
// (from llama.cpp's own random stream: not the tokens tapeformer would draw).
//
//   node complete.mjs MODEL.gguf "The jury said" [TOKENS [TEMPERATURE [SEED]]]
//
// One thread: on 2 cores, llama.cpp 3.21.1's CPU build with 2 threads took 95 s for what 1 thread does
// in 1.3 s (200 tokens of a 0.8M-parameter model; its threads wait for each other on every tiny op).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [model_path, prompt, count = "200", temperature = "0", seed = "1"] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: model_path});
const context = await model.createContext({contextSize: model.trainContextSize, sequences: 1, threads: 1});
const sequence = context.getSequence();
const generated = [];
for await (const token of sequence.evaluate(model.tokenize(prompt, false), {temperature: Number(temperature), seed: Number(seed), topK: 0, topP: 1, minP: 0})) {
  generated.push(token);
  if (generated.length >= Number(count) || sequence.nextTokenIndex >= model.trainContextSize) break;
}
console.log(prompt + model.detokenize(generated));
await context.dispose();
await model.dispose();
