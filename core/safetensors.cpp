#include "core/safetensors.h"

#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

namespace headlab::core {
namespace {

using json = nlohmann::json;

// Tensor bytes are copied as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "headlab's safetensors code assumes a little-endian host");

// Python's safetensors refuses headers over 100 MB: a larger length means a
// corrupt file, and trusting it would allocate whatever the file claims.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests three deep (root, entry, shape); deeper is never valid.
constexpr int kMaxJsonDepth = 8;
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

[[noreturn]] void fail(const std::string& what) { throw SafetensorsError(what); }

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }
std::string tensor_named(std::string_view name) { return "tensor " + in_quotes(name); }

// A JSON value for an error message, cut short so a hostile header cannot
// produce a megabyte-long message.
std::string brief(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

// The dtypes a file may hold: Tensor's two, and I64 for IntArray.
enum class Stored { f32, f64, i64 };

Stored stored_of(DType dtype) { return dtype == DType::f32 ? Stored::f32 : Stored::f64; }
const char* stored_name(Stored kind) { return kind == Stored::f32 ? "F32" : kind == Stored::f64 ? "F64" : "I64"; }
uint64_t stored_size(Stored kind) { return kind == Stored::f32 ? 4 : 8; }

// ---------------------------------------------------------------- writing

// One entry to write: where its bytes are and how the header describes them.
struct Outgoing {
  const std::string& name;
  Stored kind;
  const Shape& shape;
  const void* data;
  uint64_t nbytes;
};

std::string json_string(const std::string& text, const std::string& what) {
  try {
    return json(text).dump();
  } catch (const json::type_error&) {
    throw std::invalid_argument(what + " is not valid UTF-8");
  }
}

void append_u64_le(std::vector<uint8_t>& out, uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) out.push_back(static_cast<uint8_t>(value >> (8 * byte)));
}

std::string shape_json(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string metadata_json(const Metadata& metadata) {
  std::string text = "\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    if (!first) text += ',';
    first = false;
    text += json_string(key, "metadata key " + in_quotes(key)) + ":" +
            json_string(value, "metadata value for key " + in_quotes(key));
  }
  return text + "}";
}

// ---------------------------------------------------------------- parsing

uint64_t read_u64_le(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int byte = 7; byte >= 0; --byte) value = (value << 8) | bytes[byte];
  return value;
}

struct Header {
  json root;
  std::vector<std::string> names;  // top-level keys in file order
};

// Parses the JSON, refusing duplicate keys (nlohmann would silently keep the
// last one) and absurd nesting, and remembering the top-level key order.
Header parse_header(std::span<const uint8_t> text) {
  Header header;
  std::vector<std::set<std::string>> open_objects;  // keys seen so far in each object being parsed
  auto watch = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) fail("the header nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end) open_objects.pop_back();
    if (event == json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      const bool top = depth == 1;  // a key of the root object
      if (!open_objects.back().insert(key).second) {
        if (top) fail("the header lists " + in_quotes(key) + " twice");
        std::string where = "a nested object";  // only when the root is not an object
        if (!header.names.empty())
          where = header.names.back() == kMetadataKey ? "__metadata__"
                                                      : "the entry of " + tensor_named(header.names.back());
        fail("key " + in_quotes(key) + " appears twice in " + where);
      }
      if (top) header.names.push_back(key);
    }
    return true;
  };
  try {
    header.root = json::parse(text.begin(), text.end(), watch);
  } catch (const json::parse_error& e) {
    if (e.byte > text.size()) fail("the header is not valid JSON (it ends too early)");
    fail("the header is not valid JSON (error at byte " + std::to_string(e.byte) + " of " +
         std::to_string(text.size()) + ")");
  } catch (const json::exception&) {  // e.g. a number too large for a double
    fail("the header is not valid JSON (a number is out of range)");
  }
  if (!header.root.is_object()) fail("the header is not a JSON object but " + brief(header.root));
  return header;
}

