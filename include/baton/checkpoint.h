// Saving and loading named tensors, models and optimizer state.
//
// Files are written atomically: to a temporary file in the same folder, flushed to disk
// (fsync), then renamed over the target. A crash or a full disk leaves the previous file
// intact. Loading checks a magic number, the format version, every length and a CRC-32
// of the whole content: a corrupt or truncated file is an IOError naming it.
#pragma once
#include <string>

#include "baton/nn/module.h"

namespace baton {
namespace optim { class Optimizer; }

namespace io {

void save_tensors(const std::string& path, const nn::NamedTensors& tensors);
nn::NamedTensors load_tensors(const std::string& path);

// A model's state_dict under "model.", the optimizer's state under "optimizer.", and
// `epoch` under "meta.epoch".
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer = nullptr, int64_t epoch = 0);
// Restores what save_checkpoint wrote and returns the epoch. A checkpoint of another
// architecture is a ValueError listing the mismatched entries; nothing is changed then.
int64_t load_checkpoint(const std::string& path, nn::Module& model,
                        optim::Optimizer* optimizer = nullptr);

}  // namespace io
}  // namespace baton
