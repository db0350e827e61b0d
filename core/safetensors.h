// Reading and writing safetensors files (the format of Hugging Face's
// `safetensors`): an 8-byte little-endian header length N, N bytes of JSON
// mapping each tensor name to {dtype, shape, data_offsets} plus an optional
// "__metadata__" object of string values, then the raw little-endian data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

class AtomicFileWriter;  // core/atomic_file.h

// A safetensors file written slice by slice, for a dump larger than memory:
// every entry's name, shape and type first, then each entry's rows (along
// axis 0) in any order and any pieces, then finish(), which makes the file
// appear atomically (core::AtomicFileWriter). Rows never written read as 0.
class SafetensorsStream {
 public:
  struct Declared {
    std::string name;
    Shape shape;  // at least one axis
    DType dtype = DType::f32;
    bool integer = false;  // I64 instead of dtype
  };
  // Throws std::invalid_argument for a reserved or repeated name, and what
  // AtomicFileWriter throws for the path.
  SafetensorsStream(const std::string& path, std::vector<Declared> entries, const Metadata& metadata);
  ~SafetensorsStream();
  // rows [n, shape[1:]...] of the entry's dtype, stored as rows first .. first+n-1.
  void write_rows(const std::string& name, int64_t first, const Tensor& rows);
  void write_rows(const std::string& name, int64_t first, std::span<const int64_t> values);
  void finish();

 private:
  struct Placed {
    Declared entry;
    uint64_t begin = 0, row_bytes = 0;
  };
  const Placed& placed(const std::string& name, int64_t first, int64_t rows, bool integer) const;
  std::vector<Placed> entries_;
  std::unique_ptr<AtomicFileWriter> file_;
};

}  // namespace headlab::core
