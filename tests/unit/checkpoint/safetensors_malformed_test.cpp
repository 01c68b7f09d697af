// One test per way a safetensors file can be malformed: each must be refused with a CheckpointError
// whose message names the file and the fault. Files are crafted byte by byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using testing::safetensors_bytes;
using testing::TempDir;

class SafetensorsMalformed : public ::testing::Test {
 protected:
  // Writes `bytes` to a file, opens it, and returns the error message (failing if it opened).
  std::string refuse(const std::string& bytes) {
    const auto path = dir_ / "bad.safetensors";
    testing::write_file(path, bytes);
    try {
      SafetensorsFile f(path);
      ADD_FAILURE() << "opened a malformed file with " << f.tensors().size() << " tensors";
    } catch (const CheckpointError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(path.string()));
      EXPECT_EQ(e.path(), path.string());
      return e.what();
    }
    return "";
  }
  // A header with one tensor entry `entry` named "w", over `data` bytes of data.
  std::string refuse_entry(const std::string& entry, size_t data = 8) {
    return refuse(safetensors_bytes(R"({"w":)" + entry + "}", data));
  }

  TempDir dir_;
};

TEST_F(SafetensorsMalformed, EmptyFileIsTruncated) {
  EXPECT_THAT(refuse(""), HasSubstr("truncated"));
}

TEST_F(SafetensorsMalformed, FileShorterThanLengthPrefixIsTruncated) {
  EXPECT_THAT(refuse(std::string("\x02\0\0\0\0", 5)), HasSubstr("truncated: the file is 5 bytes"));
}

TEST_F(SafetensorsMalformed, HeaderLengthPastEndOfFile) {
  const std::string msg = refuse(testing::le64(1000) + "{}      ");
  EXPECT_THAT(msg, HasSubstr("header length 1000 runs past the end of the file (16 bytes)"));
}

TEST_F(SafetensorsMalformed, HeaderLengthAbsurdlyLarge) {
  // The crate's MAX_HEADER_SIZE is 100,000,000; one more is refused before reading anything.
  const std::string msg = refuse(testing::le64(100'000'001) + "{}");
  EXPECT_THAT(msg, HasSubstr("header length 100000001 is too large"));
}

TEST_F(SafetensorsMalformed, HeaderLengthNearUint64Max) {
  EXPECT_THAT(refuse(testing::le64(~0ull) + "{}"), HasSubstr("too large"));
}

TEST_F(SafetensorsMalformed, HeaderNotValidJson) {
  EXPECT_THAT(refuse(safetensors_bytes(R"({"w": {"dtype": )", 0)), HasSubstr("header is not valid JSON"));
}

TEST_F(SafetensorsMalformed, HeaderNotUtf8) {
  EXPECT_THAT(refuse(safetensors_bytes("{\"w\xff\": 1}", 0)), HasSubstr("header is not valid JSON"));
}

TEST_F(SafetensorsMalformed, HeaderTrailingNulPaddingIsNotJson) {
  // serde_json refuses trailing NULs too; only spaces may pad the header.
  EXPECT_THAT(refuse(safetensors_bytes(std::string("{}\0\0\0\0\0\0", 8), 0)),
              HasSubstr("header is not valid JSON"));
}

TEST_F(SafetensorsMalformed, HeaderNotAnObject) {
  EXPECT_THAT(refuse(safetensors_bytes("[1, 2]", 0)), HasSubstr("header is not a JSON object, got array"));
}

TEST_F(SafetensorsMalformed, EntryNotAnObject) {
  EXPECT_THAT(refuse_entry("5"), HasSubstr("tensor 'w': entry must be a JSON object, got integer"));
}

TEST_F(SafetensorsMalformed, MissingField) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [8]})"),
              HasSubstr("tensor 'w': missing field 'data_offsets'"));
}

TEST_F(SafetensorsMalformed, DtypeNotAString) {
  EXPECT_THAT(refuse_entry(R"({"dtype": 7, "shape": [8], "data_offsets": [0, 8]})"),
              HasSubstr("tensor 'w': field 'dtype' must be a string, got integer"));
}

