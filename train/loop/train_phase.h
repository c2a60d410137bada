// What a rank is doing, as the training loop reports it to the launcher's watchdog. A rank that
// stays in one phase too long is stuck; one that waits for its peers (a collective) points at
// the peer that is not there.
#pragma once

#include <cstdint>

namespace slurm_train {

enum class TrainPhase : std::uint32_t {
  kStartup = 0,  // MPI start-up, configuration, the watchdog's connections
  kLoadData,     // reading the datasets
  kBroadcast,    // rank 0's initial parameters to every rank
  kResume,       // agreeing on and loading the newest valid checkpoint
  kData,         // waiting for the next batch
  kForward,
  kBackward,
  kAllreduce,  // waiting for the gradient and loss all-reduce (which carries the stop votes)
  kOptimizer,
  kEvaluation,
  kEvaluationReduce,  // the evaluation's all-reduce
  kCheckpoint,        // waiting for a checkpoint write or copy
  kAgreement,         // a decision all ranks take together: to start (the restart guard), the exit code
  kProgram,           // `slurm-train exec`: the program runs (its output and heartbeat file are its progress)
  kFinished,
  kCount
};

inline const char* phase_name(TrainPhase p) {
  switch (p) {
    case TrainPhase::kStartup:
      return "start-up";
    case TrainPhase::kLoadData:
      return "loading data";
    case TrainPhase::kBroadcast:
      return "parameter broadcast";
    case TrainPhase::kResume:
      return "resume";
    case TrainPhase::kData:
      return "next batch";
    case TrainPhase::kForward:
      return "forward";
    case TrainPhase::kBackward:
      return "backward";
    case TrainPhase::kAllreduce:
      return "gradient all-reduce";
    case TrainPhase::kOptimizer:
      return "optimizer";
    case TrainPhase::kEvaluation:
      return "evaluation";
    case TrainPhase::kEvaluationReduce:
      return "evaluation all-reduce";
    case TrainPhase::kCheckpoint:
      return "checkpoint";
    case TrainPhase::kAgreement:
      return "agreement of the ranks";
    case TrainPhase::kProgram:
      return "program";
    case TrainPhase::kFinished:
      return "finished";
    default:
      return "unknown";
  }
}

// Phases in which a rank only waits for the others (a collective).
inline bool waits_for_peers(TrainPhase p) {
  return p == TrainPhase::kBroadcast || p == TrainPhase::kResume || p == TrainPhase::kAllreduce ||
         p == TrainPhase::kEvaluationReduce || p == TrainPhase::kAgreement;
}

}  // namespace slurm_train
