// Attention maps as PNG pictures, drawn with cairo (text through its font backends, PNG through
// libpng): one head's map with the tokens along both axes, and an overview grid of every layer
// and head. Probability 0 is white and 1 the darkest blue, on a linear scale (a colour bar says so);
// the negative weights of a differential-attention layer's map (A1 - lambda A2) are red.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "inspect/attention_maps.h"
#include "inspect/canvas.h"

namespace tf::inspect {

// Pixels per map cell for `tokens` tokens: 16 for short texts, fewer as they grow, at least 1; past
// kMaxMapPixels tokens neighbouring rows and columns are averaged into one cell (map_cells).
inline constexpr int kMaxMapPixels = 640;
int cell_pixels(int64_t tokens);
// Cells along each axis: the tokens, or kMaxMapPixels when there are more.
int64_t map_cells(int64_t tokens);
// The (cells, cells) map of a (tokens, tokens) one: block means when tokens > kMaxMapPixels.
std::vector<float> downsample(const float* map, int64_t tokens);

// One head's (T, T) map; the token labels are drawn when a cell is tall enough to read (8 pixels).
PictureSize write_attention_png(const std::filesystem::path& file, const float* map, int64_t tokens,
                                const std::vector<std::string>& labels, const std::string& title);
// Every layer (rows) and head (columns) as small tiles.
PictureSize write_overview_png(const std::filesystem::path& file, const AttentionMaps& maps, const std::string& title);

}  // namespace tf::inspect
