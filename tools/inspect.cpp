// `tapeformer inspect CKPT --text TEXT|--file FILE --out DIR`: every layer's and head's attention map
// over a text as PNG pictures and as numbers (attention.h5), per-head statistics as JSON and as a
// table. docs/inspect.md shows what they look like and how to read them.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/text.h"
#include "framework/io/hdf5_io.h"
#include "inspect/attention_maps.h"
#include "inspect/heatmap.h"
#include "tools/commands.h"
#include "train/output_path.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/run_folder.h"

namespace tf::tools {

namespace {

void write_heads_json(const std::filesystem::path& file, const std::string& checkpoint, const inspect::AttentionMaps& maps,
                      const std::vector<inspect::HeadStats>& stats, const std::vector<std::string>& pictures,
                      const inspect::PictureSize& size) {
  std::ofstream out(file);
  TF_CHECK_INPUT(out, file.string(), ": cannot open for writing");
  out << "{\"checkpoint\": " << json_string(checkpoint) << ", \"causal\": " << (maps.causal ? "true" : "false")
      << ", \"tokens\": [";
  for (size_t t = 0; t < maps.tokens.size(); ++t)
    out << (t ? ", " : "") << json_string(inspect::utf8_or_escaped(maps.tokens[t]));
  out << "],\n \"ids\": [";
  for (size_t t = 0; t < maps.ids.size(); ++t) out << (t ? ", " : "") << maps.ids[t];
  out << "],\n \"picture_width\": " << size.width << ", \"picture_height\": " << size.height << ",\n \"heads\": [\n";
  for (size_t i = 0; i < stats.size(); ++i) {
    const inspect::HeadStats& s = stats[i];
    out << "  {\"layer\": " << s.layer << ", \"head\": " << s.head << ", \"entropy_bits\": " << train::json_number(s.entropy_bits)
        << ", \"mean_distance\": " << train::json_number(s.mean_distance)
        << ", \"previous_token\": " << train::json_number(s.previous_token)
        << ", \"first_token\": " << train::json_number(s.first_token) << ", \"self\": " << train::json_number(s.self)
        << ", \"picture\": " << json_string(pictures[i]) << "}" << (i + 1 < stats.size() ? ",\n" : "\n");
  }
  out << " ]}\n";
  TF_CHECK_INPUT(out.flush(), file.string(), ": write failed");
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Draw every attention head's map over a text (PNG), and each head's statistics (JSON and a table)");
  static std::string checkpoint, text, file, out_dir;
  static int64_t max_tokens = 0;
  cmd->add_option("checkpoint", checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  auto* text_option = cmd->add_option("--text", text, "The text to look at");
  cmd->add_option("--file", file, "A UTF-8 text file to look at")->excludes(text_option);
  cmd->add_option("--out", out_dir, "Folder for the pictures, attention.h5 and heads.json (created)")->required();
  cmd->add_option("--max-tokens", max_tokens,
                  "Look at the first this many tokens (default and at most: the model's model.max_seq_len)")
      ->check(integer_in(0, int64_t{1} << 20));
  cmd->callback([&exit_code] {
    TF_CHECK_INPUT(!text.empty() || !file.empty(), "inspect: give the text with --text TEXT or --file FILE");
    train::check_output_folder("inspect --out", out_dir);  // before the checkpoint is loaded
    const std::filesystem::path ckpt = train::checkpoint_argument(checkpoint);
    train::LoadedRun loaded = train::load_checkpoint(ckpt);
    const train::Run& run = loaded.run;
    const int64_t context = run.recipe.model.max_seq_len;
    TF_CHECK_INPUT(max_tokens <= context, "--max-tokens ", max_tokens, " exceeds the model's context, model.max_seq_len = ",
                   context);
    const int64_t limit = max_tokens > 0 ? max_tokens : context;
    bool truncated = false;
    std::vector<int32_t> ids =
        inspect::inspection_ids(*run.model, *run.tokenizer, file.empty() ? text : data::read_text(file), limit, &truncated);
    if (truncated) std::fprintf(stderr, "note: the text is longer than %lld tokens: only its first tokens are shown\n",
                                static_cast<long long>(limit));
    if (const int64_t unknown = run.tokenizer->count_unknown(ids))
      std::fprintf(stderr, "note: %lld characters of the text are outside the checkpoint's vocabulary and were read as <unk>\n",
                   static_cast<long long>(unknown));
    const inspect::AttentionMaps maps = inspect::capture_attention(*run.model, *run.tokenizer, std::move(ids));
    TF_CHECK_INPUT(!maps.layers.empty(), ckpt.string(), ": the model has no attention layers to inspect");

    const std::filesystem::path dir(out_dir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    TF_CHECK_INPUT(!ec, "inspect --out '", out_dir, "': cannot create the folder: ", ec.message());
    const std::vector<inspect::HeadStats> stats = inspect::head_stats(maps);
    const int64_t T = static_cast<int64_t>(maps.ids.size());
    std::vector<std::string> pictures;
    inspect::PictureSize size;
    for (const inspect::HeadStats& s : stats) {
      const std::string name = "layer" + std::to_string(s.layer) + "_head" + std::to_string(s.head) + ".png";
      const float* map = maps.layers[s.map].data<float>() + s.head * T * T;
      size = inspect::write_attention_png(dir / name, map, T, maps.tokens,
                                          "layer " + std::to_string(s.layer) + ", head " + std::to_string(s.head) +
                                              " (rows: queries, columns: keys)");
      pictures.push_back(name);
    }
    inspect::write_overview_png(dir / "overview.png", maps,
                                ckpt.filename().string() + ": attention of every layer (rows) and head (columns)");
    H5Writer h5((dir / "attention.h5").string());
    for (size_t l = 0; l < maps.layers.size(); ++l)
      h5.write_tensor("attention", "layer" + std::to_string(maps.layer_numbers[l]), maps.layers[l]);
    h5.close();
    write_heads_json(dir / "heads.json", ckpt.string(), maps, stats, pictures, size);

    std::printf("%lld tokens, %zu layers; pictures, attention.h5 and heads.json in %s\n\n", static_cast<long long>(T),
                maps.layers.size(), dir.c_str());
    std::printf("layer  head  entropy (bits)  mean distance  previous token  first token   self\n");
    for (const inspect::HeadStats& s : stats)
      std::printf("%5lld  %4lld  %14.3f  %13.2f  %14.3f  %11.3f  %5.3f\n", static_cast<long long>(s.layer),
                  static_cast<long long>(s.head), s.entropy_bits, s.mean_distance, s.previous_token, s.first_token, s.self);
    exit_code = 0;
  });
}

}  // namespace tf::tools
