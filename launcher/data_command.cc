#include "launcher/data_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "train/data/data_import.h"
#include "train/data/idx.h"
#include "train/data/text_import.h"

namespace slurm_train {

namespace {

void report(const std::vector<ImportedFile>& files) {
  for (const auto& f : files) std::cout << fmt::format("wrote {} ({} samples)\n", f.path, f.samples);
}

void report(const ImportedText& t) {
  std::cout << fmt::format(
      "wrote {} ({} training and {} validation tokens, bytes; unigram entropy of the "
      "training split {:.3f} bits per byte)\n",
      t.path, t.train_tokens, t.validation_tokens, t.unigram_entropy_bits);
}

}  // namespace

void add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "prepare datasets");
  data->require_subcommand(1);
  CLI::App* import = data->add_subcommand("import", "convert a dataset to the HDF5 layout slurm-train reads");
  import->require_subcommand(1);

  struct Fashion {
    std::string from = kFashionMnistDir, out;
  };
  auto fashion = std::make_shared<Fashion>();
  CLI::App* fm = import->add_subcommand("fashion-mnist", "Fashion-MNIST's four IDX files -> OUT/train.h5, OUT/test.h5");
  fm->add_option("--from", fashion->from, "folder of the IDX files, plain or .gz (package dataset-fashion-mnist)")
      ->capture_default_str();
  fm->add_option("--out", fashion->out, "output folder")->required();
  fm->callback([fashion] { report(import_fashion_mnist(fashion->from, fashion->out)); });

  struct Idx {
    std::string images, labels, out;
  };
  auto idx = std::make_shared<Idx>();
  CLI::App* ix = import->add_subcommand("idx", "any IDX pair (MNIST and friends) -> one HDF5 file");
  ix->add_option("IMAGES", idx->images, "IDX file of the images (uint8, [N, ...]), plain or .gz")->required();
  ix->add_option("LABELS", idx->labels, "IDX file of the labels (uint8, [N])")->required();
  ix->add_option("--out", idx->out, "output HDF5 file (replaced whole when it exists)")
      ->required()
      ->check([](const std::string& out) {
        try {
          require_importable_output(out);
          return std::string();
        } catch (const IdxError& e) {
          return std::string(e.what());
        }
      });
  ix->callback([idx] { report({import_idx_pair(idx->images, idx->labels, idx->out, {})}); });

  struct Text {
    std::vector<std::string> files;
    std::string from = kFortunesDir, out;
    double validation_fraction = 0.1;
  };
  auto text = std::make_shared<Text>();
  const auto text_options = [text](CLI::App* cmd) {
    cmd->add_option("--out", text->out, "output folder")->required();
    cmd->add_option("--validation-fraction", text->validation_fraction,
                    "the last fraction of each file that goes to the validation split")
        ->capture_default_str();
  };
  CLI::App* tx =
      import->add_subcommand("text", "plain text files -> OUT/tokens.h5, byte-level tokens (vocabulary 256)");
  tx->add_option("FILE", text->files, "text files, in this order")->required();
  text_options(tx);
  tx->callback([text] { report(import_text(text->files, text->out, text->validation_fraction)); });

  CLI::App* fo = import->add_subcommand("fortunes", "the fortune cookie texts (package fortunes) -> OUT/tokens.h5");
  fo->add_option("--from", text->from, "folder of the fortune files")->capture_default_str();
  text_options(fo);
  fo->callback([text] { report(import_text(fortune_files(text->from), text->out, text->validation_fraction)); });
}

}  // namespace slurm_train