TEST_F(SafetensorsMalformed, ShapeNotAnArray) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": "8", "data_offsets": [0, 8]})"),
              HasSubstr("tensor 'w': field 'shape' must be an array, got string"));
}

TEST_F(SafetensorsMalformed, DataOffsetsWrongArity) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [8], "data_offsets": [0, 4, 8]})"),
              HasSubstr("field 'data_offsets' must be an array of two non-negative integers"));
}

TEST_F(SafetensorsMalformed, DataOffsetsNegative) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [8], "data_offsets": [-1, 8]})"),
              HasSubstr("field 'data_offsets' must be an array of two non-negative integers"));
}

TEST_F(SafetensorsMalformed, UnknownDtypeIsNamed) {
  const std::string msg = refuse_entry(R"({"dtype": "F4", "shape": [16], "data_offsets": [0, 8]})");
  EXPECT_THAT(msg, HasSubstr("tensor 'w': unknown dtype 'F4'"));
  EXPECT_THAT(msg, HasSubstr("BF16"));  // lists what is known
}

TEST_F(SafetensorsMalformed, NegativeDimension) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [-2, -4], "data_offsets": [0, 8]})"),
              HasSubstr("tensor 'w': shape has negative dimension -2"));
}

TEST_F(SafetensorsMalformed, FractionalDimension) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [2.5], "data_offsets": [0, 8]})"),
              HasSubstr("shape dimensions must be non-negative integers, got float 2.5"));
}

TEST_F(SafetensorsMalformed, AbsurdShapeOverflows) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]})"),
              HasSubstr("absurdly large: its byte size overflows 64 bits"));
}

TEST_F(SafetensorsMalformed, ZeroDimensionAfterOverflowingPrefixIsRefused) {
  // The crate folds the element count left to right with checked multiplication.
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [4611686018427387904, 4611686018427387904, 0],)"
                           R"( "data_offsets": [0, 0]})", 0),
              HasSubstr("absurdly large"));
}

TEST(SafetensorsShapes, ZeroDimensionFirstMakesAnEmptyTensor) {
  TempDir dir;
  std::string header = R"({"w": {"dtype": "U8", "shape": [0, 4611686018427387904, 4611686018427387904],)"
                       R"( "data_offsets": [0, 0]}})";
  testing::write_file(dir / "z.safetensors", safetensors_bytes(header, 0));
  SafetensorsFile f(dir / "z.safetensors");
  EXPECT_EQ(f.info("w").numel(), 0);
  EXPECT_EQ(f.info("w").byte_size, 0u);
}

TEST_F(SafetensorsMalformed, DimensionBeyondInt64) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 8]})"),
              HasSubstr("shape dimension 18446744073709551615 is absurdly large"));
}

TEST_F(SafetensorsMalformed, ShapeTimesDtypeSizeDiffersFromOffsets) {
  const std::string msg = refuse_entry(R"({"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]})");
  EXPECT_THAT(msg, HasSubstr("shape [2, 3] x BF16 (2 bytes) = 12 bytes, but data_offsets [0, 8] span 8 "
                             "bytes (size mismatch)"));
}

TEST_F(SafetensorsMalformed, DataOffsetsPastEndOfFile) {
  const std::string msg = refuse_entry(R"({"dtype": "U8", "shape": [16], "data_offsets": [0, 16]})", 8);
  EXPECT_THAT(msg, HasSubstr("tensor 'w': data_offsets [0, 16] run past the end of the file (data region is 8 bytes)"));
}

TEST_F(SafetensorsMalformed, DataOffsetsBeginAfterEnd) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [4], "data_offsets": [8, 4]})"),
              HasSubstr("tensor 'w': data_offsets begin 8 > end 4"));
}

TEST_F(SafetensorsMalformed, OverlappingTensors) {
  const std::string msg = refuse(safetensors_bytes(
      R"({"a": {"dtype": "U8", "shape": [6], "data_offsets": [0, 6]},)"
      R"( "b": {"dtype": "U8", "shape": [6], "data_offsets": [4, 10]}})",
      10));
  EXPECT_THAT(msg, HasSubstr("tensors 'a' [0, 6) and 'b' [4, 10) overlap"));
}

