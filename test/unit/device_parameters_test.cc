#include "train/steps/device_parameters.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "train/models/gpt.h"
#include "train/models/model_layout.h"

using namespace slurm_train;

TEST_CASE("device parameters: the MLP's tensors start aligned on the device, each span in its packed place") {
  const std::vector<LayerLayout> packed = mlp_layout(MlpShape{13, {7, 5}, 3});
  const DeviceParameters d = aligned_device_parameters(packed, 128);
  REQUIRE(d.units.size() == packed.size());
  REQUIRE(d.spans.size() == 2 * packed.size());
  CHECK(d.host_count == packed.back().end());
  CHECK(d.device_count == d.units.back().end());
  for (std::size_t l = 0; l < packed.size(); ++l) {
    const LayerLayout &P = packed[l], &U = d.units[l];
    CHECK(U.in == P.in);
    CHECK(U.out == P.out);
    CHECK(U.weight % 128 == 0);
    CHECK(U.bias % 128 == 0);
    CHECK(d.spans[2 * l] == DeviceSpan{P.weight, U.weight, static_cast<std::size_t>(P.in * P.out)});
    CHECK(d.spans[2 * l + 1] == DeviceSpan{P.bias, U.bias, static_cast<std::size_t>(P.out)});
  }
  // The spans tile the packed layout and do not overlap on the device.
  std::size_t host = 0, device = 0;
  for (const DeviceSpan& s : d.spans) {
    CHECK(s.host == host);
    CHECK(s.device >= device);
    host += s.count, device = s.device + s.count;
  }
  CHECK(host == d.host_count);
  // The runs tile the device layout; a bias is exactly an undecayed run, and nothing else is.
  REQUIRE(d.runs.size() == 2 * packed.size());
  CHECK(d.runs.front().begin == 0);
  CHECK(d.runs.back().end == d.device_count);
  for (std::size_t i = 0; i < d.runs.size(); ++i) {
    if (i > 0) CHECK(d.runs[i].begin == d.runs[i - 1].end);
    const LayerLayout& U = d.units[i / 2];
    if (i % 2 == 0) {
      CHECK(d.runs[i].decay);
      CHECK(d.runs[i].begin <= U.weight);
      CHECK(d.runs[i].end == U.bias);
    } else {
      CHECK(d.runs[i] == DecayRun{U.bias, U.end(), false});
    }
  }
}

TEST_CASE("device parameters: the GPT's device layout is the packed one, its runs decay_runs'") {
  const GptConfig g{256, 16, 2, 2, 32};
  const ModelLayout model = gpt_model_layout(g);
  const DeviceParameters d = packed_device_parameters(model.layers, model.tensors);
  CHECK(d.host_count == model.parameters());
  CHECK(d.device_count == model.parameters());
  REQUIRE(d.spans.size() == 1);
  CHECK(d.spans[0] == DeviceSpan{0, 0, model.parameters()});
  CHECK(d.units.size() == model.layers.size());
  CHECK(d.runs == decay_runs(model.tensors));
}

TEST_CASE("device parameters: spans_within cuts the spans at a shard's ends and counts from its begin") {
  const std::vector<DeviceSpan> spans{{0, 0, 10}, {10, 16, 5}, {15, 32, 4}};
  CHECK(spans_within(spans, 0, 36) == spans);
  CHECK(spans_within(spans, 8, 18) == std::vector<DeviceSpan>{{8, 0, 2}, {10, 8, 2}});
  CHECK(spans_within(spans, 10, 16).empty());  // padding only
  CHECK(spans_within(spans, 33, 40) == std::vector<DeviceSpan>{{16, 0, 3}});
  CHECK(spans_within(spans, 5, 5).empty());
  // Shards cut anywhere move every parameter once.
  for (std::size_t cut = 0; cut <= 36; ++cut) {
    std::size_t moved = 0;
    for (const auto& part : {spans_within(spans, 0, cut), spans_within(spans, cut, 36)})
      for (const DeviceSpan& s : part) moved += s.count;
    CHECK(moved == 19);
  }
}
