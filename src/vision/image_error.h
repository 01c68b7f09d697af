// Why an image could not be used: its bytes (not a supported format, truncated, corrupt), its size
// (over a limit, a decompression bomb) or where it came from (a refused or failed URL). The server
// answers these with a 400 whose message is what(); nothing about them is a server fault.
#pragma once

#include <stdexcept>
#include <string>

namespace fp4serve::vision {

class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fp4serve::vision
