#include "train/model_file.h"

#include <fmt/format.h>

#include <filesystem>

#include "train/h5.h"

#ifndef SLURM_TRAIN_VERSION
#error "SLURM_TRAIN_VERSION must be defined by the build"
#endif

namespace slurm_train {

void save_model(const std::string& path, const std::vector<LayerLayout>& layers, const std::vector<float>& params,
                const std::string& config_toml) {
  const std::string tmp = path + ".tmp";
  {
    h5::Handle file = h5::create_file(tmp);
    h5::Handle group(H5_CHECK(H5Gcreate2(file, "/model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), tmp));
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const LayerLayout& L = layers[l];
      const hsize_t weight_shape[2] = {static_cast<hsize_t>(L.out), static_cast<hsize_t>(L.in)};
      const hsize_t bias_shape[1] = {static_cast<hsize_t>(L.out)};
      h5::write_float32(group, Mlp<float>::parameter_name(l, true), {weight_shape, weight_shape + 2}, &params[L.weight], tmp);
      h5::write_float32(group, Mlp<float>::parameter_name(l, false), {bias_shape, bias_shape + 1}, &params[L.bias], tmp);
    }
    h5::Handle meta(H5_CHECK(H5Gcreate2(file, "/meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), tmp));
    h5::write_string_attribute(meta, "program_version", SLURM_TRAIN_VERSION, tmp);
    h5::write_string_attribute(meta, "config", config_toml, tmp);
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL), tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw h5::Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, ec.message()));
}

}  // namespace slurm_train
