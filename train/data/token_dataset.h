// The token dataset a language model trains on, as `slurm-train data import text` writes it
// (text_import.h): /tokens uint8 [N], the training split first, then the validation split, with
// the attributes tokenizer, vocab_size, train_tokens and validation_tokens (train_tokens +
// validation_tokens = N) and unigram_entropy_bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace slurm_train {

struct TokenFileLayout {
  std::string path;
  std::int64_t vocab_size = 0;
  std::uint64_t train_tokens = 0, validation_tokens = 0;
  double unigram_entropy_bits = 0;  // of the training split; 0 when the file does not say
};

// Opens the file and checks its dataset and attributes without reading the tokens. Errors
// (h5::Error) name the file and what was expected.
TokenFileLayout inspect_token_file(const std::string& path);

// The tokens of one split: "train" or "validation".
std::vector<std::uint8_t> load_token_split(const std::string& path, const std::string& split);

}  // namespace slurm_train
