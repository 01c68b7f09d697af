// SafetensorsWriter -> SafetensorsFile round trips: every dtype, empty and scalar tensors, metadata,
// chunked streaming, layout details the Python library also produces (padding, ordering, alignment).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr DType kAllDTypes[] = {
    DType::kBool, DType::kU8,  DType::kI8,  DType::kU16,    DType::kI16,    DType::kU32,
    DType::kI32,  DType::kU64, DType::kI64, DType::kF16,    DType::kBF16,   DType::kF32,
    DType::kF64,  DType::kF8E4M3, DType::kF8E5M2, DType::kF8E8M0,
};

std::vector<std::byte> pattern_bytes(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t j = 0; j < n; ++j) v[j] = static_cast<std::byte>((j * 31 + seed * 7) & 0xff);
  return v;
}

std::string tensor_name(DType t) { return "layer." + std::string(dtype_name(t)); }

TEST(SafetensorsRoundTrip, EveryDtypeKeepsNameShapeAndBytes) {
  TempDir dir;
  SafetensorsWriter w;
  for (DType t : kAllDTypes) {
    w.add(tensor_name(t), t, {3, 5}, pattern_bytes(15 * dtype_size(t), static_cast<int>(t)));
  }
  const auto path = dir / "all.safetensors";
  w.write(path);

  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), std::size(kAllDTypes));
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(dtype_name(t));
    const TensorInfo& info = f.info(tensor_name(t));
    EXPECT_EQ(info.dtype, t);
    EXPECT_THAT(info.shape, ElementsAre(3, 5));
    EXPECT_EQ(info.numel(), 15);
    EXPECT_EQ(info.byte_size, 15 * dtype_size(t));
    const auto expected = pattern_bytes(15 * dtype_size(t), static_cast<int>(t));
    const auto got = f.bytes(info);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
  }
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
}

TEST(SafetensorsRoundTrip, ZeroSizeAndScalarTensors) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("empty", DType::kF32, {0, 4}, std::span<const std::byte>());
  w.add("empty_bf16", DType::kBF16, {7, 0}, std::span<const std::byte>());
  const float v = 2.25f;
  w.add("scalar", DType::kF32, {}, std::as_bytes(std::span(&v, 1)));
  const auto path = dir / "z.safetensors";
  w.write(path);

  SafetensorsFile f(path);
  EXPECT_EQ(f.info("empty").byte_size, 0u);
  EXPECT_EQ(f.info("empty").numel(), 0);
  EXPECT_TRUE(f.bytes("empty").empty());
  EXPECT_THAT(f.info("empty_bf16").shape, ElementsAre(7, 0));
  EXPECT_TRUE(f.info("scalar").shape.empty());
  EXPECT_EQ(f.info("scalar").numel(), 1);
  ASSERT_EQ(f.as<float>("scalar").size(), 1u);
  EXPECT_EQ(f.as<float>("scalar")[0], 2.25f);
}

TEST(SafetensorsRoundTrip, NoTensorsAtAll) {
  TempDir dir;
  SafetensorsWriter w;
  w.write(dir / "none.safetensors");
  SafetensorsFile f(dir / "none.safetensors");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.file_size(), 16u);  // "{}" padded to 8 bytes
}

TEST(SafetensorsRoundTrip, MetadataIsKept) {
  TempDir dir;
  SafetensorsWriter w;
  w.set_metadata({{"format", "pt"}, {"note", "quoted \" and \\ and ü"}});
  w.add("x", DType::kU8, {2}, pattern_bytes(2, 1));
  w.write(dir / "m.safetensors");
  SafetensorsFile f(dir / "m.safetensors");
  EXPECT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "quoted \" and \\ and ü");
}

