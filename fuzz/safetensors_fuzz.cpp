// libFuzzer target for the safetensors reader.
//
// Every input must either parse or be rejected with a SafetensorsError:
// never crash, leak, hang or throw anything else. What parses must survive
// a round trip: writing it and reading it back gives the same names, dtypes,
// shapes, bytes and metadata, and writing that again gives the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/safetensors.h"

namespace {

using namespace headlab::core;

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::size_t nbytes = static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype());
  return nbytes == 0 || std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), nbytes) == 0;
}

bool same_file(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    if (a.tensors[i].first != b.tensors[i].first || !same_tensor(a.tensors[i].second, b.tensors[i].second))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  SafetensorsFile file;
  try {
    file = parse_safetensors({data, size});
  } catch (const SafetensorsError&) {
    return 0;  // a clean rejection
  }
  const std::vector<uint8_t> written = to_safetensors_bytes(file.tensors, file.metadata, file.integers);
  const SafetensorsFile reread = parse_safetensors(written);
  if (!same_file(file, reread)) std::abort();
  if (to_safetensors_bytes(reread.tensors, reread.metadata, reread.integers) != written) std::abort();
  return 0;
}
