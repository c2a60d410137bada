// `slurm-train data import text`: plain text to the HDF5 token dataset a language model trains
// on. Tokens are bytes (vocabulary 256: any text, any encoding, no tokenizer to ship). One file,
// <out>/tokens.h5:
//   /tokens  uint8 [N], chunked and compressed: the training split, then the validation split
//   attributes: tokenizer "bytes", vocab_size 256, train_tokens, validation_tokens,
//   validation_fraction, split (in words), sources (absolute paths), source_bytes,
//   unigram_entropy_bits (of the training split: the loss, in bits per byte, of a model that
//   knows only byte frequencies; a language model must get well below it).
// Each source's last validation_fraction goes to the validation split, so that both splits hold
// some of every source.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace slurm_train {

struct TextImportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// How many of a source's `bytes` go to validation: round(bytes * fraction), and at least one
// byte each way when the source has two or more. Throws TextImportError unless 0 <= fraction < 1.
std::uint64_t validation_bytes(std::uint64_t bytes, double fraction);

// Bits per byte of the byte distribution `counts` (0 for no bytes).
double unigram_entropy_bits(const std::array<std::uint64_t, 256>& counts);

struct ImportedText {
  std::string path;
  std::uint64_t train_tokens = 0, validation_tokens = 0;
  double unigram_entropy_bits = 0;
};

// Reads every file (an unreadable or empty one is an error naming it) and writes
// out_dir/tokens.h5 through a temporary file, fsynced and renamed over it.
ImportedText import_text(const std::vector<std::string>& files, const std::string& out_dir, double validation_fraction);

// The text files of a fortune folder (package fortunes: every file but the .dat indexes and
// the .u8 links), sorted by name. Throws TextImportError naming the folder when it has none.
std::vector<std::string> fortune_files(const std::string& dir);

}  // namespace slurm_train
