// Reading and writing safetensors files (the format of Hugging Face's
// `safetensors`): an 8-byte little-endian header length N, N bytes of JSON
// mapping each tensor name to {dtype, shape, data_offsets} plus an optional
// "__metadata__" object of string values, then the raw little-endian data.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace headlab::core {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

// Integers (token ids, class labels) are stored as I64. They are not Tensors,
// whose dtypes are the floating-point ones the autograd engine computes in.
struct IntArray {
  Shape shape;
  std::vector<int64_t> values;  // row-major, numel_of(shape) of them
};
using NamedIntArrays = std::vector<std::pair<std::string, IntArray>>;

struct SafetensorsFile {
  NamedTensors tensors;     // the F32 and F64 entries, in file order of their data
  NamedIntArrays integers;  // the I64 entries, likewise
  Metadata metadata;
  const Tensor& get(const std::string& name) const;  // throws naming the missing tensor
  bool contains(const std::string& name) const;
};

// Thrown for any malformed file; the message says what is wrong and where.
struct SafetensorsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Serializes to bytes: the F32 / F64 tensors, then the I64 arrays; names
// unique across both.
std::vector<uint8_t> to_safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata,
                                          const NamedIntArrays& integers = {});
// Parses and checks everything: header length, JSON, dtypes, shapes,
// offsets, sizes, overlaps. Never trusts a declared size.
SafetensorsFile parse_safetensors(std::span<const uint8_t> bytes);

// Writes to `path` with core::write_file_atomic (atomic_file.h): refuses a
// path that is not a regular file or a new name. Throws std::runtime_error on
// failure and leaves any previous file untouched.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata,
                      const NamedIntArrays& integers = {});
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace headlab::core
