// Label validation shared by the CPU kernels: a label outside [0, classes) would index past the
// row of logits, so it is refused before anything is read or written.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace slurm_train::kernels {

inline void check_labels(int rows, int classes, const std::int32_t* labels) {
  for (int r = 0; r < rows; ++r) {
    if (labels[r] < 0 || labels[r] >= classes) {
      throw std::out_of_range("softmax_cross_entropy: row " + std::to_string(r) + " has label " +
                              std::to_string(labels[r]) + ", outside [0, " + std::to_string(classes) + ")");
    }
  }
}

}  // namespace slurm_train::kernels
