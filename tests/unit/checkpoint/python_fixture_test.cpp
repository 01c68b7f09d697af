// Cross-check against tests/data/safetensors/python_all_dtypes.safetensors, written by the official
// `safetensors` package (tools/reference/make_safetensors_fixtures.py): our reader must read it, and
// our writer must produce the very same bytes from the same tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::ElementsAre;

const std::filesystem::path kFixture =
    std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "safetensors" / "python_all_dtypes.safetensors";

// Same order and pattern as DTYPES / pattern() in the generating script.
constexpr DType kScriptOrder[] = {
    DType::kBool, DType::kU8,  DType::kI8,  DType::kU16,  DType::kI16,    DType::kU32,    DType::kI32,
    DType::kU64,  DType::kI64, DType::kF16, DType::kBF16, DType::kF32,    DType::kF64,    DType::kF8E4M3,
    DType::kF8E5M2, DType::kF8E8M0,
};

std::vector<std::byte> script_pattern(size_t k, DType t, size_t n) {
  std::vector<std::byte> v(n);
  for (size_t j = 0; j < n; ++j) {
    v[j] = static_cast<std::byte>(t == DType::kBool ? (j & 1) : ((7 * j + 13 * k) & 0xff));
  }
  return v;
}

std::string script_name(DType t) {
  std::string s = "t_";
  for (char c : dtype_name(t)) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(PythonFixture, ReaderReadsWhatThePythonLibraryWrote) {
  SafetensorsFile f(kFixture);
  EXPECT_EQ(f.tensors().size(), std::size(kScriptOrder) + 2);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  for (size_t k = 0; k < std::size(kScriptOrder); ++k) {
    const DType t = kScriptOrder[k];
    SCOPED_TRACE(script_name(t));
    const TensorInfo& info = f.info(script_name(t));
    EXPECT_EQ(info.dtype, t);
    EXPECT_THAT(info.shape, ElementsAre(2, 3));
    const auto expected = script_pattern(k, t, 6 * dtype_size(t));
    const auto got = f.bytes(info);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
  }
  EXPECT_EQ(f.info("empty").byte_size, 0u);
  EXPECT_THAT(f.info("empty").shape, ElementsAre(0, 4));
  EXPECT_EQ(f.as<float>("scalar")[0], 1.5f);
}

TEST(PythonFixture, WriterProducesIdenticalBytes) {
  SafetensorsWriter w;
  w.set_metadata({{"format", "pt"}});
  for (size_t k = 0; k < std::size(kScriptOrder); ++k) {
    const DType t = kScriptOrder[k];
    w.add(script_name(t), t, {2, 3}, script_pattern(k, t, 6 * dtype_size(t)));
  }
  w.add("empty", DType::kF32, {0, 4}, std::span<const std::byte>());
  const float scalar = 1.5f;
  w.add("scalar", DType::kF32, {}, std::as_bytes(std::span(&scalar, 1)));
  testing::TempDir dir;
  w.write(dir / "ours.safetensors");
  EXPECT_EQ(testing::read_file(dir / "ours.safetensors"), testing::read_file(kFixture));
}

}  // namespace
}  // namespace fp4serve
