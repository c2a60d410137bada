#include "train/loop/stop_votes.h"

namespace slurm_train {

void cast_stop_vote(int signal, double* votes) {
  if (signal > 0 && static_cast<std::size_t>(signal) < kStopVoteSlots) votes[signal] += 1.0;
}

StopVote counted_stop_votes(const double* votes) {
  StopVote vote;
  for (std::size_t s = 1; s < kStopVoteSlots; ++s)
    if (votes[s] > vote.ranks) vote = {static_cast<int>(s), static_cast<int>(votes[s])};
  return vote;
}

}  // namespace slurm_train
