// tapeformer's GPT onto llama.cpp's llama and gpt2 architectures (export/gguf_model.h). The tensor
// names and metadata keys are llama.cpp's (src/llama-arch.cpp); each block's math is the same as
// docs/models.md's for the options gguf_mismatches lets through.
#include "export/gguf_model.h"

#include <algorithm>
#include <map>

#include "export/gguf_tokenizer.h"
#include "export/named_params.h"
#include "framework/shape.h"
#include "framework/error.h"

namespace tf::exporting {

namespace {

using layers::ModelConfig;

std::string describe(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "\n    " + line;
  return out;
}

// The options neither architecture expresses.
void common_mismatches(const ModelConfig& c, std::vector<std::string>& out) {
  if (c.arch != layers::Architecture::gpt)
    out.push_back("model.arch is bert; llama.cpp runs causal language models (export a BERT as safetensors or weights)");
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (!layers::mixer_row(c.mixer(l)).exports) {
      out.push_back(std::string("model.mixers holds ") + layers::mixer_name(c.mixer(l)) + " (layer " + std::to_string(l) +
                    "); only softmax attention exports");
      break;
    }
  for (const std::string& key : c.unexported_options())
    out.push_back(key + " is set; llama.cpp's llama and gpt2 have no such option");
  if (!c.heads_per_layer.empty()) out.push_back("model.heads_per_layer is set (a pruned model): every layer must have model.n_heads heads");
  if (!c.pre_norm) out.push_back("model.pre_norm is false; both architectures normalise before each sublayer");
  if (c.n_segments != 0) out.push_back("model.n_segments is " + std::to_string(c.n_segments) + "; must be 0");
}

}  // namespace

const char* gguf_arch_name(GgufArch arch) { return arch == GgufArch::llama ? "llama" : "gpt2"; }

std::vector<std::string> gguf_mismatches(const ModelConfig& c, GgufArch arch) {
  std::vector<std::string> out;
  common_mismatches(c, out);
  const auto need = [&](bool ok, const std::string& key, const std::string& value, const std::string& wanted) {
    if (!ok) out.push_back(key + " is " + value + "; " + gguf_arch_name(arch) + " needs " + wanted);
  };
  const std::string position = layers::position_encoding_name(c.position);
  const std::string norm = kernels::norm_kind_name(c.norm);
  const std::string ff = kernels::feed_forward_kind_name(c.feed_forward);
  if (arch == GgufArch::llama) {
    need(c.position == layers::PositionEncoding::rope, "model.position", position, "rope");
    need(c.rope_scaling.kind == ops::RopeScalingKind::none, "model.rope_scaling", ops::rope_scaling_name(c.rope_scaling.kind), "none");
    need(c.norm == kernels::NormKind::rms, "model.norm", norm, "rms");
    need(c.feed_forward == kernels::FeedForwardKind::swiglu, "model.feed_forward", ff, "swiglu");
    need(!c.bias, "model.bias", "true", "false");
  } else {
    need(c.position == layers::PositionEncoding::learned, "model.position", position, "learned");
    need(c.norm == kernels::NormKind::layer, "model.norm", norm, "layer");
    need(c.feed_forward == kernels::FeedForwardKind::gelu, "model.feed_forward", ff, "gelu");
    need(c.gelu == ops::GeluApprox::tanh, "model.gelu", kernels::gelu_approx_name(c.gelu), "tanh");
    need(c.bias, "model.bias", "false", "true");
    need(c.n_heads * c.head_dim() == c.d_model, "model.head_dim", std::to_string(c.head_dim()),
         "n_heads x head_dim = d_model");
  }
  return out;
}

GgufArch gguf_arch(const ModelConfig& c, const std::string& target) {
  const std::vector<std::string> llama = gguf_mismatches(c, GgufArch::llama), gpt2 = gguf_mismatches(c, GgufArch::gpt2);
  if (llama.empty()) return GgufArch::llama;
  if (gpt2.empty()) return GgufArch::gpt2;
  TF_CHECK_INPUT(false, "no ", target, " expresses this model (docs/export.md lists what exports):\n  as llama:",
                 describe(llama), "\n  as gpt2:", describe(gpt2));
  return GgufArch::llama;  // (not reached)
}

std::vector<GgufPiece> gguf_pieces(const ModelConfig& c, GgufArch arch) {
  std::vector<GgufPiece> out;
  const bool biased = arch == GgufArch::gpt2;
  const auto whole = [&](const std::string& gguf, const std::string& ours) { out.push_back({gguf, ours, 0, -1}); };
  const auto with_bias = [&](const std::string& gguf, const std::string& ours) {
    whole(gguf + ".weight", ours + ".weight");
    if (biased) whole(gguf + ".bias", ours + ".bias");
  };
  whole("token_embd.weight", "token_embedding.weight");
  if (arch == GgufArch::gpt2) whole("position_embd.weight", "position_embedding.weight");
  const int64_t q_rows = c.n_heads * c.head_dim(), kv_rows = c.kv_heads() * c.head_dim(), F = c.ff_width();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".", ours = "blocks." + std::to_string(l) + ".";
    with_bias(blk + "attn_norm", ours + "ln_1");
    if (arch == GgufArch::llama) {  // qkv rows: the H query heads, then G key, then G value heads
      out.push_back({blk + "attn_q.weight", ours + "attn.qkv.weight", 0, q_rows});
      out.push_back({blk + "attn_k.weight", ours + "attn.qkv.weight", q_rows, kv_rows});
      out.push_back({blk + "attn_v.weight", ours + "attn.qkv.weight", q_rows + kv_rows, kv_rows});
    } else {
      with_bias(blk + "attn_qkv", ours + "attn.qkv");  // llama.cpp's gpt2 splits the fused rows in the same order
    }
    with_bias(blk + "attn_output", ours + "attn.proj");
    with_bias(blk + "ffn_norm", ours + "ln_2");
    if (arch == GgufArch::llama) {  // SwiGLU's fc rows: the gate half, then the value half (kernels/reference/glu.h)
      out.push_back({blk + "ffn_gate.weight", ours + "mlp.fc.weight", 0, F});
      out.push_back({blk + "ffn_up.weight", ours + "mlp.fc.weight", F, F});
    } else {
      with_bias(blk + "ffn_up", ours + "mlp.fc");
    }
    with_bias(blk + "ffn_down", ours + "mlp.proj");
  }
  with_bias("output_norm", "ln_f");
  if (!c.tie_embeddings) whole("output.weight", "lm_head.weight");  // tied: llama.cpp reads token_embd
  return out;
}

