#include "tests/cli/fixtures.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace headlab::cli_test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "headlab-cli-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("TempDir: mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<std::string> tiny(const std::vector<std::pair<std::string, std::string>>& changes) {
  std::vector<std::pair<std::string, std::string>> flags = {
      {"--d-model", "16"}, {"--batch", "16"},   {"--eval-batch", "32"}, {"--steps", "20"},
      {"--analyze-every", "0"}, {"--threads", "1"}};
  for (const auto& [flag, value] : changes) {
    auto it = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == flag; });
    if (value == "-") {
      if (it != flags.end()) flags.erase(it);
    } else if (it != flags.end()) {
      it->second = value;
    } else {
      flags.emplace_back(flag, value);
    }
  }
  std::vector<std::string> out;
  for (const auto& [flag, value] : flags) {
    out.push_back(flag);
    if (!value.empty()) out.push_back(value);
  }
  return out;
}

namespace {

// The function a line names the way code reports itself, "ns::fn:" or
// "snake_case:" right before a space or the end of the line; "" if none.
// (A hand-written scan: std::regex trips GCC 12's -Wmaybe-uninitialized
// under the sanitizers.)
std::string function_name_in(const std::string& line) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  const auto lower = [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; };
  for (std::size_t colon = line.find(':'); colon != std::string::npos; colon = line.find(':', colon + 1)) {
    if (colon + 1 < line.size() && line[colon + 1] != ' ') continue;  // "a::b" or "12:30"
    if (colon == 0 || !word(line[colon - 1])) continue;
    std::size_t start = colon;
    while (start > 0 && (word(line[start - 1]) || line[start - 1] == ':')) --start;
    std::string token = line.substr(start, colon - start);
    const std::size_t scope = token.rfind("::");
    if (scope != std::string::npos && scope > 0 && (std::isalpha(static_cast<unsigned char>(token[0])) != 0 || token[0] == '_'))
      return token;
    token = token.substr(scope == std::string::npos ? 0 : scope + 2);
    const bool snake = token.find('_') != std::string::npos && token.front() != '_' && token.back() != '_' &&
                       token.find("__") == std::string::npos && std::all_of(token.begin(), token.end(), lower);
    if (snake) return token;
  }
  return "";
}

}  // namespace

::testing::AssertionResult clean_failure(const RunResult& r, int status, const std::vector<std::string>& mentions) {
  if (r.timed_out || r.signal != 0 || r.exit_code != status)
    return ::testing::AssertionFailure() << "expected exit status " << status << ", got " << r.describe();
  const std::vector<std::string> lines = r.err_lines();
  if (lines.size() != 1)
    return ::testing::AssertionFailure() << "expected one line on stderr, got " << lines.size() << ": " << r.describe();
  const std::string& line = lines[0];
  if (!line.starts_with("headlab")) return ::testing::AssertionFailure() << "the line does not start with headlab: " << line;
  for (const std::string& m : mentions)
    if (line.find(m) == std::string::npos)
      return ::testing::AssertionFailure() << "the line does not mention '" << m << "': " << line;
  for (const char* leak : {"std::", "what()", "terminate", "[json.exception", "Sanitizer", "runtime error:", "Aborted"})
    if (line.find(leak) != std::string::npos)
      return ::testing::AssertionFailure() << "the line shows internals ('" << leak << "'): " << line;
  // A message speaks of flags, files and values, never of the functions that
  // found the problem: no "optim::parse_schedule_kind:", "load_safetensors:",
  // "SafetensorsFile::get:".
  if (const std::string name = function_name_in(line); !name.empty())
    return ::testing::AssertionFailure() << "the line names a function ('" << name << "'): " << line;
  return ::testing::AssertionSuccess();
}

std::vector<std::string> train_command(const std::string& out,
                                       const std::vector<std::pair<std::string, std::string>>& changes) {
  std::vector<std::string> args = {"train", "--out", out};
  for (const std::string& a : tiny(changes)) args.push_back(a);
  return args;
}