TEST(SafetensorsRoundTrip, HeaderPaddedWithSpacesToMultipleOfEight) {
  TempDir dir;
  for (int name_len = 1; name_len <= 9; ++name_len) {
    SafetensorsWriter w;
    w.add(std::string(name_len, 'a'), DType::kU8, {1}, pattern_bytes(1, 0));
    const auto path = dir / ("p" + std::to_string(name_len) + ".safetensors");
    w.write(path);
    const std::string raw = testing::read_file(path);
    uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    EXPECT_EQ(n % 8, 0u) << name_len;
    const std::string header = raw.substr(8, n);
    const size_t close = header.rfind('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << header;
    EXPECT_EQ(SafetensorsFile(path).header().data_begin, 8 + n);
  }
}

TEST(SafetensorsRoundTrip, OrderedByDecreasingAlignmentSoTypedViewsAreAligned) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("a_u8", DType::kU8, {3}, pattern_bytes(3, 0));
  w.add("b_bf16", DType::kBF16, {3}, pattern_bytes(6, 0));
  w.add("c_f32", DType::kF32, {3}, pattern_bytes(12, 0));
  w.add("d_f64", DType::kF64, {1}, pattern_bytes(8, 0));
  w.write(dir / "o.safetensors");
  SafetensorsFile f(dir / "o.safetensors");
  std::vector<std::string> order;
  for (const auto& t : f.tensors()) order.push_back(t.name);
  EXPECT_THAT(order, ElementsAre("d_f64", "c_f32", "b_bf16", "a_u8"));
  EXPECT_EQ(f.as<double>("d_f64").size(), 1u);
  EXPECT_EQ(f.as<float>("c_f32").size(), 3u);
  EXPECT_EQ(f.as<uint16_t>("b_bf16").size(), 3u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.as<double>("d_f64").data()) % 8, 0u);
}

TEST(SafetensorsRoundTrip, TypedViewRefusesWrongElementSize) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("w", DType::kBF16, {4}, pattern_bytes(8, 0));
  w.write(dir / "t.safetensors");
  SafetensorsFile f(dir / "t.safetensors");
  try {
    (void)f.as<float>("w");
    FAIL() << "read BF16 as float";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("tensor 'w' is BF16 (2-byte elements), asked for a 4-byte"));
  }
}

TEST(SafetensorsRoundTrip, TypedViewRefusesMisalignedData) {
  // A file the crate accepts but that puts an F32 at an odd offset (hand-made, not writer order).
  TempDir dir;
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"F32","shape":[1],"data_offsets":[1,5]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  testing::write_file(dir / "mis.safetensors", testing::safetensors_bytes(padded, 5));
  SafetensorsFile f(dir / "mis.safetensors");
  EXPECT_EQ(f.bytes("b").size(), 4u);
  EXPECT_THROW((void)f.as<float>("b"), CheckpointError);
}

TEST(SafetensorsRoundTrip, UnknownTensorNameNamesFile) {
  TempDir dir;
  SafetensorsWriter w;
  w.write(dir / "e.safetensors");
  SafetensorsFile f(dir / "e.safetensors");
  EXPECT_EQ(f.find("nope"), nullptr);
  try {
    (void)f.info("nope");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr((dir / "e.safetensors").string() + ": no tensor named 'nope'"));
  }
}

TEST(SafetensorsRoundTrip, FillCallbackStreamsConsecutiveChunks) {
  // 20 MiB tensor: larger than the writer's 8 MiB chunk, so it is filled in three calls.
  TempDir dir;
  const uint64_t n = 5u << 20;  // F32 elements
  std::vector<std::pair<uint64_t, size_t>> calls;
  SafetensorsWriter w;
  w.add("big", DType::kF32, {static_cast<int64_t>(n)}, [&](uint64_t offset, std::span<std::byte> chunk) {
    calls.emplace_back(offset, chunk.size());
    for (size_t i = 0; i < chunk.size(); i += 4) {
      const uint32_t v = static_cast<uint32_t>((offset + i) / 4);
      std::memcpy(chunk.data() + i, &v, 4);
    }
  });
  w.write(dir / "big.safetensors");
  ASSERT_GE(calls.size(), 3u);
  uint64_t expect_offset = 0;
  for (auto [off, len] : calls) {
    EXPECT_EQ(off, expect_offset);
    expect_offset += len;
  }
  EXPECT_EQ(expect_offset, n * 4);

  SafetensorsFile f(dir / "big.safetensors");
  auto v = f.as<uint32_t>("big");
  ASSERT_EQ(v.size(), n);
  EXPECT_EQ(v[0], 0u);
  EXPECT_EQ(v[n / 2 + 3], n / 2 + 3);
  EXPECT_EQ(v[n - 1], n - 1);
}