void load_gguf_parameters(const GgufContents& file, const std::string& name, const ModelConfig& c,
                          const layers::ParamList& params) {
  const GgufArch arch = gguf_arch(c);
  const auto found = file.strings.find("general.architecture");
  TF_CHECK_INPUT(found != file.strings.end() && found->second == gguf_arch_name(arch), name,
                 ": general.architecture is '", found == file.strings.end() ? "" : found->second, "', the recipe's model is ",
                 gguf_arch_name(arch));
  const NamedParams param(params);
  std::vector<std::string> problems;
  for (const GgufPiece& piece : gguf_pieces(c, arch)) {
    Tensor t = param(piece.ours);  // a handle: writing its data writes the parameter
    const int64_t width = t.rank() == 1 ? t.dim(0) : t.numel() / t.dim(0), rows = t.rank() == 1 ? 1 : t.dim(0);
    const int64_t count = piece.rows < 0 ? rows : piece.rows;
    const std::vector<int64_t> shape =
        t.rank() == 1 ? std::vector<int64_t>{width} : std::vector<int64_t>{count, width};
    const auto it = file.tensors.find(piece.gguf);
    if (it == file.tensors.end()) {
      problems.push_back("missing tensor '" + piece.gguf + "'");
    } else if (it->second.shape != shape) {
      problems.push_back("tensor '" + piece.gguf + "' is " + Shape(it->second.shape).to_string() + ", the model needs " +
                         Shape(shape).to_string());
    } else {
      std::copy(it->second.values.begin(), it->second.values.end(), t.data<float>() + piece.first * width);
    }
  }
  if (problems.empty()) return;
  std::string message = name + ": the GGUF file does not match the recipe's model:";
  for (size_t i = 0; i < problems.size() && i < 20; ++i) message += "\n  " + problems[i];
  throw InputError(message);
}

