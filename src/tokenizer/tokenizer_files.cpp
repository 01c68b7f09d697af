#include "tokenizer/tokenizer_files.h"

#include <zlib.h>

#include "tokenizer/tokenizer_error.h"

namespace fp4serve::tokenizer {
namespace fs = std::filesystem;

std::string read_maybe_gzipped(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (!f) throw TokenizerError("cannot open " + path.string());
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int errnum = 0;
      const std::string msg = gzerror(f, &errnum);
      gzclose(f);
      throw TokenizerError("cannot read " + path.string() + ": " + msg);
    }
    if (n == 0) break;
    data.append(buf, std::size_t(n));
  }
  gzclose(f);
  return data;
}

namespace {

nlohmann::json parse_json_file(const fs::path& path) {
  const std::string text = read_maybe_gzipped(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(path.string() + ": not valid JSON: " + e.what());
  }
}

}  // namespace

TokenizerFiles read_tokenizer_files(const fs::path& path) {
  TokenizerFiles files;
  fs::path dir;
  if (fs::is_directory(path)) {
    dir = path;
    for (const char* name : {"tokenizer.json", "tokenizer.json.gz"}) {
      if (fs::exists(path / name)) {
        files.tokenizer_json_path = path / name;
        break;
      }
    }
    if (files.tokenizer_json_path.empty())
      throw TokenizerError(path.string() + ": no tokenizer.json or tokenizer.json.gz in this directory");
  } else if (fs::exists(path)) {
    files.tokenizer_json_path = path;
    dir = path.parent_path();
  } else {
    throw TokenizerError(path.string() + ": no such tokenizer file or directory");
  }
  files.tokenizer_json = parse_json_file(files.tokenizer_json_path);
  const fs::path config = dir / "tokenizer_config.json";
  if (fs::exists(config)) files.tokenizer_config = parse_json_file(config);
  return files;
}

}  // namespace fp4serve::tokenizer
