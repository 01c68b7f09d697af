// GIF through giflib: the first frame only (vLLM takes a GIF's first frame, as PIL opens it), on
// the logical screen. As Pillow's GifImageFile for frame 0: the area the frame leaves uncovered
// holds the transparent index (else index 0), indices map through the frame's palette (local, else
// global; none: grey levels), and convert("RGB") ignores transparency.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gif_lib.h>

#include "vision/codecs.h"
#include "vision/image_error.h"

namespace fp4serve::vision::detail {
namespace {

struct Reader {
  std::span<const std::uint8_t> bytes;
  std::size_t pos = 0;
};

int read_bytes(GifFileType* gif, GifByteType* out, int length) {
  auto* r = static_cast<Reader*>(gif->UserData);
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(length), r->bytes.size() - r->pos);
  std::memcpy(out, r->bytes.data() + r->pos, n);
  r->pos += n;
  return static_cast<int>(n);
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int error = 0;
    DGifCloseFile(gif, &error);
  }
};

[[noreturn]] void fail(const GifFileType* gif, const char* what) {
  const int code = gif ? gif->Error : 0;
  if (code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON) {
    throw ImageError("image file is truncated (the GIF data ends early)");
  }
  const char* reason = GifErrorString(code);
  throw ImageError(std::string("the GIF image is corrupt: ") + what + (reason ? std::string(" (") + reason + ")" : ""));
}

}  // namespace

RgbImage decode_gif(std::span<const std::uint8_t> bytes, const DecodeLimits& limits) {
  Reader reader{bytes};
  int error = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&reader, read_bytes, &error));
  if (!gif) {
    if (error == D_GIF_ERR_READ_FAILED) throw ImageError("image file is truncated (the GIF data ends early)");
    throw ImageError("the GIF image is corrupt (cannot read its header)");
  }
  check_dimensions(gif->SWidth, gif->SHeight, limits);
  const int width = gif->SWidth;
  const int height = gif->SHeight;
  int transparent = -1;
  for (;;) {
    GifRecordType record;
    if (DGifGetRecordType(gif.get(), &record) == GIF_ERROR) fail(gif.get(), "bad record");
    if (record == TERMINATE_RECORD_TYPE) throw ImageError("the GIF image has no frame");
    if (record == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* block = nullptr;
      if (DGifGetExtension(gif.get(), &code, &block) == GIF_ERROR) fail(gif.get(), "bad extension");
      if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4 && (block[1] & 1)) transparent = block[4];
      while (block) {
        if (DGifGetExtensionNext(gif.get(), &block) == GIF_ERROR) fail(gif.get(), "bad extension");
      }
      continue;
    }
    if (record != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) fail(gif.get(), "bad image descriptor");
    const GifImageDesc& d = gif->Image;
    if (d.Width <= 0 || d.Height <= 0 || d.Left < 0 || d.Top < 0 ||
        static_cast<std::int64_t>(d.Width) * d.Height > limits.max_pixels || d.Width > 65535 || d.Height > 65535) {
      throw ImageError("the GIF image is corrupt (bad frame size)");
    }
    std::vector<GifByteType> frame(static_cast<std::size_t>(d.Width) * d.Height);
    std::vector<int> row_order(static_cast<std::size_t>(d.Height));
    if (d.Interlace) {
      int i = 0;
      for (int start : {0, 4, 2, 1}) {
        const int step = start == 0 ? 8 : start == 4 ? 8 : start == 2 ? 4 : 2;
        for (int y = start; y < d.Height; y += step) row_order[i++] = y;
      }
    } else {
      for (int y = 0; y < d.Height; ++y) row_order[y] = y;
    }
    for (int i = 0; i < d.Height; ++i) {
      if (DGifGetLine(gif.get(), frame.data() + static_cast<std::size_t>(row_order[i]) * d.Width, d.Width) == GIF_ERROR) {
        fail(gif.get(), "bad image data");
      }
    }
    const ColorMapObject* map = d.ColorMap ? d.ColorMap : gif->SColorMap;
    auto colour = [&](int index, std::uint8_t* out) {
      if (!map) {
        out[0] = out[1] = out[2] = static_cast<std::uint8_t>(index);
      } else if (index < map->ColorCount) {
        out[0] = map->Colors[index].Red;
        out[1] = map->Colors[index].Green;
        out[2] = map->Colors[index].Blue;
      } else {
        out[0] = out[1] = out[2] = 0;
      }
    };
    RgbImage out;
    out.width = width;
    out.height = height;
    out.rgb.resize(static_cast<std::size_t>(width) * height * 3);
    std::uint8_t fill[3];
    colour(transparent >= 0 ? transparent : 0, fill);
    for (std::size_t i = 0; i < static_cast<std::size_t>(width) * height; ++i) std::memcpy(&out.rgb[3 * i], fill, 3);
    for (int y = 0; y < d.Height; ++y) {
      const int sy = d.Top + y;
      if (sy >= height) break;
      for (int x = 0; x < d.Width; ++x) {
        const int sx = d.Left + x;
        if (sx >= width) break;
        colour(frame[static_cast<std::size_t>(y) * d.Width + x], &out.rgb[(static_cast<std::size_t>(sy) * width + sx) * 3]);
      }
    }
    return out;
  }
}

}  // namespace fp4serve::vision::detail
