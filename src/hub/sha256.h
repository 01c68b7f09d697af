// Incremental SHA-256 (OpenSSL's libcrypto EVP): the hub's etag of an LFS file is the sha256 of its
// bytes, checked before a blob is moved into the cache.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

namespace fp4serve::hub {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void reset();
  std::string hex_digest();  // finishes; call reset() before reusing

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Feeds the first `bytes` bytes of a file (a partial download being resumed). Throws on a read error.
void sha256_update_from_file(Sha256& h, const std::filesystem::path& file, uint64_t bytes);

}  // namespace fp4serve::hub
