// Saving and loading named tensors, models and optimizer state.
//
// Saves are atomic: the target is always absent, the previous file, or the complete file
// of one save, never a mix, even with many threads or processes saving to the same path.
// Each save writes to an unnamed file in the target's folder (O_TMPFILE), fsyncs it,
// links it under a name no other save uses, "<file>.tmp.<pid>.<tid>.<counter>", renames
// that over the target and fsyncs the folder. Where O_TMPFILE or /proc is unavailable the
// file carries that name from the start. A failed save (full disk, unwritable folder)
// removes its temporary file and is an IOError; the previous file is left intact. A save
// killed in the short window while its temporary file has a name leaves it behind; every
// save first removes "<file>.tmp.<pid>..." files of processes that no longer exist, so
// such a leftover lives only until the next save to the same path.
//
// Loading reads and validates the whole file before returning or changing anything: the
// magic number, the format version, a CRC-32 of the content, every length, name (no
// duplicates), dtype and shape, with element and byte counts computed with overflow
// checks and matched against the bytes stored. A corrupt, truncated or crafted file, a
// directory or an unreadable path is an IOError naming the path (and the entry and shape
// where one is at fault); no std:: exception escapes, an allocation that cannot be made is
// a baton::Error too. load_tensors() suits fuzzing: any bytes give tensors or an IOError.
#pragma once
#include <string>

#include "baton/nn/module.h"

namespace baton {
namespace optim { class Optimizer; }

namespace io {

void save_tensors(const std::string& path, const nn::NamedTensors& tensors);
nn::NamedTensors load_tensors(const std::string& path);

// A model's state_dict under "model.", the optimizer's state under "optimizer." with its
// kind ("sgd", "adam", ...) recorded alongside, and `epoch` under "meta.epoch".
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer = nullptr, int64_t epoch = 0);
// Restores what save_checkpoint wrote and returns the epoch. Every entry is checked
// against the model and the optimizer first: a checkpoint of another architecture, of
// another kind of optimizer (SGD state into Adam), without the optimizer state asked for,
// or with entries of no section, is a ValueError listing what does not match; a bad file is
// an IOError. After any failed load the model and the optimizer are unchanged. Files
// written before the optimizer kind was recorded load when their optimizer entries are
// exactly the state this optimizer keeps.
int64_t load_checkpoint(const std::string& path, nn::Module& model,
                        optim::Optimizer* optimizer = nullptr);

}  // namespace io
}  // namespace baton
