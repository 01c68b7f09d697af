// Image URL sources as vLLM's MediaConnector: data: URLs (base64 only, vLLM's messages), file://
// only under --allowed-local-media-path, other schemes refused, http(s) bounded in time.
#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "unit/vision/npy.h"
#include "vision/image_error.h"
#include "vision/media_source.h"

namespace fp4serve::vision {
namespace {

const std::string kDir = std::string(FP4SERVE_TEST_DATA_DIR) + "/vision/";

std::string error_of(const std::string& url, const MediaFetchOptions& options = {}) {
  try {
    load_media_url(url, options);
  } catch (const ImageError& e) {
    return e.what();
  }
  return "";
}

std::string base64(const std::vector<std::uint8_t>& in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (in[i] << 16) | (in[i + 1] << 8) | in[i + 2];
    for (int k = 3; k >= 0; --k) out += a[(v >> (6 * k)) & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = in[i] << 16;
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v = (in[i] << 16) | (in[i + 1] << 8);
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += a[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

TEST(MediaSource, DataUrlsDecodeBase64AndKeepTheirMediaType) {
  const auto png = testing::read_bytes(kDir + "rgb_37x53.png");
  const MediaBytes m = load_media_url("data:image/PNG;base64," + base64(png), {});
  EXPECT_EQ(m.data, png);
  EXPECT_EQ(m.mime, "image/png");
  EXPECT_EQ(load_media_url("DATA:;base64,QUJD", {}).data, (std::vector<std::uint8_t>{'A', 'B', 'C'}));
}

TEST(MediaSource, BadDataUrlsGetVllmsMessages) {
  EXPECT_EQ(error_of("data:image/png;base64"), "Invalid data URL 'data:image/png;base64': missing ',' separator.");
  EXPECT_EQ(error_of("data:image/png,rawbytes"), "Only base64 data URLs are supported for now.");
  EXPECT_NE(error_of("data:image/png;base64,QUJ$").find("Invalid base64-encoded string"), std::string::npos);
  EXPECT_NE(error_of("data:image/png;base64,QUJ").find("Incorrect padding"), std::string::npos);
  MediaFetchOptions small;
  small.max_bytes = 10;
  EXPECT_NE(error_of("data:image/png;base64," + std::string(400, 'A'), small).find("more than 10 bytes"),
            std::string::npos);
}

TEST(MediaSource, OtherSchemesAreRefused) {
  EXPECT_EQ(error_of("ftp://example.com/a.png"), "The URL must be either a HTTP, data or file URL.");
  EXPECT_EQ(error_of("just-a-name.png"), "The URL must be either a HTTP, data or file URL.");
}

TEST(MediaSource, FileUrlsOnlyUnderTheAllowedPath) {
  const std::string file = "file://" + kDir + "rgb_37x53.png";
  EXPECT_EQ(error_of(file), "Cannot load local files without `--allowed-local-media-path`.");
  MediaFetchOptions o;
  o.allowed_local_media_path = resolve_allowed_local_media_path(kDir);
  EXPECT_EQ(load_media_url(file, o).data, testing::read_bytes(kDir + "rgb_37x53.png"));
  // Outside it, also through "..": refused with vLLM's message.
  const std::string outside = "file://" + kDir + "../vision/../models";
  EXPECT_NE(error_of(outside, o).find("must be a subpath of `--allowed-local-media-path"), std::string::npos);
  EXPECT_NE(error_of("file:///etc/passwd", o).find("must be a subpath"), std::string::npos);
  EXPECT_THROW(resolve_allowed_local_media_path(kDir + "no-such-dir"), std::invalid_argument);
  EXPECT_THROW(resolve_allowed_local_media_path(kDir + "manifest.json"), std::invalid_argument);
}

TEST(MediaSource, AllowedDomainsAreCheckedBeforeAnyConnection) {
  MediaFetchOptions o;
  o.allowed_media_domains = {"images.example"};
  EXPECT_EQ(error_of("http://other.example/a.png", o),
            "The URL must be from one of the allowed domains: ['images.example']. Input URL domain: other.example");
}

TEST(MediaSource, HttpFetchIsBoundedInTime) {
  // A port nothing listens on answers at once; an unroutable address must stop at the timeout.
  MediaFetchOptions o;
  o.fetch_timeout_s = 0.3;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of("http://10.255.255.1:9/a.png", o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("Failed to fetch media from URL"), std::string::npos) << e;
  EXPECT_LT(s, 3.0);
}

}  // namespace
}  // namespace fp4serve::vision
