// JPEG through libjpeg-turbo, with PIL's JpegDecoder settings (libjpeg defaults: islow IDCT, fancy
// upsampling), so the RGB is PIL's bit for bit when both link libjpeg-turbo. A file that ends early
// is an error, as PIL's "image file is truncated" (libjpeg would pad it with grey and warn).
#include <csetjmp>
#include <cstdio>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "vision/codecs.h"
#include "vision/image_error.h"

namespace fp4serve::vision::detail {
namespace {

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool truncated = false;
};

void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void on_message(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) err->truncated = true;
}

// Everything the decode touches lives here, outside the frame that calls setjmp, so a longjmp out
// of libjpeg leaves no local with an indeterminate value.
struct JpegJob {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  std::span<const std::uint8_t> bytes;
  const DecodeLimits* limits = nullptr;
  RgbImage out;
  std::vector<std::uint8_t> row;
  std::string failure;  // a limit refused between setjmp and the end
  bool adobe_cmyk = false;
};

// PIL's cmyk2rgb (Convert.c) on "CMYK;I" data: Adobe files store CMYK inverted.
void cmyk_to_rgb(const std::uint8_t* in, int width, bool inverted, std::uint8_t* out) {
  for (int x = 0; x < width; ++x, in += 4, out += 3) {
    const unsigned k = inverted ? 255u - in[3] : in[3];
    const unsigned nk = 255u - k;
    for (int c = 0; c < 3; ++c) {
      const unsigned v = inverted ? 255u - in[c] : in[c];
      const unsigned t = v * nk + 128u;
      const int r = static_cast<int>(nk) - static_cast<int>(((t >> 8) + t) >> 8);
      out[c] = static_cast<std::uint8_t>(r < 0 ? 0 : r);
    }
  }
}

bool run(JpegJob* job) {
  jpeg_decompress_struct* cinfo = &job->cinfo;
  if (setjmp(job->errors.jump)) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, job->bytes.data(), static_cast<unsigned long>(job->bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  try {
    check_dimensions(cinfo->image_width, cinfo->image_height, *job->limits);
  } catch (const ImageError& e) {
    job->failure = e.what();
    return false;
  }
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  job->adobe_cmyk = cmyk && cinfo->saw_Adobe_marker;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(cinfo);
  const int width = static_cast<int>(cinfo->output_width);
  job->out.width = width;
  job->out.height = static_cast<int>(cinfo->output_height);
  job->out.rgb.resize(static_cast<std::size_t>(width) * job->out.height * 3);
  job->row.resize(static_cast<std::size_t>(width) * cinfo->output_components);
  while (cinfo->output_scanline < cinfo->output_height) {
    const std::size_t y = cinfo->output_scanline;
    JSAMPROW rows[1] = {cmyk ? job->row.data() : job->out.rgb.data() + y * width * 3};
    jpeg_read_scanlines(cinfo, rows, 1);
    if (cmyk) cmyk_to_rgb(job->row.data(), width, job->adobe_cmyk, job->out.rgb.data() + y * width * 3);
    if (job->errors.truncated) return false;
  }
  jpeg_finish_decompress(cinfo);
  return !job->errors.truncated;
}

}  // namespace

RgbImage decode_jpeg(std::span<const std::uint8_t> bytes, const DecodeLimits& limits) {
  JpegJob job;
  job.bytes = bytes;
  job.limits = &limits;
  job.cinfo.err = jpeg_std_error(&job.errors.mgr);
  job.errors.mgr.error_exit = on_error;
  job.errors.mgr.emit_message = on_message;
  const bool ok = run(&job);
  jpeg_destroy_decompress(&job.cinfo);
  if (ok) return std::move(job.out);
  if (!job.failure.empty()) throw ImageError(job.failure);
  if (job.errors.truncated) throw ImageError("image file is truncated (the JPEG data ends early)");
  throw ImageError(std::string("the JPEG image is corrupt: ") + job.errors.message);
}

}  // namespace fp4serve::vision::detail