const std::string& shared_run() {
  static const std::string dir = [] {
    // Keyed by the binary's identity, so a rebuilt headlab trains a fresh one.
    struct stat info {};
    if (::stat(headlab_path().c_str(), &info) != 0)
      throw std::runtime_error("shared_run: no headlab binary at " + headlab_path());
    const std::string key = std::to_string(info.st_mtim.tv_sec) + "-" + std::to_string(info.st_mtim.tv_nsec) + "-" +
                            std::to_string(info.st_size);
    const std::string cache = (fs::path(headlab_path()).parent_path() / "tests" / "cli" / ("fixture-run-" + key)).string();
    if (fs::exists(cache + "/heads.json")) return cache;
    fs::create_directories(fs::path(cache).parent_path());
    // Runs trained by earlier builds of headlab are of no further use.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::path(cache).parent_path(), ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("fixture-run-") && name.find(".staging-") == std::string::npos && entry.path() != cache)
        fs::remove_all(entry.path(), ec);
    }
    // Trained beside the cache and renamed into place: tests running in
    // parallel either win the rename or use the winner's folder.
    const std::string staging = cache + ".staging-" + std::to_string(::getpid());
    const RunResult r = run_headlab(train_command(staging, {{"--log-every", "5"}}), fs::temp_directory_path().string());
    if (r.exit_code != 0) throw std::runtime_error("shared_run: training the fixture failed: " + r.describe());
    fs::rename(staging, cache, ec);
    if (ec) fs::remove_all(staging, ec);
    return cache;
  }();
  return dir;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("read_bytes: cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw std::runtime_error("write_bytes: cannot write " + path);
}

bool is_empty_dir(const std::string& path) { return fs::is_directory(path) && fs::is_empty(path); }

std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    struct stat info {};
    ::stat(entry.path().c_str(), &info);
    files[fs::relative(entry.path(), dir).string()] =
        std::to_string(info.st_size) + "@" + std::to_string(info.st_mtim.tv_sec) + "." +
        std::to_string(info.st_mtim.tv_nsec);
  }
  return files;
}

void copy_dir(const std::string& from, const std::string& to) { fs::copy(from, to, fs::copy_options::recursive); }

nlohmann::json page_data(const std::string& html) {
  const std::string open = "id=\"headlab-data\">";
  const auto begin = html.find(open);
  if (begin == std::string::npos) return nullptr;
  const auto end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

std::vector<nlohmann::json> metrics_without_timing(const std::string& run_dir) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    j.erase("tokens_per_s");
    lines.push_back(std::move(j));
  }
  return lines;
}

RawSafetensors RawSafetensors::read(const std::string& path) {
  const std::string bytes = read_bytes(path);
  if (bytes.size() < 8) throw std::runtime_error("RawSafetensors: " + path + " is too short");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  RawSafetensors raw;
  raw.header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  raw.data = bytes.substr(8 + n);
  return raw;
}

std::string RawSafetensors::bytes() const {
  const std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

nlohmann::json RawSafetensors::meta_json(const std::string& key) const {
  return nlohmann::json::parse(header.at("__metadata__").at(key).get<std::string>());
}

void RawSafetensors::set_meta_json(const std::string& key, const nlohmann::json& value) {
  header["__metadata__"][key] = value.dump();
}

std::string RawSafetensors::tensor_bytes(const std::string& name) const {
  const auto& offsets = header.at(name).at("data_offsets");
  const auto begin = offsets.at(0).get<std::size_t>(), end = offsets.at(1).get<std::size_t>();
  return data.substr(begin, end - begin);
}

void RawSafetensors::remove(const std::string& name) {
  const auto offsets = header.at(name).at("data_offsets");
  const auto begin = offsets.at(0).get<uint64_t>(), end = offsets.at(1).get<uint64_t>();
  data.erase(begin, end - begin);
  header.erase(name);
  for (auto& [key, entry] : header.items()) {
    if (key == "__metadata__") continue;
    auto& o = entry["data_offsets"];
    if (o[0].get<uint64_t>() >= end) o = {o[0].get<uint64_t>() - (end - begin), o[1].get<uint64_t>() - (end - begin)};
  }
}

void RawSafetensors::add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                         const std::string& bytes) {
  header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
  data += bytes;
}

std::map<std::string, std::string> tensors_of(const std::string& checkpoint) {
  const RawSafetensors raw = RawSafetensors::read(checkpoint);
  std::map<std::string, std::string> tensors;
  for (const auto& [name, entry] : raw.header.items()) {
    if (name == "__metadata__") continue;
    tensors[name] = entry.at("dtype").dump() + entry.at("shape").dump() + ":" + raw.tensor_bytes(name);
  }
  return tensors;
}

bool wait_until(const std::function<bool()>& ready, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool catches_signal(pid_t pid, int sig) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("SigCgt:")) return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
  return false;
}

int64_t checkpoint_step(const std::string& checkpoint) {
  const RawSafetensors raw = RawSafetensors::read(checkpoint);
  return std::stoll(raw.header.at("__metadata__").at("step").get<std::string>());
}

}  // namespace headlab::cli_test
