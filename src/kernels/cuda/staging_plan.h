// Where the weight loader (weight_upload.h) stages each piece of a weight: a pure planner over a
// ring of equal pinned staging buffers, with no CUDA in it, so that the CPU tests can check every
// decision the loader makes (tests/unit/kernels/cuda_weight_upload_test.cpp).
//
// An array (a packed weight's words, its scales, a plain tensor) is `rows` rows of `row_bytes`:
// column tiles, scale units, or single bytes. place() cuts it into pieces of whole rows, in order,
// each inside one buffer: first into what is left of the current buffer, then buffer after buffer
// round the ring. A piece that starts a buffer the loader was not in says so (enters_buffer, with
// the buffer it left): the loader must then mark the buffer it leaves busy until its copies are
// done, and wait until the buffer it enters has finished its own earlier copies before writing.
// A single row larger than a buffer makes every buffer grow to hold it (grows): the loader waits
// for all copies and reallocates; the larger size stays (a row is one column tile of a weight, at
// most a few MB for any real shape, so this happens only for odd shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fp4serve::kernels::cuda {

struct StagingPiece {
  int buffer = 0;              // the staging buffer the piece is written to
  std::size_t offset = 0;      // its byte offset in that buffer
  int64_t row0 = 0, row1 = 0;  // the array's rows [row0, row1)
  std::size_t bytes = 0;       // (row1 - row0) * row_bytes
  bool enters_buffer = false;  // the first piece in `buffer` since the loader moved to it
  int left_buffer = -1;        // with enters_buffer: the buffer the loader leaves
  bool grows = false;          // the buffers grew to buffer_bytes() before this piece (then buffer 0)
  bool operator==(const StagingPiece&) const = default;
};

class StagingPlanner {
 public:
  // `buffers` >= 1 buffers of `buffer_bytes` > 0 each; piece offsets aligned to `align`.
  explicit StagingPlanner(std::size_t buffer_bytes, int buffers = 2, std::size_t align = 256);

  // The pieces an array of `rows` rows of `row_bytes` is staged as (none when it is empty), in the
  // order the loader writes and copies them; the planner moves on past them.
  std::vector<StagingPiece> place(int64_t rows, std::size_t row_bytes);

  // Back to the start of buffer 0 with every buffer free (the loader released its buffers).
  void restart();

  std::size_t buffer_bytes() const { return buffer_bytes_; }
  int buffers() const { return buffers_; }
  int current() const { return current_; }
  std::size_t offset() const { return offset_; }

 private:
  std::size_t buffer_bytes_;
  int buffers_;
  std::size_t align_;
  int current_ = 0;
  std::size_t offset_ = 0;
};

}  // namespace fp4serve::kernels::cuda