Metadata read_metadata(const json& value) {
  Metadata metadata;
  if (value.is_null()) return metadata;  // Python's reader accepts null: no metadata
  if (!value.is_object()) fail("__metadata__ is not an object of strings but " + brief(value));
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) fail("__metadata__ value for key " + in_quotes(key) + " is not a string but " + brief(item));
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

bool non_negative_integer(const json& value, uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() == 0) {  // "-0"
    out = 0;
    return true;
  }
  return false;
}

struct Entry {
  std::string name;
  Stored kind = Stored::f32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

const json& field(const json& entry, const char* key, const std::string& name) {
  const auto it = entry.find(key);
  if (it == entry.end()) fail(tensor_named(name) + " has no \"" + key + "\" field");
  return *it;
}

Stored read_dtype(const json& value, const std::string& name) {
  if (!value.is_string()) fail(tensor_named(name) + ": \"dtype\" is not a string but " + brief(value));
  const auto& text = value.get_ref<const std::string&>();
  for (Stored kind : {Stored::f32, Stored::f64, Stored::i64})
    if (text == stored_name(kind)) return kind;
  fail(tensor_named(name) + " has dtype " + brief(value) + "; headlab reads only F32, F64 and I64");
}

// Every product of axis sizes (zero-length axes counted as one, since
// contiguous strides are such products), times the dtype's size, fits int64.
Shape read_shape(const json& value, const std::string& name, Stored kind) {
  if (!value.is_array()) fail(tensor_named(name) + ": \"shape\" is not an array but " + brief(value));
  Shape shape;
  shape.reserve(value.size());
  uint64_t extent = stored_size(kind);
  for (const json& axis : value) {
    uint64_t size = 0;
    if (!non_negative_integer(axis, size))
      fail(tensor_named(name) + " has shape " + brief(value) + " with an entry " + brief(axis) +
           " that is not a non-negative integer");
    const uint64_t factor = std::max<uint64_t>(size, 1);
    if (size > kMaxInt64 || extent > kMaxInt64 / factor)
      fail(tensor_named(name) + " has shape " + brief(value) + " whose element count overflows 64 bits");
    extent *= factor;
    shape.push_back(static_cast<int64_t>(size));
  }
  return shape;
}

Entry read_entry(const std::string& name, const json& value, uint64_t buffer_size) {
  if (!value.is_object()) fail(tensor_named(name) + ": the entry is not a JSON object but " + brief(value));
  Entry entry{name, read_dtype(field(value, "dtype", name), name), {}, 0, 0};
  entry.shape = read_shape(field(value, "shape", name), name, entry.kind);
  const json& offsets = field(value, "data_offsets", name);
  if (!offsets.is_array() || offsets.size() != 2 || !non_negative_integer(offsets[0], entry.begin) ||
      !non_negative_integer(offsets[1], entry.end))
    fail(tensor_named(name) + ": \"data_offsets\" is not [begin, end] of non-negative integers but " + brief(offsets));
  const std::string range = "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
  if (entry.begin > entry.end) fail(tensor_named(name) + " has " + range + " that end before they begin");
  if (entry.end > buffer_size)
    fail(tensor_named(name) + " has " + range + " beyond the data buffer of " + std::to_string(buffer_size) + " bytes");
  const uint64_t needed = static_cast<uint64_t>(numel_of(entry.shape)) * stored_size(entry.kind);
  if (entry.end - entry.begin != needed)
    fail(tensor_named(name) + " has " + range + " spanning " + std::to_string(entry.end - entry.begin) +
         " bytes, but dtype " + stored_name(entry.kind) + " and shape " + to_string(entry.shape) + " need " +
         std::to_string(needed) + " bytes");
  return entry;
}

// Like Python's reader: the tensors must tile the buffer exactly, no
// overlap (two tensors aliasing bytes) and no holes (bytes nobody reads).
void check_tiling(const std::vector<Entry>& sorted, uint64_t buffer_size) {
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : sorted) {
    if (entry.begin < covered)
      fail(tensor_named(entry.name) + " overlaps " + tensor_named(previous->name) + ": it starts at byte " +
           std::to_string(entry.begin) + ", before byte " + std::to_string(covered) + " where the other ends");
    if (entry.begin > covered)
      fail("bytes [" + std::to_string(covered) + ", " + std::to_string(entry.begin) +
           ") of the data buffer belong to no tensor (a hole before " + tensor_named(entry.name) + ")");
    covered = entry.end;
    previous = &entry;
  }
  if (covered != buffer_size)
    fail("bytes [" + std::to_string(covered) + ", " + std::to_string(buffer_size) +
         ") at the end of the data buffer belong to no tensor");
}

