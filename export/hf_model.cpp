// tapeformer's GPT as transformers' LlamaForCausalLM or GPT2LMHeadModel (export/hf_model.h). Names
// and config keys are those of transformers' modeling_llama.py / configuration_llama.py and
// modeling_gpt2.py / configuration_gpt2.py.
#include "export/hf_model.h"

#include <charconv>
#include <functional>
#include <map>
#include <sstream>

#include "export/gguf_model.h"
#include "export/named_params.h"
#include "framework/error.h"

namespace tf::exporting {

namespace {

using layers::ModelConfig;

// A parameter's values as a row-major float vector, optionally transposed (2-D) or with the rows of
// each head permuted for rotate_half (export/hf_model.h).
std::vector<float> rows_of(const Tensor& t, int64_t first, int64_t count) {
  const int64_t width = t.rank() == 1 ? 1 : t.numel() / t.dim(0);
  const float* p = t.data<float>() + first * width;
  return {p, p + count * width};
}

std::vector<float> transposed(const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
  return out;
}

// Within each head of D rows: rows 0, 2, 4, ..., D - 2, then 1, 3, ..., D - 1.
std::vector<float> rotate_half_order(const std::vector<float>& values, int64_t heads, int64_t head_dim, int64_t width) {
  std::vector<float> out(values.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < head_dim; ++j) {
      const int64_t from = h * head_dim + (j < head_dim / 2 ? 2 * j : 2 * (j - head_dim / 2) + 1);
      std::copy_n(values.begin() + from * width, width, out.begin() + (h * head_dim + j) * width);
    }
  return out;
}

std::string number(double x) {  // the shortest text that reads back as x
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, x).ptr;
  return {text, end};
}

// What keeps a BERT from BertForMaskedLM (learned positions) and RoFormerForMaskedLM (RoPE): both are
// post-norm BERTs with LayerNorm, a GELU MLP, biases and one key/value head per query head.
std::vector<std::string> bert_mismatches(const ModelConfig& c) {
  std::vector<std::string> out;
  const auto need = [&](bool ok, const std::string& what) {
    if (!ok) out.push_back(what);
  };
  need(!c.pre_norm, "model.pre_norm is true; a Hugging Face BERT normalises after each sublayer");
  need(c.norm == kernels::NormKind::layer, "model.norm is rms; a Hugging Face BERT needs layer");
  need(c.feed_forward == kernels::FeedForwardKind::gelu,
       std::string("model.feed_forward is ") + kernels::feed_forward_kind_name(c.feed_forward) + "; a Hugging Face BERT needs gelu");
  need(c.bias, "model.bias is false; a Hugging Face BERT needs biases");
  need(c.kv_heads() == c.n_heads, "model.n_kv_heads is set; a Hugging Face BERT has one key/value head per query head");
  need(c.n_heads * c.head_dim() == c.d_model, "model.head_dim: n_heads x head_dim must be d_model");
  need(c.heads_per_layer.empty(), "model.heads_per_layer is set (a pruned model)");
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (!layers::mixer_row(c.mixer(l)).exports) {
      out.push_back("model.mixers holds another mixer than softmax attention");
      break;
    }
  for (const std::string& key : c.unexported_options())
    out.push_back(key + " is set; the Hugging Face classes have no such option");
  const bool rope = c.position == layers::PositionEncoding::rope;
  need(c.position == layers::PositionEncoding::learned || rope,
       std::string("model.position is ") + layers::position_encoding_name(c.position) +
           "; BertForMaskedLM needs learned, RoFormerForMaskedLM rope");
  need(!rope || (c.rope_theta == 10000.0 && c.rope_scaling.kind == ops::RopeScalingKind::none),
       "model.rope_theta or model.rope_scaling is set; RoFormer's rotation has the base 10000 and no scaling");
  return out;
}

// BertForMaskedLM (modeling_bert.py) or, with RoPE, RoFormerForMaskedLM (modeling_roformer.py), whose
// rotation turns the pairs (2i, 2i + 1) with the base 10000, as tapeformer's does: no permutation.
void bert_to_hf(const ModelConfig& c, const NamedParams& param,
                const std::function<void(const std::string&, std::vector<int64_t>, const std::vector<float>&)>& put,
                HfModel& hf, std::ostringstream& json) {
  const std::vector<std::string> problems = bert_mismatches(c);
  std::string listed;
  for (const std::string& p : problems) listed += "\n    " + p;
  TF_CHECK_INPUT(problems.empty(), "no Hugging Face masked-LM class (BertForMaskedLM, RoFormerForMaskedLM) expresses "
                 "this BERT (docs/export.md):", listed);
  const bool rope = c.position == layers::PositionEncoding::rope;
  const std::string m = rope ? "roformer." : "bert.";
  const auto whole = [&](const std::string& name, const Tensor& t) {
    put(name, t.shape().vec(), std::vector<float>(t.data<float>(), t.data<float>() + t.numel()));
  };
  const int64_t C = c.d_model, V = param("token_embedding.weight").dim(0);
  hf.architecture = rope ? "RoFormerForMaskedLM" : "BertForMaskedLM";
  whole(m + "embeddings.word_embeddings.weight", param("token_embedding.weight"));
  if (!rope) whole(m + "embeddings.position_embeddings.weight", param("position_embedding.weight"));
  // Hugging Face's BERTs always add a token-type row; without segments it is a row of zeros.
  if (c.n_segments > 0) whole(m + "embeddings.token_type_embeddings.weight", param("segment_embedding.weight"));
  else put(m + "embeddings.token_type_embeddings.weight", {1, C}, std::vector<float>(C, 0.0f));
  whole(m + "embeddings.LayerNorm.weight", param("embedding_norm.weight"));
  whole(m + "embeddings.LayerNorm.bias", param("embedding_norm.bias"));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string hl = m + "encoder.layer." + std::to_string(l) + ".", ours = "blocks." + std::to_string(l) + ".";
    const Tensor& w = param(ours + "attn.qkv.weight");
    const Tensor& b = param(ours + "attn.qkv.bias");
    const char* parts[] = {"query", "key", "value"};
    for (int64_t i = 0; i < 3; ++i) {
      put(hl + "attention.self." + parts[i] + ".weight", {C, C},
          std::vector<float>(w.data<float>() + i * C * C, w.data<float>() + (i + 1) * C * C));
      put(hl + "attention.self." + parts[i] + ".bias", {C},
          std::vector<float>(b.data<float>() + i * C, b.data<float>() + (i + 1) * C));
    }
    for (const auto& [hf_name, our_name] : std::vector<std::pair<std::string, std::string>>{
             {"attention.output.dense", "attn.proj"}, {"attention.output.LayerNorm", "ln_1"},
             {"intermediate.dense", "mlp.fc"}, {"output.dense", "mlp.proj"}, {"output.LayerNorm", "ln_2"}}) {
      whole(hl + hf_name + ".weight", param(ours + our_name + ".weight"));
      whole(hl + hf_name + ".bias", param(ours + our_name + ".bias"));
    }
  }
  for (const auto& [hf_name, our_name] : std::vector<std::pair<std::string, std::string>>{
           {"cls.predictions.transform.dense", "mlm_head.dense"}, {"cls.predictions.transform.LayerNorm", "mlm_head.norm"}}) {
    whole(hf_name + ".weight", param(our_name + ".weight"));
    whole(hf_name + ".bias", param(our_name + ".bias"));
  }
  whole("cls.predictions.bias", param("mlm_head.bias"));  // the decoder's weight is tied to the word embeddings
  const std::string type = rope ? "roformer" : "bert";
  json << "{\n  \"architectures\": [\"" << hf.architecture << "\"],\n  \"model_type\": \"" << type << "\",\n"
       << "  \"vocab_size\": " << V << ",\n  \"hidden_size\": " << C << ",\n  \"num_hidden_layers\": " << c.n_layers
       << ",\n  \"num_attention_heads\": " << c.n_heads << ",\n  \"intermediate_size\": " << c.ff_width()
       << ",\n  \"hidden_act\": \"" << (c.gelu == ops::GeluApprox::erf ? "gelu" : "gelu_new") << "\",\n"
       << "  \"max_position_embeddings\": " << c.max_seq_len << ",\n  \"type_vocab_size\": " << std::max<int64_t>(c.n_segments, 1)
       << ",\n  \"layer_norm_eps\": " << number(c.ln_eps) << ",\n  \"hidden_dropout_prob\": 0.0,\n"
       << "  \"attention_probs_dropout_prob\": 0.0,\n  \"tie_word_embeddings\": true,\n";
  if (rope) json << "  \"embedding_size\": " << C << ",\n  \"rotary_value\": false,\n";
  else json << "  \"position_embedding_type\": \"absolute\",\n";
}

}  // namespace

