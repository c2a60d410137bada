#include "train/data/text_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "train/io/durable_file.h"
#include "train/io/h5.h"
#include "train/io/memory_budget.h"

namespace slurm_train {

namespace fs = std::filesystem;

std::uint64_t validation_bytes(std::uint64_t bytes, double fraction) {
  if (!(fraction >= 0 && fraction < 1))
    throw TextImportError(fmt::format("--validation-fraction {}: expected a fraction in [0, 1)", fraction));
  if (fraction == 0 || bytes < 2) return 0;
  const auto n = static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) * fraction));
  return std::clamp<std::uint64_t>(n, 1, bytes - 1);
}

double unigram_entropy_bits(const std::array<std::uint64_t, 256>& counts) {
  std::uint64_t total = 0;
  for (const auto c : counts) total += c;
  double h = 0;
  for (const auto c : counts)
    if (c > 0) {
      const double p = static_cast<double>(c) / static_cast<double>(total);
      h -= p * std::log2(p);
    }
  return h;
}

ImportedText import_text(const std::vector<std::string>& files, const std::string& out_dir,
                         double validation_fraction) {
  if (files.empty()) throw TextImportError("no text files to import");
  validation_bytes(0, validation_fraction);  // the fraction's check, before anything is read
  // The text is held twice at most (the splits, then the tokens): refused before any is read
  // when memory cannot hold that.
  std::uint64_t total = 0;
  for (const auto& file : files) {
    std::error_code ec;
    const auto size = fs::is_regular_file(file, ec) ? fs::file_size(file, ec) : 0;
    if (!ec) total += size;
  }
  require_memory(fmt::format("importing {} text file(s) of {}", files.size(), format_bytes(total)), 2 * total,
                 "the training and validation splits, then the tokens in one piece", current_memory_facts());
  std::vector<std::uint8_t> train, validation;
  std::vector<std::string> sources;
  std::vector<std::int64_t> sizes;
  for (const auto& file : files) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) throw TextImportError(fmt::format("'{}' is not a readable file", file));
    const std::uintmax_t size = fs::file_size(file, ec);
    std::ifstream in(file, std::ios::binary);
    std::vector<std::uint8_t> bytes(ec ? 0 : size);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (ec || !in || in.gcount() != static_cast<std::streamsize>(bytes.size()))
      throw TextImportError(fmt::format("cannot read '{}'{}", file, ec ? ": " + ec.message() : ""));
    if (bytes.empty()) throw TextImportError(fmt::format("'{}' is empty", file));
    const std::uint64_t v = validation_bytes(bytes.size(), validation_fraction);
    train.insert(train.end(), bytes.begin(), bytes.end() - static_cast<std::ptrdiff_t>(v));
    validation.insert(validation.end(), bytes.end() - static_cast<std::ptrdiff_t>(v), bytes.end());
    sources.push_back(fs::absolute(file).string());
    sizes.push_back(static_cast<std::int64_t>(bytes.size()));
  }
  std::array<std::uint64_t, 256> counts{};
  for (const auto b : train) ++counts[b];
  ImportedText result;
  result.train_tokens = train.size();
  result.validation_tokens = validation.size();
  result.unigram_entropy_bits = unigram_entropy_bits(counts);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw TextImportError(fmt::format("cannot create the output folder '{}': {}", out_dir, ec.message()));
  result.path = (fs::path(out_dir) / "tokens.h5").string();

  std::vector<std::uint8_t> tokens = std::move(train);
  tokens.insert(tokens.end(), validation.begin(), validation.end());
  // A failed import leaves nothing behind, and never a half-written file in place of a good one.
  write_file_durably(result.path, [&](const FilePath& temporary) {
    const std::string& tmp = temporary.shown;  // for messages
    h5::Handle file = h5::create_file(temporary);
    h5::write_uint8(file, "/tokens", {tokens.size()}, tokens.data(), tmp);
    h5::write_string_attribute(file, "tokenizer", "bytes", tmp);
    h5::write_int64_attribute(file, "vocab_size", 256, tmp);
    h5::write_int64_attribute(file, "train_tokens", static_cast<std::int64_t>(result.train_tokens), tmp);
    h5::write_int64_attribute(file, "validation_tokens", static_cast<std::int64_t>(result.validation_tokens), tmp);
    h5::write_double_attribute(file, "validation_fraction", validation_fraction, tmp);
    h5::write_string_attribute(file, "split",
                               "tokens[0, train_tokens) are the training split, the rest the validation split; each "
                               "source's last validation_fraction is in the validation split",
                               tmp);
    h5::write_string_list_attribute(file, "sources", sources, tmp);
    h5::write_int64_list_attribute(file, "source_bytes", sizes, tmp);
    h5::write_double_attribute(file, "unigram_entropy_bits", result.unigram_entropy_bits, tmp);
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL), tmp);
    H5_CHECK(H5Fclose(file.release()), tmp);  // the close writes too: its failure counts
  });
  return result;
}

std::vector<std::string> fortune_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw TextImportError(
        fmt::format("'{}' is not a folder (install the Debian package fortunes, or give --from DIR)", dir));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_symlink() || !entry.is_regular_file() || entry.path().extension() == ".dat" ||
        entry.path().extension() == ".u8")
      continue;
    files.push_back(entry.path().string());
  }
  if (ec) throw TextImportError(fmt::format("cannot list '{}': {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  if (files.empty()) throw TextImportError(fmt::format("'{}' holds no fortune files", dir));
  return files;
}

}  // namespace slurm_train
