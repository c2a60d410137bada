// Where a model's parameters lie in GPU memory, against the packed (checkpoint) layout on the
// host: the GPT's device layout is the packed one; the MLP's starts every tensor at an aligned
// offset, because cuBLASLt's fastest kernels want 16-byte-aligned operands. The padding is in no
// tensor: zero, with a zero gradient. Pure: DeviceOptimizer (device_optimizer.h) copies by it.
#pragma once

#include <cstddef>
#include <vector>

#include "train/models/mlp.h"
#include "train/models/param_tensor.h"
#include "train/steps/decay_runs.h"

namespace slurm_train {

// `count` parameters at `host` in the packed layout and at `device` in the device's.
struct DeviceSpan {
  std::size_t host = 0, device = 0, count = 0;
  bool operator==(const DeviceSpan&) const = default;
};

struct DeviceParameters {
  std::size_t host_count = 0, device_count = 0;
  std::vector<DeviceSpan> spans;   // every parameter's place in both layouts, in device order
  std::vector<LayerLayout> units;  // what backward completes one at a time (the gradient buckets'), device offsets
  std::vector<DecayRun> runs;      // decayed or not, device offsets, tiling [0, device_count)
};

// The packed layout itself, of `tensors` in layout order; `units` in packed offsets.
DeviceParameters packed_device_parameters(const std::vector<LayerLayout>& units,
                                          const std::vector<ParamTensor>& tensors);

// The MLP's `layers` (mlp_layout) with every weight and bias starting at a multiple of `align`
// elements; weights decay, biases do not, the padding before a bias decays with its weight
// (which leaves it zero). Each layer is a unit.
DeviceParameters aligned_device_parameters(const std::vector<LayerLayout>& layers, std::size_t align);

// The parts of `spans` within the device range [begin, end), their `device` offsets counted from
// `begin`: what a copy between a host vector and a buffer holding that range moves.
std::vector<DeviceSpan> spans_within(const std::vector<DeviceSpan>& spans, std::size_t begin, std::size_t end);

}  // namespace slurm_train
