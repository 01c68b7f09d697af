// PNG through libpng, converted to RGB as PIL opens and converts it (PngImagePlugin's mode table,
// then convert("RGB")): 16-bit samples keep their high byte, except 16-bit grey (PIL's "I;16"),
// which convert() clips to 255; grey below 8 bits is scaled up; a palette gives its colours; only
// an RGBA image is composited over white (vLLM's rgba_to_rgb), other alpha and tRNS are dropped.
// No gamma or colour-profile correction, as PIL.
#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include <png.h>

#include "vision/codecs.h"
#include "vision/image_error.h"

namespace fp4serve::vision::detail {
namespace {

struct PngJob {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::span<const std::uint8_t> bytes;
  std::size_t pos = 0;
  const DecodeLimits* limits = nullptr;
  RgbImage out;
  std::vector<std::uint8_t> pixels;
  std::vector<png_bytep> rows;
  std::string message;
  std::string failure;
};

void on_error(png_structp png, png_const_charp msg) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  job->message = msg;
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep data, png_size_t length) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (job->bytes.size() - job->pos < length) {
    job->message = "truncated";
    png_longjmp(png, 2);
  }
  std::memcpy(data, job->bytes.data() + job->pos, length);
  job->pos += length;
}

bool run(PngJob* job) {
  if (setjmp(png_jmpbuf(job->png))) return false;
  png_set_read_fn(job->png, job, on_read);
  png_read_info(job->png, job->info);
  const png_uint_32 width = png_get_image_width(job->png, job->info);
  const png_uint_32 height = png_get_image_height(job->png, job->info);
  try {
    check_dimensions(width, height, *job->limits);
  } catch (const ImageError& e) {
    job->failure = e.what();
    return false;
  }
  const int color = png_get_color_type(job->png, job->info);
  const int depth = png_get_bit_depth(job->png, job->info);
  const bool gray16 = color == PNG_COLOR_TYPE_GRAY && depth == 16;
  if (!gray16) {
    png_set_expand(job->png);  // palette -> RGB, grey < 8 bits -> 8, tRNS -> alpha
    png_set_strip_16(job->png);
    png_set_gray_to_rgb(job->png);
  }
  png_set_interlace_handling(job->png);
  png_read_update_info(job->png, job->info);
  const std::size_t stride = png_get_rowbytes(job->png, job->info);
  const int channels = png_get_channels(job->png, job->info);
  job->pixels.resize(stride * height);
  job->rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) job->rows[y] = job->pixels.data() + y * stride;
  // No png_read_end: chunks after the image data are not needed, and PIL does not insist on IEND.
  png_read_image(job->png, job->rows.data());

  job->out.width = static_cast<int>(width);
  job->out.height = static_cast<int>(height);
  const std::size_t n = static_cast<std::size_t>(width) * height;
  job->out.rgb.resize(n * 3);
  std::uint8_t* dst = job->out.rgb.data();
  if (gray16) {
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned v = (job->pixels[2 * i] << 8) | job->pixels[2 * i + 1];
      dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = static_cast<std::uint8_t>(v > 255 ? 255 : v);
    }
  } else if (channels == 4 && color == PNG_COLOR_TYPE_RGB_ALPHA) {
    composite_over_white(job->pixels.data(), n, dst);
  } else {
    for (std::size_t i = 0; i < n; ++i) std::memcpy(dst + 3 * i, job->pixels.data() + i * channels, 3);
  }
  return true;
}

}  // namespace

RgbImage decode_png(std::span<const std::uint8_t> bytes, const DecodeLimits& limits) {
  PngJob job;
  job.bytes = bytes;
  job.limits = &limits;
  job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, on_error, on_warning);
  if (!job.png) throw ImageError("cannot start the PNG decoder");
  job.info = png_create_info_struct(job.png);
  if (!job.info) {
    png_destroy_read_struct(&job.png, nullptr, nullptr);
    throw ImageError("cannot start the PNG decoder");
  }
  // Our own limits are checked on the header; libpng's default 1,000,000-pixel side limit stays.
  png_set_crc_action(job.png, PNG_CRC_DEFAULT, PNG_CRC_DEFAULT);
  const bool ok = run(&job);
  png_destroy_read_struct(&job.png, &job.info, nullptr);
  if (ok) return std::move(job.out);
  if (!job.failure.empty()) throw ImageError(job.failure);
  if (job.message == "truncated") throw ImageError("image file is truncated (the PNG data ends early)");
  throw ImageError("the PNG image is corrupt: " + job.message);
}

}  // namespace fp4serve::vision::detail
