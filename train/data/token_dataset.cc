#include "train/data/token_dataset.h"

#include <fmt/format.h>

#include "train/io/h5.h"

namespace slurm_train {

namespace {

constexpr const char* kWhat = "a token dataset written by `slurm-train data import text`";

std::int64_t int_attribute(hid_t object, const char* name, const std::string& where) {
  if (H5Aexists(object, name) <= 0)
    throw h5::Error(fmt::format("{}: attribute '{}' is missing; expected {}", where, name, kWhat));
  h5::Handle attr(H5_CHECK(H5Aopen(object, name, H5P_DEFAULT), where));
  const h5::Extent e = h5::attribute_extent(attr, where);
  const bool one = !e.null && (e.shape.empty() || (e.shape.size() == 1 && e.shape[0] == 1));
  if (!one || e.type_class != H5T_INTEGER || e.type_size > 8)
    throw h5::Error(fmt::format("{}: attribute '{}' holds {}; expected one integer", where, name, e.describe()));
  std::int64_t v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v), where);
  return v;
}

}  // namespace

TokenFileLayout inspect_token_file(const std::string& path) {
  h5::silence_default_error_printing();
  TokenFileLayout t;
  t.path = path;
  h5::Handle file = h5::open_file(path, H5F_ACC_RDONLY);
  if (!h5::has_dataset(file, "/tokens"))
    throw h5::Error(fmt::format("{}: has no dataset /tokens; expected {} (model.kind = \"gpt\")", path, kWhat));
  const std::string where = path + ": /tokens";
  h5::Handle tokens = h5::open_dataset(file, "/tokens", path);
  const h5::Extent e = h5::dataset_extent(tokens, where);
  if (e.null || e.shape.size() != 1 || e.type_class != H5T_INTEGER || e.type_size != 1)
    throw h5::Error(fmt::format("{}: holds {}; expected uint8 [N] ({})", where, e.describe(), kWhat));
  t.vocab_size = int_attribute(file, "vocab_size", path);
  const std::int64_t train = int_attribute(file, "train_tokens", path);
  const std::int64_t validation = int_attribute(file, "validation_tokens", path);
  if (t.vocab_size != 256)
    throw h5::Error(fmt::format("{}: vocab_size is {}; expected 256 (byte tokens)", path, t.vocab_size));
  if (train < 0 || validation < 0 || static_cast<std::uint64_t>(train + validation) != e.shape[0])
    throw h5::Error(fmt::format("{}: train_tokens {} + validation_tokens {} is not the {} tokens of /tokens", path,
                                train, validation, e.shape[0]));
  t.train_tokens = static_cast<std::uint64_t>(train);
  t.validation_tokens = static_cast<std::uint64_t>(validation);
  if (H5Aexists(file, "unigram_entropy_bits") > 0) {
    h5::Handle attr(H5_CHECK(H5Aopen(file, "unigram_entropy_bits", H5P_DEFAULT), path));
    const h5::Extent a = h5::attribute_extent(attr, path);
    if (a.is_scalar() && a.type_class == H5T_FLOAT)
      H5_CHECK(H5Aread(attr, H5T_NATIVE_DOUBLE, &t.unigram_entropy_bits), path);
  }
  return t;
}

std::vector<std::uint8_t> load_token_split(const std::string& path, const std::string& split) {
  const TokenFileLayout t = inspect_token_file(path);
  const bool train = split == "train";
  if (!train && split != "validation")
    throw std::invalid_argument(fmt::format("token split '{}': expected train or validation", split));
  const hsize_t begin = train ? 0 : t.train_tokens;
  const hsize_t count = train ? t.train_tokens : t.validation_tokens;
  std::vector<std::uint8_t> out(count);
  if (count == 0) return out;
  const std::string where = path + ": /tokens";
  h5::Handle file = h5::open_file(path, H5F_ACC_RDONLY);
  h5::Handle tokens = h5::open_dataset(file, "/tokens", path);
  h5::Handle space(H5_CHECK(H5Dget_space(tokens), where));
  H5_CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, &begin, nullptr, &count, nullptr), where);
  h5::Handle memory(H5_CHECK(H5Screate_simple(1, &count, nullptr), where));
  H5_CHECK(H5Dread(tokens, H5T_NATIVE_UINT8, memory, space, H5P_DEFAULT, out.data()), where);
  return out;
}

}  // namespace slurm_train