// The 8-byte header length against the limit and the bytes that follow it.
void check_header_length(uint64_t header_size, uint64_t after_length) {
  if (header_size > kMaxHeaderBytes)
    fail("the header length " + std::to_string(header_size) + " is absurd (over the limit of " +
         std::to_string(kMaxHeaderBytes) + " bytes)");
  if (header_size > after_length)
    fail("the header length " + std::to_string(header_size) + " is larger than the " + std::to_string(after_length) +
         " bytes that follow it in the file");
}

// ---------------------------------------------------------------- files

struct FileDescriptor {
  int fd;
  ~FileDescriptor() { ::close(fd); }
};

std::string errno_text() { return std::strerror(errno); }

std::vector<uint8_t> read_file(const std::string& path) {
  // A message about a file names the file, not this function.
  const std::string where = in_quotes(path);
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, forever,
  // before fstat could refuse it; on a regular file it changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(where + " cannot be opened: " + errno_text());
  const FileDescriptor guard{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw std::runtime_error(where + " cannot be examined: " + errno_text());
  if (!S_ISREG(info.st_mode)) throw std::runtime_error(where + " is not a regular file");
  // The 8-byte header length first: a large file that is no safetensors
  // file is refused before it is read.
  std::vector<uint8_t> bytes(8);
  std::size_t filled = 0;
  auto read_up_to = [&](std::size_t limit) {
    while (filled < limit) {
      const ssize_t got = ::read(fd, bytes.data() + filled, limit - filled);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw std::runtime_error(where + " cannot be read: " + errno_text());
      if (got == 0) return false;
      filled += static_cast<std::size_t>(got);
    }
    return true;
  };
  if (read_up_to(8) && info.st_size >= 8)
    check_header_length(read_u64_le(bytes.data()), static_cast<uint64_t>(info.st_size) - 8);
  // The size is only a hint: read until end of file.
  for (;;) {
    if (filled == bytes.size()) bytes.resize(std::max<std::size_t>(bytes.size() * 2, static_cast<std::size_t>(info.st_size) + 1));
    if (!read_up_to(bytes.size())) break;
  }
  bytes.resize(filled);
  return bytes;
}

}  // namespace

const Tensor& SafetensorsFile::get(const std::string& name) const {
  for (const auto& [key, tensor] : tensors)
    if (key == name) return tensor;
  for (const auto& item : integers)
    if (item.first == name)
      throw SafetensorsError("SafetensorsFile::get: " + tensor_named(name) + " holds I64 integers, not floating-point values");
  if (tensors.empty())
    throw SafetensorsError("SafetensorsFile::get: no tensor named " + in_quotes(name) + ": the file holds no tensors");
  std::string names;
  for (std::size_t i = 0; i < tensors.size() && i < 8; ++i) {
    if (i > 0) names += ", ";
    names += in_quotes(tensors[i].first);
  }
  if (tensors.size() > 8) names += ", ...";
  throw SafetensorsError("SafetensorsFile::get: no tensor named " + in_quotes(name) + " among the file's " +
                         std::to_string(tensors.size()) + " tensors (" + names + ")");
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& item) { return item.first == name; });
}


