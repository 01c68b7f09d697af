// WebP through libwebp's animation decoder, as Pillow decodes every WebP (still or animated): the
// first frame on its canvas in RGBA. With alpha (the bitstream's flag) it is composited over white
// (vLLM's rgba_to_rgb); without, the alpha is dropped.
#include <cstring>
#include <memory>

#include <webp/decode.h>
#include <webp/demux.h>

#include "vision/codecs.h"
#include "vision/image_error.h"

namespace fp4serve::vision::detail {

RgbImage decode_webp(std::span<const std::uint8_t> bytes, const DecodeLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) throw ImageError("image file is truncated (the WebP data ends early)");
  if (status != VP8_STATUS_OK) throw ImageError("the WebP image is corrupt (cannot read its header)");
  // For an animation the features give the canvas size, the size decoded below.
  check_dimensions(features.width, features.height, limits);

  WebPData data{bytes.data(), bytes.size()};
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) throw ImageError("cannot start the WebP decoder");
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  std::unique_ptr<WebPAnimDecoder, decltype(&WebPAnimDecoderDelete)> decoder(
      WebPAnimDecoderNew(&data, &options), &WebPAnimDecoderDelete);
  if (!decoder) throw ImageError("the WebP image is corrupt or truncated (cannot parse its chunks)");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(decoder.get(), &info)) throw ImageError("the WebP image is corrupt");
  check_dimensions(info.canvas_width, info.canvas_height, limits);
  std::uint8_t* frame = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(decoder.get(), &frame, &timestamp) || !frame) {
    throw ImageError("the WebP image is corrupt or truncated (its first frame does not decode)");
  }
  RgbImage out;
  out.width = static_cast<int>(info.canvas_width);
  out.height = static_cast<int>(info.canvas_height);
  const std::size_t n = static_cast<std::size_t>(out.width) * out.height;
  out.rgb.resize(n * 3);
  if (features.has_alpha) {
    composite_over_white(frame, n, out.rgb.data());
  } else {
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out.rgb.data() + 3 * i, frame + 4 * i, 3);
  }
  return out;
}

}  // namespace fp4serve::vision::detail
