#include "train/steps/device_parameters.h"

#include <algorithm>

namespace slurm_train {

DeviceParameters packed_device_parameters(const std::vector<LayerLayout>& units,
                                          const std::vector<ParamTensor>& tensors) {
  DeviceParameters d;
  d.host_count = d.device_count = tensors.empty() ? 0 : tensors.back().offset + tensors.back().size;
  if (d.host_count > 0) d.spans = {{0, 0, d.host_count}};
  d.units = units;
  d.runs = decay_runs(tensors);
  return d;
}

DeviceParameters aligned_device_parameters(const std::vector<LayerLayout>& layers, std::size_t align) {
  const auto up = [align](std::size_t n) { return (n + align - 1) / align * align; };
  DeviceParameters d;
  std::size_t offset = 0;
  for (const LayerLayout& L : layers) {
    LayerLayout u = L;
    const std::size_t weights = static_cast<std::size_t>(L.in) * static_cast<std::size_t>(L.out);
    u.weight = up(offset);
    u.bias = up(u.weight + weights);
    d.spans.push_back({L.weight, u.weight, weights});
    d.spans.push_back({L.bias, u.bias, static_cast<std::size_t>(L.out)});
    d.runs.push_back({offset, u.bias, true});
    d.runs.push_back({u.bias, u.end(), false});
    d.units.push_back(u);
    offset = u.end();
  }
  d.host_count = layers.empty() ? 0 : layers.back().end();
  d.device_count = offset;
  return d;
}

std::vector<DeviceSpan> spans_within(const std::vector<DeviceSpan>& spans, std::size_t begin, std::size_t end) {
  std::vector<DeviceSpan> out;
  for (const DeviceSpan& s : spans) {
    const std::size_t lo = std::max(begin, s.device), hi = std::min(end, s.device + s.count);
    if (lo < hi) out.push_back({s.host + (lo - s.device), lo - begin, hi - lo});
  }
  return out;
}

}  // namespace slurm_train
