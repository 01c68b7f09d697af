// Where an image_url's bytes come from, as vLLM's MediaConnector.load_from_url
// [vllm: multimodal/media/connector.py]: `data:` URLs (base64 only), http(s) fetched with a time
// and size limit (VLLM_IMAGE_FETCH_TIMEOUT, redirects per VLLM_MEDIA_URL_ALLOW_REDIRECTS and
// --allowed-media-domains on every hop), and `file://` only under --allowed-local-media-path.
// Refusals and failures throw ImageError with vLLM's message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::vision {

struct MediaFetchOptions {
  std::string allowed_local_media_path;            // canonical directory; "" refuses file://
  std::vector<std::string> allowed_media_domains;  // empty: any host
  double fetch_timeout_s = 5;                      // VLLM_IMAGE_FETCH_TIMEOUT
  bool allow_redirects = true;                     // VLLM_MEDIA_URL_ALLOW_REDIRECTS
  std::size_t max_bytes = 64u << 20;               // download / file / decoded data: URL cap

  // The environment's VLLM_IMAGE_FETCH_TIMEOUT and VLLM_MEDIA_URL_ALLOW_REDIRECTS over the defaults.
  void read_environment();
};

// Checks --allowed-local-media-path as vLLM's MediaConnector.__init__ does and returns the
// resolved directory; throws std::invalid_argument with vLLM's message.
std::string resolve_allowed_local_media_path(const std::string& path);

struct MediaBytes {
  std::vector<std::uint8_t> data;
  std::string mime;  // a data: URL's media type, lower case; "" otherwise (fetched bytes are sniffed)
};

MediaBytes load_media_url(std::string_view url, const MediaFetchOptions& options);

// RFC 4648 base64 with padding, strict as Python's b64decode(validate=True); throws ImageError.
std::vector<std::uint8_t> decode_base64(std::string_view text);

}  // namespace fp4serve::vision
