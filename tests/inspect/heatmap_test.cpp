// inspect/heatmap: the pictures decode (cairo's PNG reader, libpng underneath) to the size the
// writer reports, hold the map (not one colour), and long texts are averaged into at most
// kMaxMapPixels cells per axis by block means.
#include <cairo.h>
#include <gtest/gtest.h>

#include <set>

#include "inspect/heatmap.h"
#include "support/temp_dir.h"

namespace tf::inspect {
namespace {

struct Decoded {
  int width = 0, height = 0;
  size_t colours = 0;
};

Decoded decode(const std::filesystem::path& file) {
  cairo_surface_t* image = cairo_image_surface_create_from_png(file.c_str());
  EXPECT_EQ(cairo_surface_status(image), CAIRO_STATUS_SUCCESS) << file;
  Decoded d{cairo_image_surface_get_width(image), cairo_image_surface_get_height(image)};
  std::set<uint32_t> colours;
  const unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  for (int y = 0; data && y < d.height; ++y)
    for (int x = 0; x < d.width; ++x) colours.insert(reinterpret_cast<const uint32_t*>(data + y * stride)[x] & 0xffffff);
  d.colours = colours.size();
  cairo_surface_destroy(image);
  return d;
}

// A causal map whose rows put more weight on recent keys.
std::vector<float> causal_map(int64_t T) {
  std::vector<float> map(T * T, 0.0f);
  for (int64_t i = 0; i < T; ++i) {
    double total = 0;
    for (int64_t j = 0; j <= i; ++j) total += j + 1.0;
    for (int64_t j = 0; j <= i; ++j) map[i * T + j] = static_cast<float>((j + 1.0) / total);
  }
  return map;
}

TEST(Heatmap, PicturesDecodeToTheReportedSizeAndAreNotUniform) {
  tf::testing::TempDir tmp;
  for (int64_t T : {1, 3, 17, 63, 700}) {
    const std::vector<float> map = causal_map(T);
    std::vector<std::string> labels;
    for (int64_t t = 0; t < T; ++t) labels.push_back(std::string(1, static_cast<char>('a' + t % 26)));
    const auto file = tmp.path() / ("map" + std::to_string(T) + ".png");
    const PictureSize size = write_attention_png(file, map.data(), T, labels, "a causal map");
    const Decoded d = decode(file);
    EXPECT_EQ(d.width, size.width) << T;
    EXPECT_EQ(d.height, size.height) << T;
    EXPECT_GE(size.width, map_cells(T) * cell_pixels(T)) << T;  // the map itself fits
    EXPECT_GT(d.colours, T > 1 ? 20u : 2u) << T << " tokens: a picture of one colour is not a map";
  }
}

TEST(Heatmap, OverviewHasATileForEveryLayerAndHead) {
  tf::testing::TempDir tmp;
  AttentionMaps maps;
  const int64_t T = 9;
  for (int layer = 0; layer < 2; ++layer) {
    Tensor t = Tensor::zeros({3, T, T});  // (H, T, T)
    const std::vector<float> map = causal_map(T);
    for (int64_t h = 0; h < 3; ++h) std::copy(map.begin(), map.end(), t.data<float>() + h * T * T);
    maps.layers.push_back(t);
    maps.layer_numbers.push_back(layer);
  }
  const PictureSize size = write_overview_png(tmp.path() / "overview.png", maps, "overview");
  const Decoded d = decode(tmp.path() / "overview.png");
  EXPECT_EQ(d.width, size.width);
  EXPECT_EQ(d.height, size.height);
  EXPECT_GT(size.width, 3 * 120);   // three tiles across
  EXPECT_GT(size.height, 2 * 120);  // two down
  EXPECT_GT(d.colours, 20u);
}

TEST(Heatmap, LongTextsAreAveragedIntoBlocks) {
  EXPECT_EQ(map_cells(64), 64);
  EXPECT_EQ(map_cells(1000), kMaxMapPixels);
  EXPECT_EQ(cell_pixels(3), 16);
  EXPECT_EQ(cell_pixels(64), 10);
  EXPECT_EQ(cell_pixels(5000), 1);
  // 2 tokens per cell along each axis: cell (0, 0) is the mean of the 2 x 2 block.
  const int64_t T = 2 * kMaxMapPixels;
  std::vector<float> map(T * T);
  for (int64_t i = 0; i < T * T; ++i) map[i] = static_cast<float>(i % 7);
  const std::vector<float> cells = downsample(map.data(), T);
  ASSERT_EQ(static_cast<int64_t>(cells.size()), kMaxMapPixels * kMaxMapPixels);
  EXPECT_FLOAT_EQ(cells[0], (map[0] + map[1] + map[T] + map[T + 1]) / 4);
  const int64_t last = kMaxMapPixels - 1;
  EXPECT_FLOAT_EQ(cells[last * kMaxMapPixels + last],
                  (map[(T - 2) * T + T - 2] + map[(T - 2) * T + T - 1] + map[(T - 1) * T + T - 2] + map[T * T - 1]) / 4);
  // A short map is copied cell for cell.
  const std::vector<float> small = {0.25f, 0.75f, 1.0f, 0.0f};
  EXPECT_EQ(downsample(small.data(), 2), small);
}

TEST(Heatmap, AnUnwritableFileIsNamed) {
  const std::vector<float> map = causal_map(3);
  try {
    write_attention_png("/nonexistent-folder/x.png", map.data(), 3, {}, "t");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/x.png: cannot write the picture"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tf::inspect