GgufFile gguf_of_model(const ModelConfig& c, const layers::ParamList& params, const data::Tokenizer& tokenizer,
                       GgufType type, const std::string& name, std::vector<std::string>& notes) {
  const GgufArch arch = gguf_arch(c);
  const NamedParams param(params);
  GgufFile file;
  std::vector<std::string> fallback;  // q8_0 matrices written as f16
  // Rows [first, first + count) of a parameter (all rows when count is -1), under `gguf_name`.
  const auto add = [&](const std::string& gguf_name, const Tensor& t, int64_t first = 0, int64_t count = -1) {
    TF_CHECK(t.dtype() == DType::f32, "gguf export: '", gguf_name, "' is not float32");
    const int64_t rows = t.rank() == 1 ? 1 : t.dim(0), width = t.rank() == 1 ? t.dim(0) : t.numel() / t.dim(0);
    if (count < 0) count = rows;
    const std::span<const float> values(t.data<float>() + first * width, static_cast<size_t>(count * width));
    std::vector<int64_t> shape = t.rank() == 1 ? std::vector<int64_t>{width} : std::vector<int64_t>{count, width};
    GgufType chosen = t.rank() == 1 ? GgufType::f32 : type;
    if (chosen == GgufType::q8_0 && width % kQ8Block != 0) {
      chosen = GgufType::f16;
      fallback.push_back(gguf_name + " (rows of " + std::to_string(width) + ")");
    }
    file.add_tensor(gguf_name, std::move(shape), values, chosen);
  };

  const std::string a = gguf_arch_name(arch);
  file.set("general.architecture", a);
  file.set("general.name", name);
  // general.file_type: llama_ftype, the type of most tensors (ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_Q8_0 = 7).
  file.set("general.file_type", static_cast<uint32_t>(type == GgufType::f32 ? 0 : type == GgufType::f16 ? 1 : 7));
  file.set(a + ".vocab_size", static_cast<uint32_t>(tokenizer.vocab_size()));
  file.set(a + ".context_length", static_cast<uint32_t>(c.max_seq_len));
  file.set(a + ".embedding_length", static_cast<uint32_t>(c.d_model));
  file.set(a + ".block_count", static_cast<uint32_t>(c.n_layers));
  file.set(a + ".feed_forward_length", static_cast<uint32_t>(c.ff_width()));
  file.set(a + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  file.set(a + ".attention.head_count_kv", static_cast<uint32_t>(c.kv_heads()));
  file.set(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim()));
  file.set(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim()));
  if (arch == GgufArch::llama) {
    file.set("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.ln_eps));
    file.set("llama.rope.freq_base", static_cast<float>(c.rope_theta));
    file.set("llama.rope.dimension_count", static_cast<uint32_t>(c.head_dim()));  // every pair of a head turns
  } else {
    file.set("gpt2.attention.layer_norm_epsilon", static_cast<float>(c.ln_eps));
  }
  add_gguf_tokenizer(file, tokenizer);

  for (const GgufPiece& piece : gguf_pieces(c, arch)) add(piece.gguf, param(piece.ours), piece.first, piece.rows);
  if (!c.tie_embeddings) {
    TF_CHECK_INPUT(!param.contains("lm_head.bias"), "the model's output projection has a bias (lm_head.bias), which "
                   "llama.cpp's ", a, " has no place for");
  }
  if (!fallback.empty()) {
    std::string list;
    for (const std::string& f : fallback) list += (list.empty() ? "" : ", ") + f;
    notes.push_back(std::to_string(fallback.size()) + " matrices are written as f16, not q8_0: Q8_0 stores rows in "
                    "blocks of 32 values, and theirs are not a multiple of 32: " + list);
  }
  return file;
}

}  // namespace tf::exporting
