// Shared cairo pieces; see canvas.h.
#include "inspect/canvas.h"

#include "framework/error.h"

namespace tf::inspect {

void use_font(cairo_t* cr, double size) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

void text_at(cairo_t* cr, double x, double y, const std::string& text) {
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, text.c_str());
}

double text_width(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, text.c_str(), &e);
  return e.x_advance;
}

Canvas::Canvas(int width, int height, const std::string& title)
    : surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height), cairo_surface_destroy),
      cr(cairo_create(surface.get()), cairo_destroy) {
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_paint(cr.get());
  cairo_set_source_rgb(cr.get(), 0, 0, 0);
  use_font(cr.get(), 13);
  text_at(cr.get(), 10, 18, title);
}

PictureSize save_png(cairo_surface_t* surface, const std::filesystem::path& file) {
  const cairo_status_t status = cairo_surface_write_to_png(surface, file.c_str());
  TF_CHECK_INPUT(status == CAIRO_STATUS_SUCCESS, file.string(), ": cannot write the picture (",
                 cairo_status_to_string(status), ")");
  return {cairo_image_surface_get_width(surface), cairo_image_surface_get_height(surface)};
}

}  // namespace tf::inspect
