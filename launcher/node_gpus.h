// This node's GPUs as NVML reports them (gpu_checks.h's facts), and whether this process may open
// the device file of each GPU it was given (CUDA_VISIBLE_DEVICES: indexes or UUIDs).
#pragma once

#include <optional>
#include <string>

#include "launcher/gpu_checks.h"
#include "spank/jobenv/environment.h"

namespace slurm_train {

// Whether this node should have NVIDIA's driver: it has /dev/nvidiactl, or the tests' stand-in
// NVML is named (SLURM_TRAIN_NVML_LIBRARY). Where it should and NVML cannot be read, that is worth
// a line; on a CPU node, nothing.
bool nvidia_node();

// Null when NVML cannot be loaded or fails, with the reason in *why.
std::optional<NodeGpus> read_node_gpus(const Environment& env, std::string* why);

// doctor's GPU lines: check_node_gpus on what NVML reports for this build; nothing on a node
// without NVIDIA's driver; one WARN naming the reason where GPUs exist but NVML cannot be read.
std::vector<Check> node_gpu_checks(const Environment& env);

// Whether the GPU of NVML index `index` and UUID `uuid` is among CUDA_VISIBLE_DEVICES's entries
// (an index, a UUID or a prefix of one, as CUDA takes them). Unset: every GPU outside a job step,
// none inside one.
bool gpu_is_given(const Environment& env, unsigned index, const std::string& uuid);

}  // namespace slurm_train
