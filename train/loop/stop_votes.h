// A stop request (a preemption signal) folded into the step's loss all-reduce: every rank adds
// one to the slot of the signal it received, so that all ranks see the same sums, stop after the
// same step even when the signal reached them at different times, and know which signal reached
// how many of them. No collective of its own.
#pragma once

#include <cstddef>

namespace slurm_train {

constexpr std::size_t kStopVoteSlots = 65;  // signal numbers 1 to 64; slot 0 unused

struct StopVote {
  int signal = 0;  // 0: no rank asked to stop
  int ranks = 0;   // how many received it
};

// Adds this rank's signal (0: none, or out of range: ignored) to votes[kStopVoteSlots].
void cast_stop_vote(int signal, double* votes);

// After the sum over ranks: the signal the most ranks received, the lowest number on a tie.
StopVote counted_stop_votes(const double* votes);

}  // namespace slurm_train