TEST(SafetensorsRoundTrip, FileIsMovable) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("x", DType::kU8, {4}, pattern_bytes(4, 3));
  w.write(dir / "mv.safetensors");
  SafetensorsFile a(dir / "mv.safetensors");
  SafetensorsFile b(std::move(a));
  EXPECT_EQ(b.bytes("x")[1], pattern_bytes(4, 3)[1]);
  SafetensorsFile c(dir / "mv.safetensors");
  c = std::move(b);
  EXPECT_EQ(c.bytes("x").size(), 4u);
}

TEST(SafetensorsWriterErrors, DuplicateNameRefused) {
  SafetensorsWriter w;
  w.add("x", DType::kU8, {1}, pattern_bytes(1, 0));
  EXPECT_THROW(w.add("x", DType::kU8, {1}, pattern_bytes(1, 0)), CheckpointError);
}

TEST(SafetensorsWriterErrors, ReservedNameRefused) {
  SafetensorsWriter w;
  EXPECT_THROW(w.add("__metadata__", DType::kU8, {1}, pattern_bytes(1, 0)), CheckpointError);
}

TEST(SafetensorsWriterErrors, ByteCountMustMatchShape) {
  SafetensorsWriter w;
  try {
    w.add("x", DType::kBF16, {3}, pattern_bytes(5, 0));
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("tensor 'x': shape and dtype need 6 bytes, got 5"));
  }
  EXPECT_EQ(w.tensor_count(), 0u);
}

TEST(SafetensorsWriterErrors, NegativeDimensionRefused) {
  SafetensorsWriter w;
  EXPECT_THROW(w.add("x", DType::kU8, {-1}, [](uint64_t, std::span<std::byte>) {}), CheckpointError);
}

TEST(SafetensorsWriterErrors, FailedFillLeavesNoFile) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("x", DType::kU8, {4}, [](uint64_t, std::span<std::byte>) { throw std::runtime_error("boom"); });
  EXPECT_THROW(w.write(dir / "f.safetensors"), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(dir / "f.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "f.safetensors.tmp"));
}

// Pages of a tensor copied elsewhere can be dropped from the process: the bytes read back the same
// afterwards (faulted in again from the page cache), and a range outside the mapping is refused.
TEST(SafetensorsRoundTrip, ReleasedPagesReadBackTheSameBytes) {
  TempDir dir;
  SafetensorsWriter w;
  const auto big = pattern_bytes(3 << 20, 5), small = pattern_bytes(100, 6);
  w.add("big", DType::kU8, {3 << 20}, big);
  w.add("small", DType::kU8, {100}, small);
  const auto path = dir / "r.safetensors";
  w.write(path);
  SafetensorsFile f(path);
  ASSERT_TRUE(f.release_pages(f.bytes("big")));
  ASSERT_TRUE(f.release_pages(f.bytes("small")));  // less than a page: nothing dropped, still true
  EXPECT_EQ(std::memcmp(f.bytes("big").data(), big.data(), big.size()), 0);
  EXPECT_EQ(std::memcmp(f.bytes("small").data(), small.data(), small.size()), 0);
  const std::vector<std::byte> elsewhere(64);
  EXPECT_FALSE(f.release_pages(elsewhere));
  EXPECT_FALSE(f.release_pages({}));
}

}  // namespace
}  // namespace fp4serve
