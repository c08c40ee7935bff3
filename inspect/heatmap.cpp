// PNG attention maps with cairo; see heatmap.h.
#include "inspect/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "framework/error.h"
#include "inspect/canvas.h"

namespace tf::inspect {

namespace {

struct Rgb {
  double r, g, b;
};

// White -> light blue -> dark blue, linear in p between three stops. A negative weight (a
// differential-attention map, A1 - lambda A2, subtracts) goes from white to red as -p grows to 1.
Rgb colour(double p) {
  if (p < 0) {
    const double f = std::min(-p, 1.0);
    return {1.0 - f * 0.2, 1.0 - f * 0.9, 1.0 - f * 0.9};
  }
  static const Rgb stops[3] = {{1.0, 1.0, 1.0}, {0.42, 0.68, 0.84}, {0.03, 0.19, 0.42}};
  p = std::min(p, 1.0) * 2;
  const int i = std::min(1, static_cast<int>(p));
  const double f = p - i;
  const Rgb &a = stops[i], &b = stops[i + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

// A (cells, cells) image of the map, one pixel per cell, to be scaled up with nearest-neighbour
// sampling (sharp cells, no blur between tokens).
Surface map_image(const std::vector<float>& cells, int64_t n) {
  Surface image(cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(n), static_cast<int>(n)),
                cairo_surface_destroy);
  cairo_surface_flush(image.get());
  unsigned char* pixels = cairo_image_surface_get_data(image.get());
  const int stride = cairo_image_surface_get_stride(image.get());
  for (int64_t i = 0; i < n; ++i) {
    auto* row = reinterpret_cast<uint32_t*>(pixels + i * stride);
    for (int64_t j = 0; j < n; ++j) {
      const Rgb c = colour(cells[i * n + j]);
      row[j] = (static_cast<uint32_t>(std::lround(c.r * 255)) << 16) |
               (static_cast<uint32_t>(std::lround(c.g * 255)) << 8) | static_cast<uint32_t>(std::lround(c.b * 255));
    }
  }
  cairo_surface_mark_dirty(image.get());
  return image;
}

void draw_map(cairo_t* cr, const std::vector<float>& cells, int64_t n, double x, double y, double cell) {
  const Surface image = map_image(cells, n);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, cell, cell);
  cairo_set_source_surface(cr, image.get(), 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
}

// "h3", "L0": through snprintf, because GCC 12 at -O3 warns falsely (-Wrestrict, its bug 105651)
// on "h" + std::to_string(h).
std::string numbered(char prefix, int64_t n) {
  char text[24];
  std::snprintf(text, sizeof text, "%c%lld", prefix, static_cast<long long>(n));
  return text;
}

// A vertical bar from 0 (bottom) to 1 (top) with its two end labels.
void draw_colour_bar(cairo_t* cr, double x, double y, double height) {
  for (int k = 0; k < static_cast<int>(height); ++k) {
    const Rgb c = colour(1.0 - k / (height - 1));
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
    cairo_rectangle(cr, x, y + k, 12, 1);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x + 0.5, y + 0.5, 11, height - 1);
  cairo_stroke(cr);
  use_font(cr, 10);
  text_at(cr, x + 16, y + 9, "1");
  text_at(cr, x + 16, y + height, "0");
}

}  // namespace

int64_t map_cells(int64_t tokens) { return std::min<int64_t>(tokens, kMaxMapPixels); }

int cell_pixels(int64_t tokens) {
  return static_cast<int>(std::clamp<int64_t>(kMaxMapPixels / std::max<int64_t>(tokens, 1), 1, 16));
}

std::vector<float> downsample(const float* map, int64_t tokens) {
  const int64_t n = map_cells(tokens);
  std::vector<float> cells(n * n, 0.0f);
  // Cell c covers tokens [c T / n, (c + 1) T / n): every token in exactly one cell.
  auto first = [&](int64_t c) { return c * tokens / n; };
  for (int64_t ci = 0; ci < n; ++ci)
    for (int64_t cj = 0; cj < n; ++cj) {
      double sum = 0;
      for (int64_t i = first(ci); i < first(ci + 1); ++i)
        for (int64_t j = first(cj); j < first(cj + 1); ++j) sum += map[i * tokens + j];
      cells[ci * n + cj] = static_cast<float>(sum / ((first(ci + 1) - first(ci)) * (first(cj + 1) - first(cj))));
    }
  return cells;
}

PictureSize write_attention_png(const std::filesystem::path& file, const float* map, int64_t tokens,
                                const std::vector<std::string>& labels, const std::string& title) {
  const int64_t n = map_cells(tokens);
  const int cell = cell_pixels(tokens);
  const bool labelled = cell >= 8 && static_cast<int64_t>(labels.size()) == tokens;
  const double font = std::min(11, cell - 1);
  // Measure the labels on a scratch surface to size the margins.
  double label_width = 0;
  if (labelled) {
    const Surface scratch(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1), cairo_surface_destroy);
    const Cairo scratch_cr(cairo_create(scratch.get()), cairo_destroy);
    use_font(scratch_cr.get(), font);
    for (const std::string& l : labels)
      label_width = std::max(label_width, text_width(scratch_cr.get(), visible_token(l)));
    label_width = std::min(label_width, 120.0) + 6;
  }
  const double left = 10 + label_width, top = 30 + label_width, side = static_cast<double>(n * cell);
  const int width = static_cast<int>(left + side + 50), height = static_cast<int>(top + side + 12);
  const Canvas canvas(width, height, title);
  cairo_t* cr = canvas.cr.get();
  draw_map(cr, downsample(map, tokens), n, left, top, cell);
  if (labelled) {
    use_font(cr, font);
    cairo_set_source_rgb(cr, 0, 0, 0);
    for (int64_t t = 0; t < tokens; ++t) {
      const std::string label = visible_token(labels[t]);
      const double y = top + t * cell + cell - 2;  // a query's label on the left of its row
      text_at(cr, left - 4 - text_width(cr, label), y, label);
      cairo_save(cr);  // a key's label above its column, reading upwards
      cairo_move_to(cr, left + t * cell + cell - 2, top - 4);
      cairo_rotate(cr, -M_PI / 2);
      cairo_show_text(cr, label.c_str());
      cairo_restore(cr);
    }
  }
  draw_colour_bar(cr, left + side + 10, top, std::min(side, 200.0));
  return save_png(canvas.surface.get(), file);
}

PictureSize write_overview_png(const std::filesystem::path& file, const AttentionMaps& maps, const std::string& title) {
  TF_CHECK(!maps.layers.empty(), "no attention layers to draw");
  int64_t heads = 0;
  for (const Tensor& l : maps.layers) heads = std::max(heads, l.dim(0));
  const int64_t tokens = maps.layers[0].dim(1);
  const int64_t n = map_cells(tokens);
  const double tile = 120, gap = 8, left = 40, top = 48;
  const int width = static_cast<int>(left + heads * (tile + gap) + 50);
  const int height = static_cast<int>(top + maps.layers.size() * (tile + gap) + 4);
  const Canvas canvas(width, height, title);
  cairo_t* cr = canvas.cr.get();
  use_font(cr, 11);
  for (int64_t h = 0; h < heads; ++h) text_at(cr, left + h * (tile + gap) + tile / 2 - 8, top - 6, numbered('h', h));
  for (size_t l = 0; l < maps.layers.size(); ++l) {
    const double y = top + l * (tile + gap);
    cairo_set_source_rgb(cr, 0, 0, 0);
    use_font(cr, 11);
    text_at(cr, 8, y + tile / 2 + 4, numbered('L', maps.layer_numbers[l]));
    const Tensor& layer = maps.layers[l];  // (H, T, T)
    for (int64_t h = 0; h < layer.dim(0); ++h)
      draw_map(cr, downsample(layer.data<float>() + h * tokens * tokens, tokens), n,
               left + h * (tile + gap), y, tile / static_cast<double>(n));
  }
  draw_colour_bar(cr, left + heads * (tile + gap) + 4, top, std::min(tile, 200.0));
  return save_png(canvas.surface.get(), file);
}

}  // namespace tf::inspect