namespace {

// The JSON header of `entries` laid out in order (data offsets from 0),
// padded so the data starts 8-byte aligned, as Python pads; `total` receives
// the data's size.
std::string header_of(const std::vector<Outgoing>& entries, const Metadata& metadata, uint64_t& total) {
  std::set<std::string_view> seen;
  std::string header = "{";
  if (!metadata.empty()) header += metadata_json(metadata);
  uint64_t offset = 0;
  for (const Outgoing& entry : entries) {
    if (entry.name == kMetadataKey)
      throw std::invalid_argument("to_safetensors_bytes: the name __metadata__ is reserved for the metadata");
    if (!seen.insert(entry.name).second)
      throw std::invalid_argument("to_safetensors_bytes: the name " + in_quotes(entry.name) + " appears twice");
    if (header.size() > 1) header += ',';
    header += json_string(entry.name, "tensor name " + in_quotes(entry.name)) + ":{\"dtype\":\"" +
              stored_name(entry.kind) + "\",\"shape\":" + shape_json(entry.shape) + ",\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + entry.nbytes) + "]}";
    offset += entry.nbytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  total = offset;
  return header;
}

}  // namespace

std::vector<uint8_t> to_safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata,
                                          const NamedIntArrays& integers) {
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  std::vector<Outgoing> entries;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined())
      throw std::invalid_argument("to_safetensors_bytes: tensor " + in_quotes(name) + " is undefined");
    const Tensor& data = contiguous.emplace_back(tensor.contiguous());
    entries.push_back({name, stored_of(data.dtype()), data.shape(), data.raw_data(),
                       static_cast<uint64_t>(data.numel()) * dtype_size(data.dtype())});
  }
  for (const auto& [name, array] : integers) {
    if (static_cast<int64_t>(array.values.size()) != numel_of(array.shape))
      throw std::invalid_argument("to_safetensors_bytes: " + tensor_named(name) + " has shape " +
                                  to_string(array.shape) + " but " + std::to_string(array.values.size()) + " values");
    entries.push_back({name, Stored::i64, array.shape, array.values.data(), array.values.size() * sizeof(int64_t)});
  }

  uint64_t offset = 0;
  const std::string header = header_of(entries, metadata, offset);

  std::vector<uint8_t> bytes;
  bytes.reserve(8 + header.size() + offset);
  append_u64_le(bytes, header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (const Outgoing& entry : entries) {
    const auto* first = static_cast<const uint8_t*>(entry.data);
    bytes.insert(bytes.end(), first, first + entry.nbytes);
  }
  return bytes;
}

SafetensorsFile parse_safetensors(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8)
    fail("the file is " + std::to_string(bytes.size()) + " bytes long, shorter than the 8-byte header length");
  const uint64_t header_size = read_u64_le(bytes.data());
  check_header_length(header_size, bytes.size() - 8);
  const Header header = parse_header(bytes.subspan(8, header_size));
  const std::span<const uint8_t> buffer = bytes.subspan(8 + header_size);

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const std::string& name : header.names) {
    const json& value = header.root.at(name);
    if (name == kMetadataKey)
      file.metadata = read_metadata(value);
    else
      entries.push_back(read_entry(name, value, buffer.size()));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_tiling(entries, buffer.size());

    for (Entry& entry : entries) {
    void* destination = nullptr;
    if (entry.kind == Stored::i64) {
      IntArray& array = file.integers.emplace_back(std::move(entry.name), IntArray{entry.shape, {}}).second;
      array.values.resize(static_cast<std::size_t>(numel_of(entry.shape)));
      destination = array.values.data();
    } else {
      const DType dtype = entry.kind == Stored::f32 ? DType::f32 : DType::f64;
      destination = file.tensors.emplace_back(std::move(entry.name), Tensor::empty(entry.shape, dtype)).second.raw_data();
    }
    if (entry.end > entry.begin) std::memcpy(destination, buffer.data() + entry.begin, entry.end - entry.begin);
  }
  return file;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata,
                      const NamedIntArrays& integers) {
  const std::vector<uint8_t> bytes = to_safetensors_bytes(tensors, metadata, integers);
  // write_file_atomic's messages name the file ("cannot write 'path' ..."), as they should.
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

SafetensorsStream::SafetensorsStream(const std::string& path, std::vector<Declared> entries, const Metadata& metadata) {
  std::vector<Outgoing> outgoing;
  for (const Declared& e : entries) {
    if (e.shape.empty())
      throw std::invalid_argument("SafetensorsStream: " + tensor_named(e.name) + " needs at least one axis");
    const uint64_t size = e.integer ? sizeof(int64_t) : dtype_size(e.dtype);
    outgoing.push_back({e.name, e.integer ? Stored::i64 : stored_of(e.dtype), e.shape, nullptr,
                        static_cast<uint64_t>(numel_of(e.shape)) * size});
  }
  uint64_t total = 0;
  const std::string header = header_of(outgoing, metadata, total);
  uint64_t offset = 8 + header.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(entries[i].shape[0], 1));
    entries_.push_back({entries[i], offset, outgoing[i].nbytes / rows});
    offset += outgoing[i].nbytes;
  }
  file_ = std::make_unique<AtomicFileWriter>(path);
  std::vector<uint8_t> start;
  append_u64_le(start, header.size());
  start.insert(start.end(), header.begin(), header.end());
  file_->write_at(0, std::string_view(reinterpret_cast<const char*>(start.data()), start.size()));
  // The file's full length now, so rows never written read as zeros.
  if (total > 0) file_->write_at(offset - 1, std::string_view("\0", 1));
}

