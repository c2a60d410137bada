#include "train/checkpoint/checkpoint_file.h"

#include <fmt/format.h>

#include <optional>
#include <thread>

#include "train/checkpoint/checkpoint_file_reader.h"
#include "train/io/crash_contained.h"

namespace slurm_train {

namespace {

void probe_uncontained(const std::string& path, CheckpointUse use) {
  switch (use) {
    case CheckpointUse::kRead: {
      CheckpointState probe;
      read_checkpoint_uncontained(path, probe, nullptr, CheckpointPass::kProbe);
      break;
    }
    case CheckpointUse::kVerify:
      verify_checkpoint_uncontained(path, CheckpointPass::kProbe);
      break;
    case CheckpointUse::kDescribe:
      describe_checkpoint_uncontained(path, CheckpointPass::kProbe);
      break;
    case CheckpointUse::kModel: {
      CheckpointState probe;
      read_model_uncontained(path, probe, CheckpointPass::kProbe);
      break;
    }
  }
}

const char* reader_name(CheckpointUse use) {
  switch (use) {
    case CheckpointUse::kRead:
      return "checkpoint-read";
    case CheckpointUse::kVerify:
      return "checkpoint-verify";
    case CheckpointUse::kDescribe:
      return "checkpoint-describe";
    case CheckpointUse::kModel:
      return "model-read";
  }
  return "";
}

// Refuses a file that crashes or hangs its reader in a child process (crash_contained.h).
void require_no_crash(const std::string& path, CheckpointUse use) {
  const ContainedRead read{reader_name(use), {path}, [&] { probe_uncontained(path, use); }};
  if (const auto crash = crash_in_child(read, time_limit_to_read(path)))
    throw CheckpointError(
        fmt::format("{}: reading it {} (a separate process reads it first: libhdf5 crashes or "
                    "loops forever on some damaged files); the file is damaged or not a checkpoint",
                    path, *crash));
}

}  // namespace

void read_checkpoint_file(const std::string& path, CheckpointState& s, const ModelLayout* expected) {
  require_no_crash(path, CheckpointUse::kRead);
  read_checkpoint_uncontained(path, s, expected, CheckpointPass::kRead);
}

CheckpointState read_checkpoint_file(const std::string& path) {
  CheckpointState s;
  read_checkpoint_file(path, s, nullptr);
  return s;
}

CheckpointState read_checkpoint_model(const std::string& path) {
  require_no_crash(path, CheckpointUse::kRead);
  CheckpointState s;
  read_checkpoint_uncontained(path, s, nullptr, CheckpointPass::kRead, /*optimizer_state=*/false);
  return s;
}

CheckpointState read_model_file(const std::string& path) {
  require_no_crash(path, CheckpointUse::kModel);
  CheckpointState s;
  read_model_uncontained(path, s, CheckpointPass::kRead);
  return s;
}

std::vector<std::string> verify_checkpoint_file(const std::string& path) {
  // The file's bytes are read and checksummed (no parsing: nothing here can crash) while the
  // separate process reads its structure; the datasets' checksums are then composed from them.
  // Where that process is a fork of this one, the read comes after it: a fork must not find a
  // second thread here.
  std::optional<SpanChecksums> spans;
  const auto read_spans = [&] {
    try {
      spans.emplace(path);
    } catch (const std::exception&) {
      // A read error: the dataset-by-dataset read below meets it again and names the dataset.
    }
  };
  {
    std::jthread reading;
    if (contained_reads_run_elsewhere()) reading = std::jthread(read_spans);
    try {
      require_no_crash(path, CheckpointUse::kVerify);
    } catch (const CheckpointError& e) {
      return {e.what()};
    }
  }
  if (!contained_reads_run_elsewhere()) read_spans();
  return verify_checkpoint_uncontained(path, CheckpointPass::kRead, spans ? &*spans : nullptr);
}

std::string describe_checkpoint_file(const std::string& path) {
  require_no_crash(path, CheckpointUse::kDescribe);
  return describe_checkpoint_uncontained(path, CheckpointPass::kRead);
}

bool run_checkpoint_probe(const std::string& reader, const std::string& path) {
  for (CheckpointUse use :
       {CheckpointUse::kRead, CheckpointUse::kVerify, CheckpointUse::kDescribe, CheckpointUse::kModel}) {
    if (reader != reader_name(use)) continue;
    try {
      probe_uncontained(path, use);
    } catch (...) {
      // A clean rejection: the caller's own read finds and reports it.
    }
    return true;
  }
  return false;
}

}  // namespace slurm_train