HfModel hf_model(const ModelConfig& c, const layers::ParamList& params, SafetensorsType type) {
  const bool bert = c.arch == layers::Architecture::bert;
  const GgufArch arch = bert ? GgufArch::gpt2 : gguf_arch(c, "Hugging Face model class (LlamaForCausalLM, GPT2LMHeadModel)");
  const NamedParams param(params);
  HfModel hf;
  const auto put = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
    const SafetensorsType chosen = shape.size() == 1 ? SafetensorsType::f32 : type;  // norms and biases stay f32
    hf.weights.add(name, std::move(shape), values, chosen);
  };
  const auto whole = [&](const std::string& name, const Tensor& t) {
    put(name, t.shape().vec(), rows_of(t, 0, t.dim(0)));
  };
  const int64_t C = c.d_model, D = c.head_dim(), H = c.n_heads, G = c.kv_heads(), F = c.ff_width();
  const int64_t V = param("token_embedding.weight").dim(0);
  hf.weights.set_metadata("format", "pt");
  hf.weights.set_metadata("writer", "tapeformer");
  std::ostringstream json;
  if (bert) {
    bert_to_hf(c, param, put, hf, json);
  } else if (arch == GgufArch::llama) {
    hf.architecture = "LlamaForCausalLM";
    whole("model.embed_tokens.weight", param("token_embedding.weight"));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string hf_layer = "model.layers." + std::to_string(l) + ".", ours = "blocks." + std::to_string(l) + ".";
      whole(hf_layer + "input_layernorm.weight", param(ours + "ln_1.weight"));
      const Tensor& qkv = param(ours + "attn.qkv.weight");
      put(hf_layer + "self_attn.q_proj.weight", {H * D, C}, rotate_half_order(rows_of(qkv, 0, H * D), H, D, C));
      put(hf_layer + "self_attn.k_proj.weight", {G * D, C}, rotate_half_order(rows_of(qkv, H * D, G * D), G, D, C));
      put(hf_layer + "self_attn.v_proj.weight", {G * D, C}, rows_of(qkv, (H + G) * D, G * D));
      whole(hf_layer + "self_attn.o_proj.weight", param(ours + "attn.proj.weight"));
      whole(hf_layer + "post_attention_layernorm.weight", param(ours + "ln_2.weight"));
      const Tensor& fc = param(ours + "mlp.fc.weight");  // SwiGLU: the gate rows, then the value rows
      put(hf_layer + "mlp.gate_proj.weight", {F, C}, rows_of(fc, 0, F));
      put(hf_layer + "mlp.up_proj.weight", {F, C}, rows_of(fc, F, F));
      whole(hf_layer + "mlp.down_proj.weight", param(ours + "mlp.proj.weight"));
    }
    whole("model.norm.weight", param("ln_f.weight"));
    if (!c.tie_embeddings) whole("lm_head.weight", param("lm_head.weight"));
    json << "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
         << "  \"vocab_size\": " << V << ",\n  \"hidden_size\": " << C << ",\n  \"intermediate_size\": " << F
         << ",\n  \"num_hidden_layers\": " << c.n_layers << ",\n  \"num_attention_heads\": " << H
         << ",\n  \"num_key_value_heads\": " << G << ",\n  \"head_dim\": " << D
         << ",\n  \"max_position_embeddings\": " << c.max_seq_len << ",\n  \"rms_norm_eps\": " << number(c.ln_eps)
         << ",\n  \"rope_theta\": " << number(c.rope_theta) << ",\n  \"hidden_act\": \"silu\",\n"
         << "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"tie_word_embeddings\": "
         << (c.tie_embeddings ? "true" : "false") << ",\n";
  } else {
    TF_CHECK_INPUT(G == H, "GPT2LMHeadModel has one key/value head per query head; this model has model.n_kv_heads ",
                   G, " for ", H, " heads (export it as GGUF, whose gpt2 takes them)");
    hf.architecture = "GPT2LMHeadModel";
    whole("transformer.wte.weight", param("token_embedding.weight"));
    whole("transformer.wpe.weight", param("position_embedding.weight"));
    // Conv1D (in, out): the transpose of a linear layer's (out, in).
    const auto conv1d = [&](const std::string& name, const Tensor& w) {
      put(name, {w.dim(1), w.dim(0)}, transposed(rows_of(w, 0, w.dim(0)), w.dim(0), w.dim(1)));
    };
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".", ours = "blocks." + std::to_string(l) + ".";
      for (const auto& [hf_name, our_name] : std::vector<std::pair<std::string, std::string>>{
               {"ln_1", "ln_1"}, {"ln_2", "ln_2"}}) {
        whole(h + hf_name + ".weight", param(ours + our_name + ".weight"));
        whole(h + hf_name + ".bias", param(ours + our_name + ".bias"));
      }
      for (const auto& [hf_name, our_name] : std::vector<std::pair<std::string, std::string>>{
               {"attn.c_attn", "attn.qkv"}, {"attn.c_proj", "attn.proj"}, {"mlp.c_fc", "mlp.fc"}, {"mlp.c_proj", "mlp.proj"}}) {
        conv1d(h + hf_name + ".weight", param(ours + our_name + ".weight"));
        whole(h + hf_name + ".bias", param(ours + our_name + ".bias"));
      }
    }
    whole("transformer.ln_f.weight", param("ln_f.weight"));
    whole("transformer.ln_f.bias", param("ln_f.bias"));
    if (!c.tie_embeddings) whole("lm_head.weight", param("lm_head.weight"));
    TF_CHECK_INPUT(!param.contains("lm_head.bias"), "the model's output projection has a bias (lm_head.bias), which "
                   "GPT2LMHeadModel has no place for");
    json << "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
         << "  \"vocab_size\": " << V << ",\n  \"n_embd\": " << C << ",\n  \"n_inner\": " << F
         << ",\n  \"n_layer\": " << c.n_layers << ",\n  \"n_head\": " << H << ",\n  \"n_positions\": " << c.max_seq_len
         << ",\n  \"layer_norm_epsilon\": " << number(c.ln_eps) << ",\n  \"activation_function\": \"gelu_new\",\n"
         << "  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": " << (c.tie_embeddings ? "true" : "false")
         << ",\n";
  }
  json << "  \"torch_dtype\": \"" << (type == SafetensorsType::f16 ? "float16" : "float32") << "\",\n"
       << "  \"tapeformer_note\": \"ids are tapeformer's tokenizer's (tokenizer.txt beside this file)\"\n}\n";
  hf.config_json = json.str();
  return hf;
}

}  // namespace tf::exporting
