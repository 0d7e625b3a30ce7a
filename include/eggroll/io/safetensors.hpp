// Checkpoints in the safetensors format: named tensors (F32, I8, I32) and a flat string map of
// metadata, written atomically and read back with every field of the header validated.
#pragma once
#include <map>
#include <string>

#include "eggroll/core/tensor.hpp"

namespace eggroll {

struct Checkpoint {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Layout: u64 little-endian header size N, N bytes of JSON header (padded with spaces to a
// multiple of 8), then the data buffer, tensors packed in name order without gaps. The file at
// `path` is replaced atomically (see atomic_write_file).
void write_safetensors(const std::string& path, const Checkpoint& ckpt);

// Throws Error "checkpoint 'path' is corrupt: ..." or "... is truncated: ..." for a file that is
// not a complete, well-formed safetensors file of the dtypes above.
Checkpoint read_safetensors(const std::string& path);

}  // namespace eggroll