SafetensorsStream::~SafetensorsStream() = default;

const SafetensorsStream::Placed& SafetensorsStream::placed(const std::string& name, int64_t first, int64_t rows,
                                                           bool integer) const {
  for (const Placed& p : entries_) {
    if (p.entry.name != name) continue;
    if (p.entry.integer != integer || first < 0 || rows < 0 || first + rows > p.entry.shape[0])
      throw std::invalid_argument("SafetensorsStream: " + std::to_string(rows) + (integer ? " I64" : "") +
                                  " rows from row " + std::to_string(first) + " do not fit " + tensor_named(name) +
                                  " " + to_string(p.entry.shape) + (p.entry.integer ? " (I64)" : ""));
    return p;
  }
  throw std::invalid_argument("SafetensorsStream: no entry " + in_quotes(name) + " was declared");
}

void SafetensorsStream::write_rows(const std::string& name, int64_t first, const Tensor& rows) {
  const int64_t n = rows.dim() > 0 ? rows.size(0) : -1;
  const Placed& p = placed(name, first, n, false);
  Shape want = p.entry.shape;
  want[0] = n;
  if (rows.shape() != want || rows.dtype() != p.entry.dtype)
    throw std::invalid_argument("SafetensorsStream: rows for " + tensor_named(name) + " must be " +
                                to_string(p.entry.dtype) + " " + to_string(want) + ", got " +
                                to_string(rows.dtype()) + " " + to_string(rows.shape()));
  const Tensor c = rows.contiguous();
  file_->write_at(p.begin + static_cast<uint64_t>(first) * p.row_bytes,
                  std::string_view(static_cast<const char*>(c.raw_data()),
                                   static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype())));
}

// values: whole rows of the entry, row-major.
void SafetensorsStream::write_rows(const std::string& name, int64_t first, std::span<const int64_t> values) {
  const uint64_t row_values = std::max<uint64_t>(placed(name, first, 0, true).row_bytes / sizeof(int64_t), 1);
  const int64_t n = values.size() % row_values == 0 ? static_cast<int64_t>(values.size() / row_values) : -1;
  const Placed& p = placed(name, first, n, true);
  file_->write_at(p.begin + static_cast<uint64_t>(first) * p.row_bytes,
                  std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
}

void SafetensorsStream::finish() { file_->commit(); }

SafetensorsFile load_safetensors(const std::string& path) {
  try {
    return parse_safetensors(read_file(path));
  } catch (const SafetensorsError& e) {
    throw SafetensorsError(in_quotes(path) + " is not a valid safetensors file: " + e.what());
  }
}

}  // namespace headlab::core
