#include "kernels/cuda/staging_plan.h"

#include <algorithm>
#include <stdexcept>

namespace fp4serve::kernels::cuda {

StagingPlanner::StagingPlanner(std::size_t buffer_bytes, int buffers, std::size_t align)
    : buffer_bytes_(buffer_bytes), buffers_(buffers), align_(align) {
  if (buffer_bytes == 0 || buffers < 1 || align == 0)
    throw std::invalid_argument("staging planner: needs at least one buffer of some bytes");
}

void StagingPlanner::restart() {
  current_ = 0;
  offset_ = 0;
}

std::vector<StagingPiece> StagingPlanner::place(int64_t rows, std::size_t row_bytes) {
  std::vector<StagingPiece> pieces;
  if (rows <= 0 || row_bytes == 0) return pieces;
  bool grew = false;
  if (row_bytes > buffer_bytes_) {
    // One row does not fit any buffer: all of them grow (the loader drains and reallocates them),
    // and staging starts again at buffer 0.
    buffer_bytes_ = (row_bytes + align_ - 1) / align_ * align_;
    current_ = 0;
    offset_ = 0;
    grew = true;
  }
  int64_t row = 0;
  while (row < rows) {
    StagingPiece p;
    std::size_t room = offset_ < buffer_bytes_ ? buffer_bytes_ - offset_ : 0;
    if (room < row_bytes) {
      p.enters_buffer = true;
      p.left_buffer = current_;
      current_ = (current_ + 1) % buffers_;
      offset_ = 0;
      room = buffer_bytes_;
    }
    const int64_t fit = static_cast<int64_t>(room / row_bytes);
    const int64_t take = std::min(fit, rows - row);
    p.buffer = current_;
    p.offset = offset_;
    p.row0 = row;
    p.row1 = row + take;
    p.bytes = static_cast<std::size_t>(take) * row_bytes;
    p.grows = grew;
    grew = false;
    pieces.push_back(p);
    offset_ += (p.bytes + align_ - 1) / align_ * align_;
    row += take;
  }
  return pieces;
}

}  // namespace fp4serve::kernels::cuda
