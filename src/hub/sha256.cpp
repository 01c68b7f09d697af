#include "hub/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>
#include <vector>

namespace fp4serve::hub {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) { reset(); }
Sha256::~Sha256() = default;

void Sha256::reset() {
  if (EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) throw std::runtime_error("sha256: init failed");
}

void Sha256::update(const void* data, size_t size) { EVP_DigestUpdate(impl_->ctx, data, size); }

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &n);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

void sha256_update_from_file(Sha256& h, const std::filesystem::path& file, uint64_t bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::vector<char> buf(1 << 20);
  while (bytes > 0) {
    const auto want = static_cast<std::streamsize>(std::min<uint64_t>(bytes, buf.size()));
    in.read(buf.data(), want);
    if (in.gcount() != want) throw std::runtime_error("short read from " + file.string());
    h.update(buf.data(), static_cast<size_t>(want));
    bytes -= static_cast<uint64_t>(want);
  }
}

}  // namespace fp4serve::hub
