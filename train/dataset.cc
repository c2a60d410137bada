#include "train/dataset.h"

#include <fmt/format.h>

#include <cmath>

#include "train/h5.h"

namespace slurm_train {

Dataset load_dataset(const DatasetSpec& spec) {
  const std::string& path = spec.path;
  if (spec.num_classes < 2)
    throw std::invalid_argument(fmt::format("data: num_classes = {} (expected at least 2)", spec.num_classes));
  h5::Handle file = h5::open_file(path, H5F_ACC_RDONLY);
  h5::Handle features = h5::open_dataset(file, spec.features, path);
  h5::Handle labels = h5::open_dataset(file, spec.labels, path);
  const std::string fctx = path + ":" + spec.features, lctx = path + ":" + spec.labels;

  const auto fshape = h5::dataset_shape(features, fctx);
  const auto lshape = h5::dataset_shape(labels, lctx);
  if (fshape.empty() || fshape[0] == 0)
    throw h5::Error(fmt::format("{}: the features dataset is empty (expected shape [N, ...])", fctx));
  if (lshape.size() != 1)
    throw h5::Error(fmt::format("{}: labels have {} dimensions (expected shape [N])", lctx, lshape.size()));
  if (lshape[0] != fshape[0])
    throw h5::Error(fmt::format("{} has {} samples but {} has {} labels", fctx, fshape[0], lctx, lshape[0]));

  Dataset d;
  d.path = path;
  d.count = fshape[0];
  d.feature_size = 1;
  for (std::size_t i = 1; i < fshape.size(); ++i) d.feature_size *= fshape[i];
  d.num_classes = spec.num_classes;

  h5::Handle ftype(H5_CHECK(H5Dget_type(features), fctx));
  const H5T_class_t fclass = H5Tget_class(ftype);
  if (fclass == H5T_INTEGER && H5Tget_size(ftype) == 1 && H5Tget_sign(ftype) == H5T_SGN_NONE) {
    d.features_u8.resize(d.count * d.feature_size);
    H5_CHECK(H5Dread(features, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.features_u8.data()), fctx);
  } else if (fclass == H5T_FLOAT) {
    d.features_f32.resize(d.count * d.feature_size);
    H5_CHECK(H5Dread(features, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.features_f32.data()), fctx);
  } else {
    throw h5::Error(fmt::format("{}: features must be uint8 or floating point", fctx));
  }

  h5::Handle ltype(H5_CHECK(H5Dget_type(labels), lctx));
  if (H5Tget_class(ltype) != H5T_INTEGER)
    throw h5::Error(fmt::format("{}: labels must be integers", lctx));
  d.labels.resize(d.count);
  H5_CHECK(H5Dread(labels, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.labels.data()), lctx);
  for (std::size_t i = 0; i < d.count; ++i) {
    if (d.labels[i] < 0 || d.labels[i] >= spec.num_classes)
      throw h5::Error(fmt::format("{}: label {} of sample {} is outside [0, {}) (data.num_classes)", lctx,
                                  d.labels[i], i, spec.num_classes));
  }
  return d;
}

void normalized_rows(const Dataset& d, std::size_t begin, std::size_t rows, Normalization norm, std::vector<float>& x,
                     std::vector<std::int32_t>& y) {
  x.resize(rows * d.feature_size);
  y.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < d.feature_size; ++j) x[i * d.feature_size + j] = (d.raw(begin + i, j) - norm.mean) * norm.inv_stddev;
    y[i] = d.labels[begin + i];
  }
}

Normalization normalization_of(const Dataset& d) {
  double sum = 0.0, sum_sq = 0.0;
  const std::size_t n = d.count * d.feature_size;
  for (std::size_t k = 0; k < n; ++k) {
    const double x = d.is_uint8() ? d.features_u8[k] / 255.0 : d.features_f32[k];
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / static_cast<double>(n);
  const double variance = std::max(sum_sq / static_cast<double>(n) - mean * mean, 1e-12);
  return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(variance))};
}

}  // namespace slurm_train