TEST_F(SafetensorsMalformed, EmptyTensorInsideAnotherOverlaps) {
  // The crate requires each tensor, sorted by offsets, to start where the previous one ended.
  const std::string msg = refuse(safetensors_bytes(
      R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},)"
      R"( "e": {"dtype": "U8", "shape": [0], "data_offsets": [3, 3]}})",
      8));
  EXPECT_THAT(msg, HasSubstr("overlap"));
}

TEST_F(SafetensorsMalformed, GapBetweenTensors) {
  const std::string msg = refuse(safetensors_bytes(
      R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},)"
      R"( "b": {"dtype": "U8", "shape": [4], "data_offsets": [6, 10]}})",
      10));
  EXPECT_THAT(msg, HasSubstr("gap in the data region: bytes [4, 6) before tensor 'b'"));
  EXPECT_THAT(msg, HasSubstr("file not fully covered"));
}

TEST_F(SafetensorsMalformed, GapBeforeFirstTensor) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "shape": [4], "data_offsets": [4, 8]})", 8),
              HasSubstr("gap in the data region: bytes [0, 4) before tensor 'w'"));
}

TEST_F(SafetensorsMalformed, TrailingBytesNotCovered) {
  const std::string msg = refuse_entry(R"({"dtype": "U8", "shape": [4], "data_offsets": [0, 4]})", 7);
  EXPECT_THAT(msg, HasSubstr("its last 3 bytes belong to no tensor (incomplete metadata, file not fully covered)"));
}

TEST_F(SafetensorsMalformed, DataButNoTensors) {
  EXPECT_THAT(refuse(safetensors_bytes("{}", 4)), HasSubstr("file not fully covered"));
}

TEST_F(SafetensorsMalformed, DuplicateTensorName) {
  const std::string msg = refuse(safetensors_bytes(
      R"({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},)"
      R"( "w": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
      8));
  EXPECT_THAT(msg, HasSubstr("header has duplicate key 'w' at top level"));
}

TEST_F(SafetensorsMalformed, DuplicateFieldInEntry) {
  EXPECT_THAT(refuse_entry(R"({"dtype": "U8", "dtype": "I8", "shape": [8], "data_offsets": [0, 8]})"),
              HasSubstr("duplicate key 'dtype' in a nested object"));
}

TEST_F(SafetensorsMalformed, MetadataNotAnObject) {
  EXPECT_THAT(refuse(safetensors_bytes(R"({"__metadata__": ["pt"]})", 0)),
              HasSubstr("'__metadata__' must be an object of strings, got array"));
}

TEST_F(SafetensorsMalformed, MetadataValueNotAString) {
  EXPECT_THAT(refuse(safetensors_bytes(R"({"__metadata__": {"format": "pt", "step": 3}})", 0)),
              HasSubstr("'__metadata__' value for key 'step' must be a string, got integer"));
}

TEST_F(SafetensorsMalformed, HugeNameIsShortenedInMessage) {
  const std::string name(5000, 'n');
  const std::string msg = refuse(safetensors_bytes("{\"" + name + "\": 1}", 0));
  EXPECT_THAT(msg, HasSubstr("...' (5000 bytes)"));
  EXPECT_LT(msg.size(), 1000u);
}

TEST(SafetensorsOpen, MissingFileNamesPathAndReason) {
  TempDir dir;
  const auto path = dir / "absent.safetensors";
  try {
    SafetensorsFile f(path);
    FAIL() << "opened a missing file";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr(path.string() + ": cannot open: No such file"));
  }
}

TEST(SafetensorsOpen, DirectoryIsNotARegularFile) {
  TempDir dir;
  try {
    SafetensorsFile f(dir.path());
    FAIL() << "opened a directory";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("not a regular file"));
  }
}

TEST(SafetensorsParseBuffer, NamesTheGivenNameWithoutAnyFile) {
  const std::string bytes = "\x01\x02";
  try {
    parse_safetensors_header(std::as_bytes(std::span(bytes)), "in-memory buffer");
    FAIL() << "parsed 2 bytes";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()), "in-memory buffer: truncated: the file is 2 bytes, too short for the "
                                     "8-byte header length");
  }
}

}  // namespace
}  // namespace fp4serve
