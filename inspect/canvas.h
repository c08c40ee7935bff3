// What the pictures of inspect/ share: cairo surfaces and contexts owned by handles, a white canvas
// with a title, text in DejaVu Sans (setup installs fonts-dejavu-core), and writing the PNG.
#pragma once
#include <cairo.h>

#include <filesystem>
#include <memory>
#include <string>

namespace tf::inspect {

struct PictureSize {
  int width = 0, height = 0;
};

using Surface = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using Cairo = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

void use_font(cairo_t* cr, double size);
void text_at(cairo_t* cr, double x, double y, const std::string& text);
double text_width(cairo_t* cr, const std::string& text);

// A white picture with its title in the top left corner, in black, 13 points.
struct Canvas {
  Surface surface;
  Cairo cr;
  Canvas(int width, int height, const std::string& title);
};

// Writes the surface as PNG; InputError naming the file when that fails.
PictureSize save_png(cairo_surface_t* surface, const std::filesystem::path& file);

}  // namespace tf::inspect
